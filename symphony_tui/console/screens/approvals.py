"""All pending approvals across workers, oldest first, with the selected one in full.

In a fleet console it is the one inbox of every project (a project column first; the
answers go out with the request's namespaced id, which the fleet port routes). A request
of a project whose link is lost reads dimmed, what it asks led by the link's state and
age (``✗ stale 32s · npm install``), as that project's worker rows read unknown: an
answer to a stale project is refused, not sent."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console import fmt
from symphony_tui.console.approval_text import (
    KIND_LABELS,
    approval_detail,
    asked,
    permission_choices,
)
from symphony_tui.console.fleet import (
    PROJECT_CELLS,
    fit_name,
    is_fleet,
    lost_projects,
    project_names,
)
from symphony_tui.console.messages import console_app
from symphony_tui.console.registry import BY_ID, bindings_for
from symphony_tui.console.sanitize import inert
from symphony_tui.console.screens.projects import link_cell
from symphony_tui.console.selection import approvals_oldest_first
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain import ApprovalDecision, ApprovalRequest, Snapshot

if TYPE_CHECKING:
    from rich.style import Style

    from symphony_tui.console.tones import Tones

COLUMNS = (
    ("issue", "Issue", 10),
    ("backend", "Backend", 9),
    ("kind", "Kind", 14),
    ("asked", "What is asked", 20),
    ("age", "Age", 6),
    ("left", "Left", 6),
)
FLEET_COLUMNS = (("project", "Project", PROJECT_CELLS), *COLUMNS)
#: At 80 columns the project, backend and kind give cells to what is asked.
FLEET_SHRINK = {"project": 7, "backend": 7, "kind": 12}


def approval_rows(
    snapshot: Snapshot,
    now: datetime,
    tones: Tones,
    fleet: bool = False,
    project_width: int = PROJECT_CELLS,
) -> list[tuple[str, Row]]:
    """(approval id, cells), oldest first; ``fleet``: a project cell first, the name cut
    to ``project_width`` cells. A request of a project whose link is lost
    (``fleet.lost_projects``) is dimmed, and what it asks starts with the link's state and
    age (``projects.link_cell``)."""
    rows: list[tuple[str, Row]] = []
    lost = lost_projects(snapshot) if fleet else {}
    names = project_names(snapshot)
    for a in approvals_oldest_first(snapshot):
        link = lost.get(a.project) if a.project is not None else None

        def tone(style: Style | str, dim: bool = link is not None) -> Style | str:
            return tones.muted if dim else style

        left = fmt.until(a.deadline_at, now)
        project = (inert(fit_name(a.project, project_width, names), tones.muted),) if fleet else ()
        what = Text(asked(a, 120), style=tone(""), end="")
        if link is not None:
            what = link_cell(link, tones) + Text(" · ", style=tones.muted, end="") + what
        rows.append(
            (
                a.id,
                (
                    *project,
                    inert(a.issue_identifier or a.issue_id, tone(tones.bold), limit=10),
                    inert(a.backend or "-", tone(""), limit=9),
                    Text(KIND_LABELS.get(a.kind, a.kind.value), style=tone(tones.warning), end=""),
                    what,
                    Text(fmt.age(a.created_at, now), style=tone(""), end=""),
                    Text(left, style=tone(tones.error if left == "due" else ""), end=""),
                ),
            )
        )
    return rows


def approval_keys(a: ApprovalRequest) -> list[str]:
    """Command ids that answer ``a``, in the order the keys are shown: only what the
    request offers (``available``) — a question is answered, not approved."""
    offered = set(a.available)
    ids: list[str] = []
    if a.questions:
        ids.append("answer")
    else:
        if ApprovalDecision.ACCEPT in offered:
            ids.append("approve")
        if ApprovalDecision.ACCEPT_FOR_SESSION in offered:
            ids.append("approve_session")
        if permission_choices(a):
            ids.append("grant")
    if offered & {ApprovalDecision.DECLINE, ApprovalDecision.CANCEL}:
        ids += ["deny", "deny_message"]
    if ApprovalDecision.CANCEL in offered:
        ids.append("cancel_turn")
    return ids


class ApprovalsScreen(Screen[None]):
    CONSOLE_SCOPE = "approvals"
    BINDINGS = bindings_for("approvals")

    def __init__(self) -> None:
        super().__init__(classes="approvals-screen")
        self._snapshot: Snapshot | None = None
        self._now: datetime | None = None

    def compose(self) -> ComposeResult:
        table = KeyedTable(COLUMNS, flex="asked", id="approvals", classes="pane")
        table.border_title = "Pending approvals (oldest first)"
        yield table
        detail = Static(id="approval-detail", classes="pane")
        detail.border_title = "Selected"
        yield detail
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#approvals").focus()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        self._snapshot, self._now = snapshot, now
        table = self.query_one("#approvals", KeyedTable)
        fleet = is_fleet(snapshot)
        table.set_column_spec(FLEET_COLUMNS if fleet else COLUMNS, FLEET_SHRINK if fleet else None)
        width = table.column_width("project") if fleet else PROJECT_CELLS
        table.sync(approval_rows(snapshot, now, tones, fleet, width))
        table.border_title = f"Pending approvals ({len(snapshot.approvals)}, oldest first)"
        self._show_detail(tones)

    def _show_detail(self, tones: Tones) -> None:
        detail = self.query_one("#approval-detail", Static)
        approval = self.selected_approval()
        if approval is None or self._now is None:
            detail.update(Text("nothing pending", style=tones.muted))
            return
        text = approval_detail(approval, self._now, tones)
        lost = lost_projects(self._snapshot) if self._snapshot is not None else {}
        link = lost.get(approval.project) if approval.project is not None else None
        if link is not None:  # its scheduler may not hear the answer, a stale one is refused
            text.append(f"\n{'link':<11}", style=tones.muted)
            text.append_text(link_cell(link, tones))
            if link.link_state == "stale":
                text.append(": an answer is not sent until it is live", style=tones.muted)
        text.append("\n")
        text.append(f"{'keys':<11}", style=tones.muted)
        key_for = console_app(self).key_for
        for i, cid in enumerate(approval_keys(approval)):
            cmd = BY_ID[cid]
            if i:
                text.append(" · ", style=tones.muted)
            text.append(key_for(cmd), style=tones.bold)
            text.append(f" {cmd.label.lower()}")
        detail.update(text)

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_detail(console_app(self).tones)
        self.app.refresh_bindings()

    @on(DataTable.RowSelected)
    async def _selected(self, event: DataTable.RowSelected) -> None:
        # enter answers a question, and otherwise approves once (a common habit)
        event.stop()
        approval = self.selected_approval()
        if approval is None:
            return
        action = "answer" if approval.questions else "approve"
        await self.app.run_action(action)

    def selected_approval(self) -> ApprovalRequest | None:
        if self._snapshot is None:
            return None
        tables = self.query("#approvals").results(KeyedTable)
        key = next((t.selected_key for t in tables), None)
        return next((a for a in self._snapshot.approvals if a.id == key), None)

    def selected_issue_id(self) -> str | None:
        approval = self.selected_approval()
        return approval.issue_id if approval else None
