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
