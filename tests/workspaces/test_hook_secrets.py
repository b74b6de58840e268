"""Hooks get the scheduler's environment through the agents' recipe, so the
tracker secrets are scrubbed (unless ``hooks.env`` passes one on purpose), and every
configured secret is masked whatever the tracker."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.workflow import load_workflow
from symphony_tui.domain import Issue
from symphony_tui.observability.redact import redact
from symphony_tui.runtime import build_runtime
from symphony_tui.workspaces.manager import WorkspaceManager

SHOW = 'echo "linear=${LINEAR_API_KEY:-none} mine=${MY_TRACKER_KEY:-none} path=${PATH:+set}"'


def issue() -> Issue:
    return Issue(id="id-1", identifier="ABC-1", title="t", state="Todo")


def settings_for(tmp_path: Path, hooks: dict, environ: dict[str, str]):
    raw = {
        "tracker": {"kind": "local", "path": "issues.yaml", "api_key": "$MY_TRACKER_KEY"},
        "workspace": {"root": str(tmp_path / "ws")},
        "hooks": hooks,
    }
    return resolve_settings(raw, tmp_path, environ)


ENV = {"LINEAR_API_KEY": "linear-value-q1", "MY_TRACKER_KEY": "mine-value-q2"}


async def test_hooks_do_not_inherit_the_tracker_secrets(tmp_path: Path, monkeypatch) -> None:
    for name, value in ENV.items():  # in the scheduler's own environment too
        monkeypatch.setenv(name, value)
    settings = settings_for(tmp_path, {"before_run": SHOW + " > seen.txt"}, ENV)
    mgr = WorkspaceManager(lambda: settings, env=ENV)
    path, _ = await mgr.ensure(issue())
    result = await mgr.run_hook("before_run", path, issue())
    assert result is not None and result.ok
    assert (path / "seen.txt").read_text().split() == ["linear=none", "mine=none", "path=set"]


async def test_hooks_env_passes_a_secret_explicitly(tmp_path: Path) -> None:
    hooks = {
        "before_run": SHOW + " extra=$EXTRA drop=${DROPME:-gone} > seen.txt",
        "env": {"LINEAR_API_KEY": "$LINEAR_API_KEY", "EXTRA": "x", "DROPME": "$UNSET_Q"},
    }
    settings = settings_for(tmp_path, hooks, ENV)
    mgr = WorkspaceManager(lambda: settings, env={**ENV, "DROPME": "1"})
    path, _ = await mgr.ensure(issue())
    result = await mgr.run_hook("before_run", path, issue())
    assert result is not None and result.ok
    # Asked for: LINEAR_API_KEY; not asked for: MY_TRACKER_KEY. An unset $VAR removes DROPME.
    assert (path / "seen.txt").read_text().split() == [
        "linear=linear-value-q1",
        "mine=none",
        "path=set",
        "extra=x",
        "drop=gone",
    ]


def test_every_configured_secret_is_masked_whatever_the_tracker(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: local\n  path: issues.yaml\n"
        "openhands:\n  session_api_key_env: OH_KEY_Q\n---\nprompt\n"
    )
    env = {"LINEAR_API_KEY": "plainlinearvalue77", "OH_KEY_Q": "plainserverkey88"}
    load_workflow(path, env=env)
    line = redact("hook said plainlinearvalue77 and plainserverkey88")
    assert "plainlinearvalue77" not in line and "plainserverkey88" not in line


async def test_runtime_hooks_get_the_scrubbed_environment(tmp_path: Path) -> None:
    from tests.scheduler.conftest import write_workflow

    wf = write_workflow(tmp_path, f"hooks:\n  before_run: '{SHOW} > seen.txt'\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **ENV}
    runtime = build_runtime(wf, env=env, lock=False, events_path=tmp_path / "e.jsonl")
    try:
        mgr = runtime.orchestrator.workspaces
        path, _ = await mgr.ensure(issue())
        result = await mgr.run_hook("before_run", path, issue())
        assert result is not None and result.ok, result
        # This workflow names no other key variable: only LINEAR_API_KEY is a secret.
        seen = (path / "seen.txt").read_text().split()
        assert seen == ["linear=none", "mine=mine-value-q2", "path=set"]
    finally:
        await runtime.close()
