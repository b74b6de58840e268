"""Workspaces found on disk with what their manifests say about the last run."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console import fmt
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain import ApprovalRequest, RecoveredWorkspace, Snapshot

COLUMNS = (
    ("issue", "Issue", 10),
    ("title", "Title", 16),
    ("state", "State", 12),
    ("backend", "Backend", 9),
    ("status", "Last run", 12),
    ("ended", "Ended", 7),
    ("tokens", "Tokens", 7),
)


def recovered_rows(snapshot: Snapshot, now: datetime, tones: Tones) -> list[tuple[str, Row]]:
    rows: list[tuple[str, Row]] = []
    for w in snapshot.recovered:
        failed = (w.status or "").lower() in {"failed", "timed_out", "stalled"} or bool(w.error)
        rows.append(
            (
                w.key,
                (
                    inert(w.issue_identifier or w.key, tones.bold, limit=10),
                    inert(w.issue_title or "-", limit=120),
                    inert(w.issue_state or "-", limit=12),
                    inert(w.backend or "-", limit=9),
                    inert(w.status or "-", tones.error if failed else "", limit=12),
                    Text(fmt.age(w.ended_at, now), end=""),
                    Text(fmt.compact(w.tokens.total_tokens), end=""),
                ),
            )
        )
    return rows


def recovered_detail(w: RecoveredWorkspace, tones: Tones) -> Text:
    text = Text(end="")
    pairs = [
        ("path", w.path),
        ("issue id", w.issue_id),
        ("session", w.session_id),
        ("thread", w.thread_id),
        ("conversation", w.conversation_id),
        ("server", w.server_url),
        ("attempt", None if w.attempt is None else str(w.attempt)),
        ("last event", w.last_event),
        ("error", w.error),
    ]
    pairs += [(f"hook {k}", v) for k, v in sorted(w.hooks.items())]
    for i, (name, value) in enumerate(p for p in pairs if p[1]):
        if i:
            text.append("\n")
        text.append(f"{name:<13}", style=tones.muted)
        text.append(one_line(value, 200), style=tones.error if name == "error" else "")
    return text


class RecoveredScreen(Screen[None]):
    CONSOLE_SCOPE = "recovered"
    BINDINGS = bindings_for("recovered")

    def __init__(self) -> None:
        super().__init__(classes="recovered-screen")
        self._snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        table = KeyedTable(COLUMNS, flex="title", id="recovered", classes="pane")
        table.border_title = "Recovered workspaces"
        yield table
        detail = Static(id="recovered-detail", classes="pane")
        detail.border_title = "Selected"
        yield detail
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#recovered").focus()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        self._snapshot = snapshot
        table = self.query_one("#recovered", KeyedTable)
        table.sync(recovered_rows(snapshot, now, tones))
        table.border_title = f"Recovered workspaces ({len(snapshot.recovered)})"
        self._show_detail(tones)

    def _selected(self) -> RecoveredWorkspace | None:
        if self._snapshot is None:
            return None
        tables = self.query("#recovered").results(KeyedTable)
        key = next((t.selected_key for t in tables), None)
        return next((w for w in self._snapshot.recovered if w.key == key), None)

    def _show_detail(self, tones: Tones) -> None:
        w = self._selected()
        self.query_one("#recovered-detail", Static).update(
            recovered_detail(w, tones) if w else Text("no recovered workspaces", style=tones.muted)
        )

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_detail(self.app.tones)  # type: ignore[attr-defined]
        self.app.refresh_bindings()

    def selected_issue_id(self) -> str | None:
        w = self._selected()
        return w.issue_id if w else None

    def selected_approval(self) -> ApprovalRequest | None:
        return None
