"""``tracker.kind: github`` settings: a file written for the reference's adapter loads
unchanged (``tracker.provider.repo/token/api_url``, states open/closed), the token comes from
``$GITHUB_TOKEN`` or a named variable and is scrubbed from every child, and bad values are
one-line dispatch errors."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.config.child_env import secret_env_names
from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.config.workflow import load_workflow
from symphony_tui.runtime import create_tracker
from symphony_tui.scheduler.project_lock import project_key_for

REFERENCE = """\
---
tracker:
  kind: github
  provider:
    repo: "octo/app"
    token: "$GITHUB_TOKEN"
  active_states: ["open"]
  terminal_states: ["closed"]
workspace:
  root: ws
agent:
  max_turns: 3
codex:
  command: "codex app-server"
  approval_policy: "never"
observability:
  dashboard_enabled: false
---

Fix {{ issue.identifier }}.
"""


def test_reference_workflow_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(REFERENCE)
    workflow = load_workflow(path, env={"GITHUB_TOKEN": "ghp_x"})
    tracker = workflow.settings.tracker
    assert (tracker.kind, tracker.repo, tracker.api_key) == ("github", "octo/app", "ghp_x")
    assert tracker.api_url == "https://api.github.com"
    assert (tracker.active_states, tracker.terminal_states) == (("open",), ("closed",))
    assert validate_dispatch(workflow.settings) == []
    assert "GITHUB_TOKEN" in secret_env_names(workflow.raw)
    assert project_key_for(workflow.settings) == "github:https://api.github.com#octo/app"


def test_token_defaults_to_github_token_and_states_to_open_closed() -> None:
    raw = {"tracker": {"kind": "github", "repo": "o/r"}}
    settings = resolve_settings(raw, Path("."), env={"GITHUB_TOKEN": "ghp_default"})
    assert settings.tracker.api_key == "ghp_default"
    assert settings.tracker.active_states == ("open",)
    named = {"tracker": {"kind": "github", "repo": "o/r", "token": "$BOT_TOKEN"}}
    settings = resolve_settings(named, Path("."), env={"BOT_TOKEN": "ghp_bot", "GITHUB_TOKEN": "x"})
    assert settings.tracker.api_key == "ghp_bot"
    assert {"BOT_TOKEN", "GITHUB_TOKEN"} <= secret_env_names(named)
    repo_env = resolve_settings(
        {"tracker": {"kind": "github"}}, Path("."), env={"GITHUB_REPO": "a/b"}
    )
    assert repo_env.tracker.repo == "a/b"


def test_a_token_read_from_a_file_loses_its_newline() -> None:
    # "Bearer <token>\n" is an illegal header whose error quotes the whole token
    raw = {"tracker": {"kind": "github", "repo": "o/r"}}
    settings = resolve_settings(raw, Path("."), env={"GITHUB_TOKEN": "ghp_filetoken123\n"})
    assert settings.tracker.api_key == "ghp_filetoken123"
    named = {"tracker": {"kind": "github", "repo": "o/r", "token": "$BOT"}}
    assert resolve_settings(named, Path("."), env={"BOT": "  \n"}).tracker.api_key is None
    linear = {"tracker": {"kind": "linear", "project_slug": "p"}}
    settings = resolve_settings(linear, Path("."), env={"LINEAR_API_KEY": "lin_api_abc123\r\n"})
    assert settings.tracker.api_key == "lin_api_abc123"


def test_linear_workflows_do_not_scrub_github_token() -> None:
    assert "GITHUB_TOKEN" not in secret_env_names({"tracker": {"kind": "linear"}})


def test_board_settings_keep_board_states() -> None:
    raw = {"tracker": {"kind": "github", "repo": "o/r", "project": {"number": 3}}}
    settings = resolve_settings(raw, Path("."), env={"GITHUB_TOKEN": "t"})
    assert settings.tracker.project is not None and settings.tracker.project.number == 3
    assert settings.tracker.project.status_field == "Status"
    assert settings.tracker.active_states == ("Todo", "In Progress")
    assert validate_dispatch(settings) == []


def test_bad_github_settings_are_one_line_errors() -> None:
    def problems(**tracker: object) -> list[str]:
        raw = {"tracker": {"kind": "github", **tracker}}
        return validate_dispatch(resolve_settings(raw, Path("."), env={}))

    assert [p.split(":")[0] for p in problems()] == ["missing_github_repo", "missing_github_token"]
    assert problems(repo="no-slash", token="t")[0].startswith("invalid_github_repo")
    bad_url = problems(repo="o/r", token="t", api_url="http://ghe.example/api/v3")
    assert bad_url[0].startswith("invalid_github_api_url")
    assert problems(repo="o/r", token="t", api_url="http://127.0.0.1:9/") == []
    states = problems(repo="o/r", token="t", active_states=["Todo"])
    assert states[0].startswith("invalid_github_states") and "'Todo'" in states[0]
    assert all("\n" not in p for p in states + bad_url)


def test_runtime_builds_a_github_tracker(tmp_path: Path) -> None:
    from symphony_tui.config.store import WorkflowStore

    path = tmp_path / "WORKFLOW.md"
    path.write_text(REFERENCE)
    store = WorkflowStore(path, env={"GITHUB_TOKEN": "ghp_x"})
    store.load_initial()
    assert create_tracker(store).kind == "github"


def test_a_misspelt_board_key_is_reported() -> None:
    from symphony_tui.config.unread import unread_warnings

    raw = {"tracker": {"kind": "github", "project": {"number": 1, "priorty_field": "P"}}}
    assert unread_warnings(raw) == (
        "unknown setting tracker.project.priorty_field is ignored (nothing reads it); "
        "did you mean tracker.project.priority_field?",
    )
