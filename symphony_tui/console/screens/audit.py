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

from symphony_tui.console.fleet import PROJECT_CELLS, fit_name
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
        self._fleet = False

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
        self._add_columns(table, fleet=False)
        table.focus()
        self.load()
        self.set_interval(RELOAD_S, self.load, name="audit-reload")

    def _add_columns(self, table: DataTable, *, fleet: bool) -> None:
        """The table's columns; a fleet's entries (``AuditEntry.project``) also say their
        project and how each came (``via``), as its other panes say their project."""
        self._fleet = fleet
        columns = [("at", "When (UTC)")]
        columns += [("project", "Project")] if fleet else []
        columns += [("who", "Who"), ("what", "What"), ("issue", "Issue"), ("result", "Result")]
        columns += [("via", "Via")] if fleet else []
        columns += [("message", "Message")]
        for key, label in columns:
            table.add_column(label, key=key)

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
        fleet = any(e.project for e in entries)
        table.clear(columns=fleet != self._fleet)
        if fleet != self._fleet:
            self._add_columns(table, fleet=fleet)
        for entry in entries:
            detail = " ".join(p for p in (entry.detail, entry.message) if p)
            issue = entry.issue or ""
            cells: list = [entry.at.strftime("%Y-%m-%d %H:%M:%S")]
            if fleet:
                # the project has its column: the issue and via without it
                project = entry.project or ""
                issue = issue.removeprefix(f"{project}/")
                via = entry.via.removeprefix(f"{project}: ")
                cells.append(inert(fit_name(project, PROJECT_CELLS) if project else ""))
            cells += [
                inert(entry.who, limit=28),
                inert(action_words(entry.what, entry.detail), "bold", limit=24),
                inert(issue, limit=14),
                inert("ok" if entry.ok else "refused", tones.success if entry.ok else tones.error),
            ]
            if fleet:
                cells.append(inert(via, tones.muted, limit=24))
            cells.append(inert(one_line(detail), limit=80))
            table.add_row(*cells)
        if at_end and entries:
            table.move_cursor(row=len(entries) - 1)

    def selected_issue_id(self) -> str | None:
        table = self.query_one("#audit", DataTable)
        if not self.entries or not 0 <= table.cursor_row < len(self.entries):
            return None
        entry = self.entries[table.cursor_row]
        issue = entry.issue
        snapshot = self.console.snapshot
        if issue is None or snapshot is None:
            return None
        # a fleet's entry: "<project>/<identifier>", of its project's rows
        bare = issue.removeprefix(f"{entry.project}/") if entry.project else issue
        for row in snapshot.issues:
            if row.project == entry.project and issue in (row.issue_id, row.identifier):
                return row.issue_id
            if row.project == entry.project and bare == row.identifier:
                return row.issue_id
        return None

    def selected_approval(self) -> ApprovalRequest | None:
        return None
