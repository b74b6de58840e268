"""Trackers declare the environment variables they read credentials from (spec §15.3), and
the runtime withholds them from every agent and hook (config/child_env.py)."""

from __future__ import annotations

from pathlib import Path

from symphony_tui import runtime as runtime_module
from symphony_tui.config.settings import resolve_settings
from symphony_tui.runtime import build_runtime
from symphony_tui.trackers.base import declared_secret_names
from symphony_tui.trackers.github import GitHubTracker
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui.trackers.local import LocalTracker


def _settings(tracker: dict):
    return resolve_settings({"tracker": tracker}, Path("."), env={})


def test_each_adapter_declares_its_secret_names() -> None:
    local = _settings({"kind": "local", "path": "issues.yaml"})
    assert declared_secret_names(LocalTracker(lambda: local)) == frozenset()
    linear = _settings({"kind": "linear", "api_key": "$TEAM_LINEAR_KEY", "project_slug": "p"})
    assert declared_secret_names(LinearTracker(lambda: linear)) >= {
        "LINEAR_API_KEY",
        "TEAM_LINEAR_KEY",
    }
    github = _settings({"kind": "github", "repo": "o/r", "token": "$BOT_TOKEN"})
    assert declared_secret_names(GitHubTracker(lambda: github)) >= {"GITHUB_TOKEN", "BOT_TOKEN"}
    assert declared_secret_names(object()) == frozenset()  # a double without the hook


class DeclaringTracker(LocalTracker):
    def secret_environment_names(self) -> frozenset[str]:
        return frozenset({"VENDOR_TRACKER_TOKEN"})


async def test_a_declared_name_never_reaches_an_agent_or_a_hook(tmp_path, monkeypatch) -> None:
    (tmp_path / "issues.yaml").write_text("issues: []\n")
    (tmp_path / "WORKFLOW.md").write_text(
        "---\ntracker:\n  kind: local\n  path: issues.yaml\nworkspace:\n  root: ws\n"
        "hooks:\n  before_run: env > env.txt\n---\nWork\n"
    )
    monkeypatch.setattr(
        runtime_module,
        "create_tracker",
        lambda store: DeclaringTracker(lambda: store.current.settings),
    )
    env = {"VENDOR_TRACKER_TOKEN": "vendor-secret", "PATH": "/usr/bin:/bin"}
    rt = build_runtime(tmp_path / "WORKFLOW.md", env=env, lock=False)
    try:
        settings = rt.store.current.settings
        child = rt.orchestrator.backends.get("codex").child_env(settings)
        assert "VENDOR_TRACKER_TOKEN" not in child
        workspace = tmp_path / "ws" / "A-1"
        workspace.mkdir(parents=True)
        result = await rt.orchestrator.state.workspaces.run_hook("before_run", workspace)
        assert result is not None and result.ok, result
        assert "vendor-secret" not in (workspace / "env.txt").read_text()
    finally:
        await rt.close()


def test_the_rest_trackers_declare_their_default_and_named_variables() -> None:
    from symphony_tui.trackers.asana import AsanaTracker
    from symphony_tui.trackers.gitlab import GitLabTracker
    from symphony_tui.trackers.jira import JiraTracker

    jira = _settings({"kind": "jira", "provider": {"api_token": "$TEAM_JIRA", "project_key": "SD"}})
    assert declared_secret_names(JiraTracker(lambda: jira)) >= {"JIRA_API_TOKEN", "TEAM_JIRA"}
    gitlab = _settings({"kind": "gitlab", "token": "${BOT_GL}", "project_path": "g/p"})
    assert declared_secret_names(GitLabTracker(lambda: gitlab)) >= {
        "GITLAB_PAT",
        "GITLAB_ACCESS_TOKEN",
        "BOT_GL",
    }
    asana = _settings({"kind": "asana", "project_gid": "1"})
    assert declared_secret_names(AsanaTracker(lambda: asana)) >= {"ASANA_PAT"}
