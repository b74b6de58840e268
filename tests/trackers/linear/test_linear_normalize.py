"""Normalization rules of spec §11.3 on hand-written nodes (edge cases the fake cannot send)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear.normalize import (
    extract_blockers,
    extract_labels,
    normalize_issue,
    parse_priority,
    parse_timestamp,
)

from .test_linear_errors import node


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(0, 0), (1, 1), (4, 4), (2.0, 2), (2.5, None), ("2", None), (True, None), (None, None)],
)
def test_priority_integer_or_null(raw: object, expected: int | None) -> None:
    assert parse_priority(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-01-02T03:04:05.678Z", datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
        (
            "2026-01-02T03:04:05+02:00",
            datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
        ),
        ("yesterday", None),
        ("", None),
        (12345, None),
        (None, None),
    ],
)
def test_timestamps(raw: object, expected: datetime | None) -> None:
    assert parse_timestamp(raw) == expected


def test_labels_lowercase_deduplicated_and_tolerant() -> None:
    raw = {"nodes": [{"name": "Bug"}, {"name": "bug"}, {"name": " UI "}, {"name": None}, "x"]}
    assert extract_labels(raw) == ("bug", "ui")
    assert extract_labels(None) == ()


def test_blockers_only_from_blocks_relations() -> None:
    raw = {
        "nodes": [
            {
                "type": "blocks",
                "issue": {"id": "a", "identifier": "A-1", "state": {"name": "Todo"}},
            },
            {"type": "Blocks ", "issue": {"id": "b", "identifier": "B-1", "state": None}},
            {"type": "related", "issue": {"id": "c", "identifier": "C-1"}},
            {"type": "duplicate", "issue": {"id": "d"}},
            {"type": "blocks", "issue": None},  # blocker the key cannot read: still blocks
            {"issue": {"id": "e"}},
        ]
    }
    refs = [(b.id, b.identifier, b.state) for b in extract_blockers(raw)]
    assert refs == [("a", "A-1", "Todo"), ("b", "B-1", None), (None, None, None)]


def test_normalize_keeps_url_and_branch() -> None:
    issue = normalize_issue(node(7, branchName="feat/p-7", description="d", priority=3.0))
    assert issue.url == "https://linear.app/x/issue/P-7"
    assert issue.branch_name == "feat/p-7"
    assert issue.priority == 3
    assert issue.state == "Todo"


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"id": "x"},
        node(1, state=None),
        node(1, state={"name": ""}),
        node(1, title=None),
        node(1, identifier=5),
    ],
)
def test_malformed_node_is_unknown_payload(bad: object) -> None:
    with pytest.raises(TrackerError) as info:
        normalize_issue(bad)
    assert info.value.category == "linear_unknown_payload"
