"""Pane 1: the issues the scheduler knows of, keyed by issue id."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import inert
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain import Snapshot

COLUMNS = (
    ("identifier", "Issue", 10),
    ("title", "Title", 16),
    ("state", "State", 13),
    ("claim", "Claim", 11),
    ("priority", "Prio", 6),
)


def issue_rows(snapshot: Snapshot, tones: Tones) -> list[tuple[str, Row]]:
    """(issue id, cells) in snapshot order (the scheduler's dispatch order)."""
    completed = frozenset(snapshot.completed)
    rows: list[tuple[str, Row]] = []
    for issue in snapshot.issues:
        key = fmt.claim_key(issue, completed)
        rows.append(
            (
                issue.issue_id,
                (
                    inert(issue.identifier, tones.bold, limit=10),
                    inert(issue.title, limit=120),
                    inert(issue.state, limit=13),
                    fmt.labelled(fmt.CLAIM_LABELS[key], tones),
                    Text(fmt.priority(issue.priority), end=""),
                ),
            )
        )
    return rows


class IssuesTable(KeyedTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, flex="title", **kwargs)

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> bool:
        return self.sync(issue_rows(snapshot, tones))
