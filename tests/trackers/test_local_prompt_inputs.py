"""Prompt inputs the local tracker reads from its file: assignee(s), repository, comments."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.local import parse_issues

FILE = Path("issues.yaml")


def one(text: str):
    (issue,) = parse_issues(
        FILE, "issues:\n  - id: a\n    identifier: A-1\n    title: T\n    state: Todo\n" + text
    )
    return issue


def test_assignee_repository_and_comments_are_read() -> None:
    issue = one(
        "    assignee: ana\n"
        "    repository: acme/app\n"
        "    comments:\n"
        "      - author: ana\n"
        "        body: Keep the flag.\n"
        "        created_at: 2026-01-02T10:00:00Z\n"
        "        id: 7\n"
        "      - Just text.\n"
    )
    assert issue.assignees == ("ana",)
    assert issue.repository == "acme/app"
    first, second = issue.comments
    assert (first.id, first.author, first.body) == ("7", "ana", "Keep the flag.")
    assert first.created_at == datetime(2026, 1, 2, 10, tzinfo=UTC)
    assert (second.author, second.body) == (None, "Just text.")
    view = issue.template_view()
    assert view["assignee"] == "ana"
    assert view["comments"][0]["author_name"] == "ana"


def test_assignees_list_wins_over_assignee() -> None:
    assert one("    assignees: [bo, cy]\n    assignee: ana\n").assignees == ("bo", "cy")


def test_without_them_the_prompt_inputs_are_empty() -> None:
    issue = one("")
    assert (issue.assignees, issue.repository, issue.comments) == ((), None, ())
    view = issue.template_view()
    assert (view["assignee"], view["comments"]) == (None, [])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("    comments: nope\n", "comments must be a list, got str"),
        ("    comments:\n      - author: ana\n", "comment 1 must be a text or a map with a body"),
        (
            "    comments:\n      - body: x\n        created_at: yesterday\n",
            "comment 1: created_at:",
        ),
    ],
)
def test_bad_comments_fail_with_one_line_naming_the_entry(text: str, message: str) -> None:
    with pytest.raises(TrackerError) as info:
        one(text)
    assert message in info.value.message
    assert "A-1" in info.value.message or "entry 1" in info.value.message
    assert "\n" not in str(info.value)
