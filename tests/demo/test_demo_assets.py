"""The demo WORKFLOW.md and issues.yaml load with the project's own loaders and fit the demo."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from symphony_tui.config.prompt import render_prompt
from symphony_tui.config.workflow import load_workflow
from symphony_tui.demo.directives import parse_directives
from symphony_tui.domain import BlockerRef, Issue

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "demo"


def _issues() -> list[dict]:
    return yaml.safe_load((ASSETS / "issues.yaml").read_text())["issues"]


def _issue(raw: dict) -> Issue:
    return Issue(
        id=raw["id"],
        identifier=raw["identifier"],
        title=raw["title"],
        description=raw.get("description"),
        priority=raw.get("priority"),
        state=raw["state"],
        labels=tuple(label.lower() for label in raw.get("labels", [])),
        blocked_by=tuple(BlockerRef(identifier=b) for b in raw.get("blocked_by", [])),
        created_at=raw.get("created_at"),
    )


def test_workflow_settings(tmp_path: Path) -> None:
    for name in ("WORKFLOW.md", "issues.yaml", "README.md"):
        shutil.copy(ASSETS / name, tmp_path / name)
    wf = load_workflow(tmp_path / "WORKFLOW.md")
    s = wf.settings
    assert s.tracker.kind == "local"
    assert s.tracker.path == str((tmp_path / "issues.yaml").resolve())
    assert s.workspace.root == str((tmp_path / "workspaces").resolve())
    assert s.tracker.active_states == ("Todo", "In Progress")
    assert s.tracker.terminal_states == ("Done", "Cancelled")
    assert s.agent.backend == "codex" and s.agent.max_concurrent_agents == 3
    assert s.agent.max_turns >= 2  # DEMO-5 needs a continuation turn
    assert "symphony_tui.demo.agent" in s.codex.command and "SYMPHONY_PYTHON" in s.codex.command
    assert s.codex.approval_policy == "on-request"
    assert s.codex.thread_sandbox == "workspace-write"
    assert s.polling.interval_ms == 2000
    assert s.hooks.after_create and "git init" in s.hooks.after_create
    assert s.hooks.before_run
    assert s.pricing["symphony-demo"].output == 10  # its console shows spend in money


def test_issues_file_fits_the_shared_format_and_the_demo() -> None:
    issues = _issues()
    ids = {i["id"] for i in issues} | {i["identifier"] for i in issues}
    assert len(issues) >= 6
    assert len({i["identifier"] for i in issues}) == len(issues)
    seen: set[str] = set()
    for raw in issues:
        assert {"id", "identifier", "title", "state"} <= raw.keys()
        assert all(b in ids for b in raw.get("blocked_by", []))
        d = parse_directives(raw.get("description") or "")
        assert d.unknown == (), raw["identifier"]
        seen |= d.known
    assert seen == {"approval", "fail-once", "slow", "two-turns", "escape-sample"}
    states = {i["state"] for i in issues}
    assert {"Todo", "In Progress"} <= states
    assert states - {"Todo", "In Progress", "Done", "Cancelled"}  # one never dispatched
    assert any(i.get("blocked_by") for i in issues)


def test_prompt_renders_strictly_for_every_issue() -> None:
    wf = load_workflow(ASSETS / "WORKFLOW.md")
    for raw in _issues():
        issue = _issue(raw)
        for attempt in (None, 2):
            text = render_prompt(wf.prompt_template, issue, attempt)
            assert issue.identifier in text and issue.title in text
            assert (
                parse_directives(text).known == parse_directives(raw.get("description") or "").known
            )
            assert ("attempt 2" in text) == (attempt == 2)
