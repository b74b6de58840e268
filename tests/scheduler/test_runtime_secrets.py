"""The scheduler's own credentials never reach the agents' environment."""

from __future__ import annotations

import pytest

from symphony_tui.runtime import build_runtime, scheduler_secret_names

from .conftest import write_workflow


def test_tracker_key_variables_are_kept_from_agents(tmp_path):
    path = write_workflow(tmp_path, "")
    text = path.read_text().replace("kind: local\n", "kind: local\n  api_key: $MY_TRACKER_KEY\n")
    path.write_text(text)
    env = {"PATH": "/usr/bin", "LINEAR_API_KEY": "lin_api_secret123456", "MY_TRACKER_KEY": "k-1234"}
    runtime = build_runtime(path, env=env, lock=False, events_path=tmp_path / "e.jsonl")
    backend = runtime.orchestrator.backends.get("codex")
    child = backend.child_env(runtime.store.current.settings)
    assert "LINEAR_API_KEY" not in child and "MY_TRACKER_KEY" not in child
    assert child["PATH"]
    assert scheduler_secret_names({"tracker": {"api_key": "${OTHER}"}}) >= {
        "OTHER",
        "LINEAR_API_KEY",
    }


PROVIDERS = {
    "jira": (
        "base_url: https://site.atlassian.net\n    email: bot@example.com\n"
        "    api_token: $MY_TOKEN\n    project_key: SD",
        ("JIRA_API_TOKEN",),
    ),
    "gitlab": ("token: $MY_TOKEN\n    project_path: g/p", ("GITLAB_PAT", "GITLAB_ACCESS_TOKEN")),
    "asana": ("api_key: $MY_TOKEN\n    project_gid: '1'", ("ASANA_PAT",)),
}


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_a_rest_trackers_credential_variables_are_kept_from_agents(tmp_path, kind):
    """The default variables and the one the credential setting names, which only the
    adapter declares (``secret_environment_names()``, collected by the runtime)."""
    provider, defaults = PROVIDERS[kind]
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        f"---\ntracker:\n  kind: {kind}\n  provider:\n    {provider}\n"
        "workspace:\n  root: ws\n---\nWork on {{ issue.identifier }}\n"
    )
    env = {"PATH": "/usr/bin", "MY_TOKEN": "named", **dict.fromkeys(defaults, "default")}
    runtime = build_runtime(path, env=env, lock=False, events_path=tmp_path / "e.jsonl")
    assert runtime.orchestrator.tracker.kind == kind
    child = runtime.orchestrator.backends.get("codex").child_env(runtime.store.current.settings)
    assert not {"MY_TOKEN", *defaults} & set(child) and child["PATH"]
