"""The main screen: issues, active workers, live event log, token usage (four panes)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.events import DescendantFocus
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from symphony_tui.console.fleet import project_names
from symphony_tui.console.layout import table_heights, tables_height
from symphony_tui.console.messages import ConsoleApp, OpenWorker, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.repaint import set_border, update_static
from symphony_tui.console.sanitize import one_line
from symphony_tui.console.selection import oldest_approval
from symphony_tui.console.starting import STARTING_STATUS
from symphony_tui.console.widgets.event_log import EventLogView, LogFilter
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.status import (
    alert_text,
    status_text,
    unknown_since,
    wrapped_rows,
)
from symphony_tui.console.widgets.tokens import TokenPane
from symphony_tui.console.widgets.workers import WorkersTable

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import ApprovalRequest, Snapshot

STATUS_LINES = 1  # #status-line in console.tcss
ALERT_MAX_LINES = 3  # #alert-line max-height in console.tcss

PANES = {"issues": "#issues", "workers": "#workers", "log": "#log", "tokens": "#tokens"}


class FilterInput(Input):
    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False, id="filter_cancel")]

    def action_cancel(self) -> None:
        self.screen.hide_filter()  # type: ignore[attr-defined]  # only the main screen has one


class MainScreen(Screen[None]):
    CONSOLE_SCOPE = "main"
    BINDINGS = bindings_for("main")

    def __init__(self) -> None:
        super().__init__(id="main")
        self._last_table = "workers"
        self._snapshot: Snapshot | None = None
        self._alert: Text | None = None
        self._log_project: str | None = None  # the project filter the log follows

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

    def compose(self) -> ComposeResult:
        # the first frame comes before the scheduler exists (console.starting)
        yield Static(STARTING_STATUS if self.console.starting else "", id="status-line")
        yield Static(id="alert-line")
        # titles set here, not in on_mount, so a paint that lands first is not overwritten
        with Vertical(id="tables"):
            issues = IssuesTable(id="issues", classes="pane")
            issues.border_title = "1 Issues"
            yield issues
            workers = WorkersTable(
                id="workers",
                classes="pane",
                activity_interval_s=self.console.live_text_s,
                monotonic=self.console.monotonic,
            )
            workers.border_title = "2 Workers"
            yield workers
        with Horizontal(id="bottom"):
            with Vertical(id="log-pane", classes="pane") as log_pane:
                log_pane.border_title = "3 Events"
                yield EventLogView(
                    id="log",
                    write_interval_s=self.console.live_text_s,
                    monotonic=self.console.monotonic,
                )
                yield FilterInput(placeholder="filter: issue id, kind:NAME, words", id="log-filter")
            tokens = TokenPane(id="tokens", classes="pane")
            tokens.border_title = "4 Tokens"
            yield tokens
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#log-filter").cursor_blink = self.console.cursor_blink
        self.query_one("#workers").focus()

    # -- rendering -------------------------------------------------------------------

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        """Render ``snapshot`` (called by the app's refresh tick while visible)."""
        self._snapshot = snapshot
        with self.app.batch_update():
            # only what changed is set: Textual repaints a whole pane on every update
            # an attached console's link; a fleet's projects each say theirs (their rows,
            # the projects table, the alert line), never as one scheduler's lost link
            link = None if snapshot.projects else self.app.port.link()
            showing = self.console.project_filter
            status_line = self.query_one("#status-line", Static)
            update_static(
                status_line,
                status_text(
                    snapshot,
                    now,
                    tones,
                    link,
                    showing=showing,
                    width=status_line.size.width or None,
                ),
            )
            # the alert line's padding is one cell each side (``_alert_height``)
            width = self.size.width - 2 if self.size.width > 2 else None
            alert = self._alert = alert_text(
                snapshot, now, tones, link, width=width, lines=ALERT_MAX_LINES
            )
            alert_line = self.query_one("#alert-line", Static)
            if alert_line.display != (alert is not None):
                alert_line.display = alert is not None
            if alert is not None:
                update_static(alert_line, alert)
            issues = self.query_one(IssuesTable)
            issues.show(snapshot, now, tones)
            set_border(issues, title=f"1 Issues ({len(snapshot.issues)})")
            workers = self.query_one(WorkersTable)
            workers.show(snapshot, now, tones, unknown_since(link))
            pending = len(snapshot.approvals)
            set_border(
                workers,
                title=f"2 Workers ({len(snapshot.running)})",
                subtitle=f"⚑ {pending} pending · v approvals" if pending else "",
            )
            self.query_one(EventLogView).set_project_names(project_names(snapshot))
            if showing != self._log_project:  # the fleet's project filter: the log follows
                self._log_project = showing
                self.apply_filter(self.query_one(EventLogView).filter.text)
            else:
                self.pull(tones)
            tokens = self.query_one(TokenPane)
            tokens.show(snapshot, now, tones)
            # the figures below "per project" follow the project filter
            set_border(
                tokens, title=f"4 Tokens · {one_line(showing, 20)}" if showing else "4 Tokens"
            )
        # after the layout of this paint (the alert line may just have appeared)
        self.call_after_refresh(self._share_tables)

    @property
    def holding(self) -> bool:
        """Something shown is held back for a while (the workers' streamed text, a
        fleet's token pane): the app shows this screen again on its next tick even if the
        snapshot did not move."""
        try:
            return self.query_one(WorkersTable).holding or self.query_one(TokenPane).holding
        except NoMatches:
            return False

    def _share_tables(self) -> None:
        """Size the tables by their row counts (``layout``): both together take what they
        need up to a share of the height, the workers table what it needs when that fits
        in half of it; the issues table and the bottom panes take what is left."""
        if self._snapshot is None:
            return
        tables = self.query_one("#tables")
        # from the screen's size and the rows above and below, not from the last layout:
        # an alert line that just appeared is not laid out yet when this runs
        available = (
            self.size.height
            - STATUS_LINES
            - self._alert_height()
            - self.query_one(ConsoleFooter).outer_size.height
        )
        if self.size.height <= 0 or available <= 0:
            return  # not laid out yet: the next paint does it
        issues, running = len(self._snapshot.issues), len(self._snapshot.running)
        height = tables_height(available, issues, running)
        _, workers = table_heights(height, issues, running)
        for widget, cells in ((tables, height), (self.query_one(WorkersTable), workers)):
            if widget.styles.height is None or widget.styles.height.cells != cells:
                widget.styles.height = cells

    def _alert_height(self) -> int:
        """Rows the alert line takes at this width (``#alert-line``: wrapped, padding 1
        each side, at most ``ALERT_MAX_LINES``)."""
        if self._alert is None:
            return 0
        width = max(self.size.width - 2, 1)
        lines = self._alert.plain.split("\n")
        rows = sum(wrapped_rows(line, width) for line in lines)
        return min(rows, ALERT_MAX_LINES)

    def on_resize(self) -> None:
        self.call_after_refresh(self._share_tables)

    def pull(self, tones: Tones) -> None:
        """New events (also called alone when the snapshot did not change)."""
        log = self.query_one(EventLogView)
        missed = log.missed
        log.pull(self.console.port, tones)
        if log.paused and log.missed != missed:
            self._show_log_title()

    def _show_log_title(self) -> None:
        """``3 Events`` plus the filter, ``follow off`` and the paused badge."""
        log = self.query_one(EventLogView)
        title = Text("3 Events", end="")
        if log.filter.project:
            title.append(f" · {one_line(log.filter.project, 20)}")
        if log.filter.text:
            title.append(f" · filter: {one_line(log.filter.text, 40)}")
        if not log.follow:
            title.append(" · follow off")
        pane = self.query_one("#log-pane")
        paused = f"⏸ paused, {log.missed} new · space resumes" if log.paused else ""
        set_border(pane, title=title, subtitle=paused)

    # -- selection ------------------------------------------------------------------

    @on(DescendantFocus)
    def _remember_table(self, event: DescendantFocus) -> None:
        if isinstance(event.widget, IssuesTable):
            self._last_table = "issues"
        elif isinstance(event.widget, WorkersTable):
            self._last_table = "workers"
        self.app.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _selection_moved(self) -> None:
        self.app.refresh_bindings()

    def selected_issue_id(self) -> str | None:
        try:
            table = self.query_one(IssuesTable if self._last_table == "issues" else WorkersTable)
        except NoMatches:  # asked while the screen is being built or torn down
            return None
        return table.selected_key

    def focused_issue_id(self) -> str | None:
        """Issue id of the focused table's highlighted row (issues or workers); ``None``
        while the focus is on a pane without rows (the event log, its filter, the token
        pane): a row selected before the focus left its table is not the operator's
        choice now."""
        focused = self.focused
        if isinstance(focused, (IssuesTable, WorkersTable)):
            return focused.selected_key
        return None

    def selected_approval(self) -> ApprovalRequest | None:
        if self._snapshot is None:
            return None
        return oldest_approval(self._snapshot, self.selected_issue_id())

    # -- actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if getattr(self.app, "stopping", False):
            return False  # the console is quitting: its screens are going
        # False hides the key (Textual 8); None would show it dimmed, as if it applied
        if action == "open_worker":
            return bool(self.selected_issue_id())
        if action == "clear_filter":
            logs = self.query(EventLogView)
            return bool(logs) and bool(logs.first().filter.text)
        return True

    def action_focus_pane(self, name: str) -> None:
        # At once (``Widget.focus`` waits for the next message): a key typed right behind
        # it, e.g. "/" opening the filter, must not have its focus taken back afterwards
        self.set_focus(self.query_one(PANES[name]))

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_worker()

    def action_open_worker(self) -> None:
        issue_id = self.selected_issue_id()
        if issue_id:
            self.post_message(OpenWorker(issue_id))

    def action_filter_log(self) -> None:
        try:
            box = self.query_one("#log-filter", FilterInput)
        except NoMatches:  # the screen is being taken down (the console exits)
            return
        if box.display and self.focused is box:
            # "/" typed in the filter (a priority key): it goes in behind the keys the box
            # has queued, as any other character
            box.post_message(events.Key("slash", "/"))
            return
        box.value = self.query_one(EventLogView).filter.text
        box.display = True
        # At once, not on the next message (``Widget.focus``), and "/" is a priority
        # binding: keys typed right after it (a paste, an SSH burst) are already queued and
        # would otherwise run as commands ("p" pausing dispatch, "a" approving).
        self.set_focus(box)

    def hide_filter(self) -> None:
        box = self.query_one("#log-filter", FilterInput)
        box.display = False
        self.query_one(EventLogView).focus()

    @on(Input.Submitted, "#log-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply_filter(event.value)
        self.hide_filter()

    def apply_filter(self, text: str) -> None:
        log = self.query_one(EventLogView)
        snapshot = self._snapshot or self.console.port.snapshot()
        log_filter = LogFilter.parse(text, snapshot, self.console.project_filter)
        log.set_filter(log_filter, self.console.port, self.console.tones)
        for problem in log_filter.problems:
            self.notify(problem, title="filter", severity="warning", markup=False)
        self._show_log_title()
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        self.apply_filter("")

    def action_follow_log(self) -> None:
        log = self.query_one(EventLogView)
        log.set_follow(not log.follow)
        self._show_log_title()

    def action_pause_log(self) -> None:
        log = self.query_one(EventLogView)
        log.set_paused(not log.paused)
        if not log.paused:
            log.pull(self.console.port, self.console.tones, force=True)
        self._show_log_title()
