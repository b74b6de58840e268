"""The scheduler's own credentials never reach the agents' environment."""

from __future__ import annotations

from symphony_tui.runtime import build_runtime, scheduler_secret_names

from .conftest import write_workflow


def test_tracker_key_variables_are_kept_from_agents(tmp_path):
    path = write_workflow(tmp_path, "")
    text = path.read_text().replace("kind: local\n", "kind: local\n  api_key: $MY_TRACKER_KEY\n")
    path.write_text(text)
    env = {"PATH": "/usr/bin", "LINEAR_API_KEY": "lin_api_secret123456", "MY_TRACKER_KEY": "k-1234"}
    runtime = build_runtime(path, env=env, lock=False, events_path=tmp_path / "e.jsonl")
    backend = runtime.orchestrator._backend("codex")
    child = backend.child_env(runtime.store.current.settings)
    assert "LINEAR_API_KEY" not in child and "MY_TRACKER_KEY" not in child
    assert child["PATH"]
    assert scheduler_secret_names({"tracker": {"api_key": "${OTHER}"}}) >= {
        "OTHER",
        "LINEAR_API_KEY",
    }


def test_a_rest_trackers_credential_variables_are_kept_from_agents(tmp_path):
    """Jira's default variable and the one ``api_token`` names (GitLab's and Asana's alike:
    ``trackers/*`` declare ``secret_environment_names``)."""
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: jira\n  provider:\n    base_url: https://site.atlassian.net\n"
        "    email: bot@example.com\n    api_token: $MY_JIRA\n    project_key: SD\n"
        "workspace:\n  root: ws\n---\nWork on {{ issue.identifier }}\n"
    )
    env = {"PATH": "/usr/bin", "JIRA_API_TOKEN": "jira-default", "MY_JIRA": "jira-named"}
    runtime = build_runtime(path, env=env, lock=False, events_path=tmp_path / "e.jsonl")
    assert runtime.orchestrator.tracker.kind == "jira"
    child = runtime.orchestrator._backend("codex").child_env(runtime.store.current.settings)
    assert "JIRA_API_TOKEN" not in child and "MY_JIRA" not in child and child["PATH"]
