"""The audit screen: every operator action the scheduler recorded (who, what, when, how it
went), newest at the bottom, read through ``SchedulerPort.audit_entries`` (the scheduler's
``audit.jsonl``; ``GET /api/v1/audit`` when attached) every :data:`RELOAD_S` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console.messages import ConsoleApp, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.domain.kinds import ApprovalDecision, decision_asked

if TYPE_CHECKING:
    from symphony_tui.domain import ApprovalRequest
    from symphony_tui.domain.audit import AuditEntry

RELOAD_S = 2.0
SHOWN = 500


#: Flags of a command's audit detail (``key=value`` words, JSON values) that change what
#: the operator asked for, and how the What column says it (decisions in their shared
#: words, ``domain.kinds.DECISION_WORDS``).
_FLAGGED = {
    ("approve", "for_session=true"): decision_asked(ApprovalDecision.ACCEPT_FOR_SESSION),
    ("deny", "cancel=true"): decision_asked(ApprovalDecision.CANCEL),
    ("pause_dispatch", "paused=true"): "pause dispatch",
    ("pause_dispatch", "paused=false"): "resume dispatch",
}


def action_words(what: str, detail: str) -> str:
    """What an audit entry did, precisely: ``approve for this session``, not ``approve``
    (a command's flags are in its ``detail``); other actions by their names, in words
    (``extend budget``)."""
    words = set(detail.split())
    for (name, flag), said in _FLAGGED.items():
        if what == name and flag in words:
            return said
    return what.replace("_", " ")


class AuditScreen(Screen[None]):
    CONSOLE_SCOPE = "audit"
    BINDINGS = bindings_for("audit")

    def __init__(self) -> None:
        super().__init__(classes="audit-screen")
        self.entries: list[AuditEntry] = []
        self._shown: tuple = ()

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

    def compose(self) -> ComposeResult:
        yield Static(id="audit-header")
        table = DataTable(id="audit", classes="pane", cursor_type="row", zebra_stripes=True)
        table.border_title = "Operator actions"
        yield table
        yield ConsoleFooter()

    def on_mount(self) -> None:
        table = self.query_one("#audit", DataTable)
        for key, label in (
            ("at", "When (UTC)"),
            ("who", "Who"),
            ("what", "What"),
            ("issue", "Issue"),
            ("result", "Result"),
            ("message", "Message"),
        ):
            table.add_column(label, key=key)
        table.focus()
        self.load()
        self.set_interval(RELOAD_S, self.load, name="audit-reload")

    @work(group="audit", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        tones = self.console.tones
        header = self.query_one("#audit-header", Static)
        try:
            entries = await self.console.port.audit_entries(SHOWN)
        except Exception as exc:  # an attached console whose scheduler does not answer
            header.update(inert(f"audit log unavailable: {exc}", tones.error, limit=200))
            return
        key = tuple((e.at, e.what, e.who) for e in entries)
        if key == self._shown:
            return
        self._shown = key
        self.entries = entries
        header.update(
            inert(
                f"{len(entries)} operator action{'s' * (len(entries) != 1)}, oldest first "
                "(the scheduler's audit.jsonl; symphony-tui paths names it)",
                tones.muted,
            )
        )
        table = self.query_one("#audit", DataTable)
        at_end = table.cursor_row >= table.row_count - 1
        table.clear()
        for entry in entries:
            detail = " ".join(p for p in (entry.detail, entry.message) if p)
            table.add_row(
                entry.at.strftime("%Y-%m-%d %H:%M:%S"),
                inert(entry.who, limit=28),
                inert(action_words(entry.what, entry.detail), "bold", limit=24),
                inert(entry.issue or "", limit=14),
                inert("ok" if entry.ok else "refused", tones.success if entry.ok else tones.error),
                inert(one_line(detail), limit=80),
            )
        if at_end and entries:
            table.move_cursor(row=len(entries) - 1)

    def selected_issue_id(self) -> str | None:
        table = self.query_one("#audit", DataTable)
        if not self.entries or not 0 <= table.cursor_row < len(self.entries):
            return None
        issue = self.entries[table.cursor_row].issue
        snapshot = self.console.snapshot
        if issue is None or snapshot is None:
            return None
        for row in snapshot.issues:
            if issue in (row.issue_id, row.identifier):
                return row.issue_id
        return None

    def selected_approval(self) -> ApprovalRequest | None:
        return None
