"""A fleet console's projects table: one scheduler a row (``Snapshot.projects``).

Each row: the link's state and the age of its data, runs, retry entries and approvals
waiting, tokens, the machine it runs on and its last error; the selected one in full
below. A project whose link is lost, or whose scheduler is gone without a word
(``lost``), keeps the counts it last sent, dimmed, as old as its link cell says (its rows in
the panes read unknown since then); one never heard from shows ``-``, not 0. A stopped
scheduler's counts are 0, dimmed, as its panes show none (nothing runs or waits there);
its details say what it had when it stopped, why, and how long ago; a project's figures
that are old say so, and unknown ones read ``unknown``. ``enter`` shows only that
project's rows in every pane (on the filtered one: every project again); the
dispatch-wide keys (``p`` pause, ``R`` refresh) act on the selected project.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console import fmt
from symphony_tui.console.fleet import (
    LINK_LABELS,
    OUT_OF_DATE_STATES,
    fit_name,
    live_of,
    project_names,
    project_row,
)
from symphony_tui.console.messages import console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.repaint import update_static
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.console.widgets.tokens import limits_text

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import ApprovalRequest, Snapshot
    from symphony_tui.domain.snapshot import ProjectRow

COLUMNS = (
    ("project", "Project", 12),
    ("link", "Link", 15),
    ("running", "Run", 3),
    ("retrying", "Retry", 5),
    ("approvals", "Appr", 4),
    ("tokens", "Tokens", 7),
    ("machine", "Machine", 12),
    ("error", "Last error", 20),
)
#: At 80 columns the machine, link, name and tokens give cells to the last error.
SHRINK = {"machine": 7, "link": 12, "project": 9, "tokens": 6}
#: Cells of a label in the selected project's details (its values start after them).
DETAIL_LABEL = 11


def link_cell(row: ProjectRow, tones: Tones) -> Text:
    """``● live 2s``, ``✗ stale 32s``, ``◌ connecting``: the link and its data's age."""
    glyph, word, tone = LINK_LABELS.get(row.link_state, ("?", row.link_state, "muted"))
    text = Text(f"{glyph} {word}", style=getattr(tones, tone), end="")
    if row.age_s is not None:
        text.append(f" {fmt.duration(row.age_s)}", style=tones.muted)
    return text


def project_rows(
    snapshot: Snapshot, tones: Tones, showing: str | None, name_width: int = 30
) -> list[tuple[str, Row]]:
    """(project name, cells) in the fleet's order, names fitted to ``name_width`` cells
    (:func:`~symphony_tui.console.fleet.fit_name`); the
    project filtered by is marked ``▸``. The counts and tokens of a project that hears
    nothing new (:data:`OUT_OF_DATE_STATES`) are dimmed: the last it sent (a stopped
    one's counts: none); ``-`` while it was never heard from (unknown, not 0)."""
    rows: list[tuple[str, Row]] = []
    names = project_names(snapshot)
    for p in snapshot.projects:
        old = p.link_state in OUT_OF_DATE_STATES
        known = p.heard or p.link_state == "live"

        def count(value: str, style: Style | str, old: bool = old, known: bool = known) -> Text:
            if not known:
                return Text("-", style=tones.muted, end="")
            return Text(value, style=tones.muted if old else style, end="")

        if p.name == showing:
            name = Text("▸ ", style=tones.bold, end="")
            name.append_text(inert(fit_name(p.name, max(name_width - 2, 1), names), tones.bold))
        else:
            name = inert(fit_name(p.name, name_width, names), tones.bold)
        rows.append(
            (
                p.name,
                (
                    name,
                    link_cell(p, tones),
                    count(str(p.running), tones.success if p.running else ""),
                    count(str(p.retrying), tones.warning if p.retrying else ""),
                    count(
                        f"⚑{p.approvals}" if p.approvals else "0",
                        tones.warning if p.approvals else "",
                    ),
                    count(fmt.compact(p.totals.total_tokens), ""),
                    inert(p.machine or "here", tones.muted if p.machine is None else "", limit=40),
                    inert(p.error or "-", tones.error if p.error else tones.muted, limit=200),
                ),
            )
        )
    return rows


def project_detail(row: ProjectRow, now: datetime, tones: Tones) -> Text:
    """Everything known of one project, a labelled value a line."""
    text = Text(end="")

    def pair(label: str, value: Text | str) -> None:
        if text.plain:
            text.append("\n")
        text.append(f"{label:<{DETAIL_LABEL}}", style=tones.muted)
        text.append_text(value if isinstance(value, Text) else inert(value, limit=200))

    pair("project", inert(row.name, tones.bold, limit=80))
    pair("target", row.target)
    if row.workflow_path:
        pair("workflow", row.workflow_path)
    pair("machine", row.machine or "this machine")
    pair("link", link_cell(row, tones))
    old = row.link_state in OUT_OF_DATE_STATES
    known = row.heard or row.link_state == "live"
    if row.link_state == "stopped":
        # nothing runs or waits there now; what did when it stopped, said as past
        ago = "" if row.age_s is None else f"{fmt.duration(row.age_s)} ago"
        if row.stop_reason:
            ago = f"{ago}{' ' if ago else ''}({row.stop_reason})"
        had = row.stopped_with
        if had is not None and any(had):
            counts = f"run {had[0]} · retry {had[1]} · approvals {had[2]}"
            ago = f"{ago}{', ' if ago else ''}with {counts}: none run or wait now"
        if ago:
            pair("stopped", Text(ago, style=tones.muted))
    elif old and row.age_s is not None:
        counts = f"run {row.running} · retry {row.retrying} · approvals {row.approvals}"
        pair("as of", Text(f"{fmt.duration(row.age_s)} ago: {counts}", style=tones.muted))
    if row.link_state == "lost":
        # two short lines: each fits beside its label at 80 columns
        pair("gone", Text("without a word: its agents may still run", style=tones.warning))
        pair("on restart", Text("its detached agents are re-adopted", style=tones.muted))
    elif row.link_state == "config":
        why = "this console's token setting: the scheduler was not asked"
        pair("problem", Text(why, style=tones.muted))
    # what is not known is said so; what is old is marked so (never shown as live)
    since = f" (as of {fmt.duration(row.age_s)} ago)" if old and row.age_s is not None else ""
    if not known:
        pair("dispatch", Text("unknown", style=tones.muted))
        pair("tokens", Text("unknown", style=tones.muted))
    else:
        dispatch = Text(
            "paused" if row.dispatch_paused else "on",
            style=tones.warning + tones.bold if row.dispatch_paused else "",
            end="",
        )
        dispatch.append(since, style=tones.muted)
        pair("dispatch", dispatch)
        t = row.totals
        tokens = Text(
            f"{fmt.grouped(t.total_tokens)} (in {fmt.compact(t.input_tokens)}, "
            f"out {fmt.compact(t.output_tokens)})"
            + (f" · ${t.cost_usd:,.2f}" if t.cost_usd is not None else ""),
            end="",
        )
        tokens.append(since, style=tones.muted)
        pair("tokens", tokens)
    # the windows' own labelled lines (primary, secondary, credits) line up with these
    limits = (
        limits_text(row.rate_limits, now, tones, label_width=DETAIL_LABEL)
        if known
        else Text("unknown", style=tones.muted)
    )
    pair("limits", limits)
    if row.error:
        pair("last error", inert(row.error, tones.error, limit=300))
    return text


class ProjectsScreen(Screen[None]):
    CONSOLE_SCOPE = "projects"
    BINDINGS = bindings_for("projects")

    def __init__(self) -> None:
        super().__init__(classes="projects-screen")
        self._snapshot: Snapshot | None = None
        self._now: datetime | None = None
        self._placed = False  # the cursor starts on the project filtered by

    def compose(self) -> ComposeResult:
        table = KeyedTable(COLUMNS, flex="error", shrink=SHRINK, id="projects", classes="pane")
        table.border_title = "Projects"
        yield table
        detail = Static(id="project-detail", classes="pane")
        detail.border_title = "Selected"
        yield detail
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#projects").focus()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        self._snapshot, self._now = snapshot, now
        showing = console_app(self).project_filter
        table = self.query_one("#projects", KeyedTable)
        table.sync(project_rows(snapshot, tones, showing, table.column_width("project")))
        if not self._placed:
            self._placed = True
            if showing is not None:
                table.select_key(showing)
        live, count = live_of(snapshot)
        title = f"Projects ({live}/{count} live)"
        table.border_title = title + (f" · showing {one_line(showing, 24)}" if showing else "")
        self._show_detail(tones)

    def _show_detail(self, tones: Tones) -> None:
        detail = self.query_one("#project-detail", Static)
        row = project_row(self._snapshot, self.selected_project())
        if row is None or self._now is None:
            update_static(detail, Text("no projects", style=tones.muted))
            return
        update_static(detail, project_detail(row, self._now, tones))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_detail(console_app(self).tones)
        self.app.refresh_bindings()

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_filter_selected()

    def action_filter_selected(self) -> None:
        """Show only the selected project's rows; on the one shown, every project's."""
        name = self.selected_project()
        if name is None:
            return
        set_filter = getattr(self.app, "set_project_filter", None)
        if set_filter is not None:
            set_filter(None if name == console_app(self).project_filter else name)

    def selected_project(self) -> str | None:
        """The project of the row under the cursor (``p`` and ``R`` act on it)."""
        tables = self.query("#projects").results(KeyedTable)
        return next((t.selected_key for t in tables), None)

    def selected_approval(self) -> ApprovalRequest | None:
        return None

    def selected_issue_id(self) -> str | None:
        return None
