"""Workspaces found on disk with what their manifests say about the last run, also for
issues the tracker no longer returns. Actions: re-attach / rerun, remove (asks first),
copy the path."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console import fmt
from symphony_tui.console.fleet import is_fleet, project_of
from symphony_tui.console.messages import ConfirmCommand, ConsoleApp, SendCommand, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain import (
    ApprovalRequest,
    RecoveredWorkspace,
    RemoveWorkspace,
    Rerun,
    RunStatus,
    Snapshot,
)

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones

# narrow on purpose: all eight columns fit 80 terminal columns (the title gives up cells
# first); the detail has the rest
COLUMNS = (
    ("issue", "Issue", 9),
    ("title", "Title", 16),
    ("state", "State", 8),
    ("backend", "Backend", 8),
    ("status", "Last run", 13),  # the longest word whole: "■ interrupted"
    ("attempt", "Try", 3),
    ("ended", "Ended", 6),
    ("tokens", "Tokens", 6),
)
#: With worker hosts configured: the host after the issue, and no tokens column
#: (the detail has them) so the row still fits 80 columns; the host gives up to 9 cells
#: to the title there.
COLUMNS_WITH_HOSTS = (COLUMNS[0], ("host", "Host", 16), *COLUMNS[1:-1])
HOST_SHRINK = {"host": 7}


@dataclass(frozen=True)
class RerunPlan:
    """What ``r`` would do for a recovered workspace.

    ``mode``: ``reattach`` (rerun resuming the recorded thread / conversation),
    ``rerun`` (a new session), ``running`` (already running: nothing to do),
    ``done`` / ``blocked`` (not eligible for dispatch) or ``unknown`` (the scheduler does
    not know the issue: nothing to dispatch).
    ``why``: one line for the operator.
    """

    mode: str
    why: str

    @property
    def allowed(self) -> bool:
        return self.mode in ("reattach", "rerun")


def rerun_plan(w: RecoveredWorkspace, snapshot: Snapshot) -> RerunPlan:
    """Decide honestly whether a rerun re-attaches. The scheduler passes the manifest's
    session facts to the backend (``run.resume``) when the backend matches; codex resumes
    ``thread_id``, OpenHands ``conversation_id``, each falling back to a new session when
    the program no longer has it."""
    ident = one_line(w.issue_identifier or w.key, 20)
    if w.issue_id is None:
        return RerunPlan("unknown", "no issue id recorded: nothing to rerun")
    if any(r.issue_id == w.issue_id for r in snapshot.running):
        return RerunPlan("running", f"{ident} is running now")
    retrying = any(r.issue_id == w.issue_id for r in snapshot.retrying)
    row = next((i for i in snapshot.issues if i.issue_id == w.issue_id), None)
    if row is None and not retrying:
        return RerunPlan(
            "unknown",
            f"{ident} is not among the tracker's active issues (done, moved or deleted): "
            "nothing to rerun",
        )
    if row is not None and not retrying:
        # the scheduler dispatches only eligible issues (spec §8.2); say so up front
        claim = fmt.claim_key(row, frozenset(snapshot.completed))
        if claim == "done":
            return RerunPlan(
                "done",
                f"{ident} is done (state {one_line(row.state, 20)}): move it to an active "
                "state (m) to work on it again",
            )
        if claim == "blocked":
            return RerunPlan("blocked", f"{ident} is blocked by open issues: nothing to rerun")
    session = w.thread_id or w.conversation_id
    if not session:
        return RerunPlan("rerun", "no session recorded: a rerun starts a new one")
    if w.backend and snapshot.backend and w.backend != snapshot.backend:
        return RerunPlan(
            "rerun",
            f"the recorded session is {one_line(w.backend, 12)}'s; the workflow now uses "
            f"{one_line(snapshot.backend, 12)}: a rerun starts a new one",
        )
    name = "thread" if w.thread_id else "conversation"
    return RerunPlan(
        "reattach",
        f"rerun resumes {name} {one_line(session, 40)} (a new one if the backend lost it)",
    )


def last_run_cell(status: str | None, failed: bool, tones: Tones) -> Text:
    """The last run's ending as the workers table words it (glyph and word, see
    ``fmt.STATUS_LABELS``); a failed run reads ``✗`` whatever its status word."""
    try:
        glyph, word, tone = fmt.STATUS_LABELS[RunStatus(status)]
    except ValueError:
        glyph, word, tone = "", status or "-", ""
    if failed:
        glyph, tone = "✗", "error"
    cell = f"{glyph} {word}" if glyph else word
    return inert(cell, getattr(tones, tone) if tone else "", limit=13)


def workspace_key(w: RecoveredWorkspace, snapshot: Snapshot) -> str:
    """A recovered workspace's row key: its folder name, or in a fleet console its
    (namespaced) issue id, as folder names repeat across projects."""
    return (w.issue_id or w.key) if is_fleet(snapshot) else w.key


def recovered_rows(snapshot: Snapshot, now: datetime, tones: Tones) -> list[tuple[str, Row]]:
    """(workspace key, cells) in ``COLUMNS``, or ``COLUMNS_WITH_HOSTS`` when the snapshot
    has worker hosts (``-``: a workspace on this machine)."""
    hosts = bool(snapshot.hosts)
    rows: list[tuple[str, Row]] = []
    for w in snapshot.recovered:
        failed = (w.status or "").lower() in {"failed", "timed_out", "stalled"} or bool(w.error)
        rows.append(
            (
                workspace_key(w, snapshot),
                (
                    inert(w.issue_identifier or w.key, tones.bold, limit=9),
                    inert(w.issue_title or "-", limit=120),
                    inert(w.issue_state or "-", limit=8),
                    inert(w.backend or "-", limit=8),
                    last_run_cell(w.status, failed, tones),
                    Text("-" if w.attempt is None else str(w.attempt), end=""),
                    Text(fmt.age(w.ended_at, now), end=""),
                    Text(fmt.compact(w.tokens.total_tokens), end=""),
                ),
            )
        )
        if hosts:
            key, cells = rows[-1]
            rows[-1] = (key, (cells[0], inert(w.host or "-", limit=40), *cells[1:-1]))
    return rows


def recovered_detail(w: RecoveredWorkspace, tones: Tones, plan: RerunPlan | None = None) -> Text:
    """The manifest's facts (path, ids, attempt, error, tokens, hooks) and what ``r``
    would do."""
    text = Text(end="")
    tok = w.tokens
    tokens = None
    if tok.input_tokens or tok.output_tokens:
        tokens = (
            f"in {fmt.grouped(tok.input_tokens)} (cached {fmt.grouped(tok.cached_input_tokens)})"
            f"  out {fmt.grouped(tok.output_tokens)}  total {fmt.grouped(tok.total_tokens)}"
        )
    elif tok.total_tokens:
        tokens = f"total {fmt.grouped(tok.total_tokens)}"
    pairs = [
        ("path", w.path),
        ("host", w.host),  # a workspace on a worker host
        ("issue id", w.issue_id),
        ("session", w.session_id),
        ("thread", w.thread_id),
        ("conversation", w.conversation_id),
        ("server", w.server_url),
        ("attempt", None if w.attempt is None else str(w.attempt)),
        ("last event", w.last_event),
        ("tokens", tokens),
        ("error", w.error),
    ]
    pairs += [(f"hook {k}", v) for k, v in sorted(w.hooks.items())]
    shown = [p for p in pairs if p[1]]
    # labels in one column, at least one space wider than the longest ("hook after_create")
    width = max([13, *(len(name) + 1 for name, _ in shown)])
    for i, (name, value) in enumerate(shown):
        if i:
            text.append("\n")
        text.append(f"{name:<{width}}", style=tones.muted)
        bad = name == "error" or (name.startswith("hook ") and value != "ok")
        text.append(one_line(value, 200), style=tones.error if bad else "")
    if plan is not None:
        text.append("\n")
        name = "re-attach" if plan.mode == "reattach" else "rerun"
        text.append(f"{name:<{width}}", style=tones.muted)
        if plan.allowed:
            text.append("r", style=tones.bold)
            text.append(f": {plan.why}")
        else:
            text.append(f"unavailable: {plan.why}", style=tones.muted)
    return text


class RecoveredScreen(Screen[None]):
    CONSOLE_SCOPE = "recovered"
    BINDINGS = bindings_for("recovered")

    def __init__(self) -> None:
        super().__init__(classes="recovered-screen")
        self._snapshot: Snapshot | None = None

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

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
        hosts = bool(snapshot.hosts)
        table.set_column_spec(
            COLUMNS_WITH_HOSTS if hosts else COLUMNS, HOST_SHRINK if hosts else None
        )
        table.sync(recovered_rows(snapshot, now, tones))
        table.border_title = f"Recovered workspaces ({len(snapshot.recovered)})"
        self._show_detail(tones)

    def selected_workspace(self) -> RecoveredWorkspace | None:
        if self._snapshot is None:
            return None
        tables = self.query("#recovered").results(KeyedTable)
        key = next((t.selected_key for t in tables), None)
        snapshot = self._snapshot
        return next((w for w in snapshot.recovered if workspace_key(w, snapshot) == key), None)

    def _plan(self) -> RerunPlan | None:
        w = self.selected_workspace()
        if w is None or self._snapshot is None:
            return None
        return rerun_plan(w, self._snapshot)

    def _show_detail(self, tones: Tones) -> None:
        w = self.selected_workspace()
        self.query_one("#recovered-detail", Static).update(
            recovered_detail(w, tones, self._plan())
            if w
            else Text("no recovered workspaces", style=tones.muted)
        )

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_detail(self.console.tones)
        self.app.refresh_bindings()

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # enter on a row: nothing more to open; the detail is below

    def selected_issue_id(self) -> str | None:
        w = self.selected_workspace()
        return w.issue_id if w else None

    def selected_approval(self) -> ApprovalRequest | None:
        return None

    # -- actions ----------------------------------------------------------------------

    def _claimed(self, w: RecoveredWorkspace) -> bool:
        s = self._snapshot
        if s is None or w.issue_id is None:
            return False
        return any(r.issue_id == w.issue_id for r in (*s.running, *s.retrying))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if getattr(self.app, "stopping", False):
            return False  # the console is quitting: its screens are going
        plan = self._plan()
        w = self.selected_workspace()
        if action == "reattach_selected":
            return plan is not None and plan.mode == "reattach"
        if action == "rerun_selected":
            if plan is not None and plan.mode == "reattach":
                return False  # "Re-attach" takes the key
            return plan is not None and plan.allowed
        # False hides a key that does not apply to the selected workspace (Textual 8)
        if action == "remove_workspace":
            return w is not None and not self._claimed(w)
        if action == "copy_path":
            return w is not None
        return True

    def action_reattach_selected(self) -> None:
        self.action_rerun_selected()

    def action_rerun_selected(self) -> None:
        w, plan = self.selected_workspace(), self._plan()
        if w is None or w.issue_id is None or plan is None or not plan.allowed:
            return
        self.post_message(SendCommand(Rerun(issue_id=w.issue_id)))

    def action_remove_workspace(self) -> None:
        w = self.selected_workspace()
        if w is None or self._claimed(w):
            return
        body = Text("Remove the workspace ", end="")
        body.append_text(inert(w.path, "bold", limit=200))
        body.append("? The before_remove hook runs first; the folder and everything in it")
        body.append(" are deleted.")
        self.post_message(
            ConfirmCommand(
                "Remove workspace",
                body,
                RemoveWorkspace(
                    issue_identifier=w.key, project=project_of(self._snapshot, w.issue_id)
                ),
                "Remove",
            )
        )

    def action_copy_path(self) -> None:
        w = self.selected_workspace()
        if w is None:
            return
        # the operator's own action on a path we hold; still cleaned of control characters
        path = one_line(w.path)
        self.app.copy_to_clipboard(path)
        self.app.notify(f"copied {one_line(path, 120)}", title="clipboard", markup=False)
