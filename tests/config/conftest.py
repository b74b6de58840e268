from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from symphony_tui.domain import BlockerRef, Issue

from .corpus_report import CORPUS_REPORT


@pytest.fixture
def issue() -> Issue:
    return Issue(
        id="id-1",
        identifier="ABC-1",
        title="Fix the flux capacitor",
        description="It sparks.",
        priority=2,
        state="Todo",
        url="https://example.test/ABC-1",
        labels=("bug", "easy"),
        blocked_by=(BlockerRef(id="id-0", identifier="ABC-0", state="Done"),),
        created_at=datetime(2026, 11, 1, 9, 0, tzinfo=UTC),
    )


@pytest.fixture
def write_workflow(tmp_path: Path):
    def write(text: str, name: str = "WORKFLOW.md") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The compatibility corpus's figures (test_workflow_corpus.py), when it ran."""
    lines = config.stash.get(CORPUS_REPORT, None)
    if lines:
        terminalreporter.write_sep("-", "WORKFLOW.md compatibility corpus")
        for line in lines:
            terminalreporter.write_line(line)
