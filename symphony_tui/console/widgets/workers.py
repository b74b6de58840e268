"""Pane 2: active workers (running rows), keyed by issue id."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain import RunningRow, Snapshot

COLUMNS = (
    ("approval", "", 2),
    ("issue", "Issue", 10),
    ("status", "Status", 12),
    ("turn", "Turn", 4),
    ("attempt", "Try", 3),
    ("age", "Age", 6),
    ("tokens", "Tokens", 7),
    ("last", "Last event", 16),
)


def last_activity(row: RunningRow, tones: Tones, limit: int = 120) -> Text:
    """``event: message`` on one line, inert."""
    text = Text(end="")
    if row.last_event:
        text.append(one_line(row.last_event, 20), style=tones.muted)
        if row.last_message:
            text.append(": ", style=tones.muted)
    if row.last_message:
        room = max(limit - len(text.plain), 8)
        text.append_text(inert(row.last_message, limit=room))
    return text


def worker_rows(snapshot: Snapshot, now: datetime, tones: Tones) -> list[tuple[str, Row]]:
    rows: list[tuple[str, Row]] = []
    for r in snapshot.running:
        mark = (
            Text(f"⚑{min(r.pending_approvals, 9)}", style=tones.warning, end="")
            if r.pending_approvals
            else Text("", end="")
        )
        rows.append(
            (
                r.issue_id,
                (
                    mark,
                    inert(r.issue_identifier, tones.bold, limit=10),
                    fmt.labelled(fmt.STATUS_LABELS[r.status], tones),
                    Text(str(r.turn_count), end=""),
                    Text("-" if r.attempt is None else str(r.attempt), end=""),
                    Text(fmt.age(r.started_at, now), end=""),
                    Text(fmt.compact(r.tokens.total_tokens), end=""),
                    last_activity(r, tones),
                ),
            )
        )
    return rows


class WorkersTable(KeyedTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, flex="last", **kwargs)

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> bool:
        return self.sync(worker_rows(snapshot, now, tones))
