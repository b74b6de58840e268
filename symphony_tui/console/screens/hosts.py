"""The worker hosts screen (``worker.ssh_hosts``): one row per host from the
snapshot's ``hosts`` (up or down and since when, runs over capacity, the last probe's round
trip, workspaces held there, the last connection error), the selected host's detail below.

Actions: drain (asks first) / undrain the selected host, and probe it now; they go
through the port like every command, so an attached console drives them over HTTP.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console import fmt
from symphony_tui.console.messages import ConfirmCommand, ConsoleApp, SendCommand, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row
from symphony_tui.domain.commands import DrainHost, ProbeHost, UndrainHost

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import ApprovalRequest, Snapshot
    from symphony_tui.domain.snapshot import HostRow

#: What ``h`` says when the workflow lists no worker hosts.
NO_HOSTS = "no worker hosts: agents run on this machine (list them in WORKFLOW.md worker.ssh_hosts)"

# all seven fit 80 terminal columns (the error gets 14); the detail has the rest
COLUMNS = (
    ("host", "Host", 16),
    ("state", "State", 10),
    ("since", "Since", 5),
    ("runs", "Runs", 5),
    ("rtt", "RTT", 6),
    ("workspaces", "Wksp", 4),
    ("error", "Last error", 14),
)


def host_state(row: HostRow, tones: Tones) -> Text:
    """``● up``, ``✗ down``, ``⏸ drained`` (up), ``✗ down ⏸`` (down and drained);
    ``↻ 2 links`` while runs' links to their agents there reconnect."""
    if not row.up:
        return Text("✗ down" + (" ⏸" if row.drained else ""), style=tones.error, end="")
    if row.reconnecting:
        return Text(
            f"↻ {row.reconnecting} link" + "s" * (row.reconnecting > 1), style=tones.warning, end=""
        )
    if row.drained:
        return Text("⏸ drained", style=tones.warning, end="")
    return Text("● up", style=tones.success, end="")


def runs_text(row: HostRow) -> str:
    return f"{row.running}/{row.capacity}" if row.capacity is not None else str(row.running)


def rtt_text(row: HostRow) -> str:
    """The last probe's round trip in at most six characters (``38 ms``, ``2.0 s``)."""
    if row.rtt_ms is None:
        return "-"
    if row.rtt_ms < 999.5:
        return f"{row.rtt_ms:.0f} ms"
    seconds = row.rtt_ms / 1000
    return f"{seconds:.1f} s" if seconds < 99.95 else f"{seconds:.0f} s"


def links_text(row: HostRow, now: datetime) -> str:
    """How the runs there reach their agents: all connected, or how many reconnect, since
    when."""
    if not row.reconnecting:
        return "connected" if row.running else "-"
    return (
        f"{row.reconnecting} of {row.running} reconnecting, the first for "
        f"{fmt.age(row.reconnecting_since, now)}"
    )


def host_key(row: HostRow) -> str:
    """A host row's key: its name, ``project/name`` in a fleet console (two projects may
    name the same host)."""
    return row.name if row.project is None else f"{row.project}/{row.name}"


def host_rows(snapshot: Snapshot, now: datetime, tones: Tones) -> list[tuple[str, Row]]:
    rows: list[tuple[str, Row]] = []
    for h in snapshot.hosts:
        error = inert(one_line(h.last_error or "", 200), tones.error if not h.up else tones.muted)
        rows.append(
            (
                host_key(h),
                (
                    inert(host_key(h), tones.bold, limit=60),
                    host_state(h, tones),
                    Text(fmt.age(h.since, now) if h.since else "-", end=""),
                    Text(runs_text(h), end=""),
                    Text(rtt_text(h), end=""),
                    Text(str(h.workspaces), end=""),
                    error,
                ),
            )
        )
    return rows


def _memory_pair(row: HostRow, snapshot: Snapshot, tones: Tones) -> tuple[str, str, str]:
    """``memory``: the host's free memory and its agents' at the last resource sample,
    and why it takes no new run when it is short."""
    machine = next((m for m in snapshot.memory if m.host == row.name), None)
    if machine is None:
        return ("memory", "-", "")
    value = f"{fmt.memory(machine.available_bytes)} free"
    if machine.total_bytes is not None:
        value += f" of {fmt.memory(machine.total_bytes)}"
    value += f", agents {fmt.memory(machine.agents_rss_bytes)}"
    if machine.short is not None:
        return ("memory", f"{value}; no new run: {machine.short}", tones.warning)
    return ("memory", value, "")


def host_detail(row: HostRow, snapshot: Snapshot, now: datetime, tones: Tones) -> Text:
    """The selected host: its state since when, the runs on it, round trip, memory (free,
    its agents', why it is short), the workspaces known there (running and recovered ones), the last error and what a drain means."""
    running = [r.issue_identifier for r in snapshot.running if r.host == row.name]
    recovered = [w.issue_identifier or w.key for w in snapshot.recovered if w.host == row.name]
    since = ""
    if row.since is not None:
        since = f" since {row.since:%Y-%m-%d %H:%M:%S} UTC ({fmt.age(row.since, now)} ago)"
    state = ("up" if row.up else "down") + since
    cap = "no cap" if row.capacity is None else f"of {row.capacity}"
    runs = f"{row.running} {cap}" + (f": {', '.join(running)}" if running else "")
    held = str(row.workspaces)
    if recovered:
        held += f" (recovered here: {', '.join(recovered)})"
    drained = "no"
    if row.drained:
        drained = "yes: no new issue goes there (its runs go on)"
    pairs = [
        ("host", row.name, ""),
        ("state", state, tones.success if row.up else tones.error),
        ("drained", drained, tones.warning if row.drained else ""),
        ("runs", runs, ""),
        ("links", links_text(row, now), tones.warning if row.reconnecting else ""),
        ("round trip", rtt_text(row) + (" (last probe)" if row.rtt_ms is not None else ""), ""),
        _memory_pair(row, snapshot, tones),
        ("workspaces", held, ""),
        ("last error", row.last_error or "-", tones.error if row.last_error else ""),
    ]
    text = Text(end="")
    for i, (name, value, style) in enumerate(pairs):
        if i:
            text.append("\n")
        text.append(f"{name:<12}", style=tones.muted)
        text.append_text(inert(one_line(value, 300), style))
    return text


class HostsScreen(Screen[None]):
    CONSOLE_SCOPE = "hosts"
    BINDINGS = bindings_for("hosts")

    def __init__(self) -> None:
        super().__init__(classes="hosts-screen")
        self._snapshot: Snapshot | None = None
        self._now: datetime | None = None
        self._enabled: tuple | None = None

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

    def compose(self) -> ComposeResult:
        table = KeyedTable(COLUMNS, flex="error", id="hosts", classes="pane")
        table.border_title = "Worker hosts"
        yield table
        detail = Static(id="host-detail", classes="pane")
        detail.border_title = "Selected"
        yield detail
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#hosts").focus()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        self._snapshot, self._now = snapshot, now
        table = self.query_one("#hosts", KeyedTable)
        table.sync(host_rows(snapshot, now, tones))
        hosts = snapshot.hosts
        up = sum(1 for h in hosts if h.up)
        drained = sum(1 for h in hosts if h.drained)
        title = f"Worker hosts ({up}/{len(hosts)} up" + (
            f", {drained} drained)" if drained else ")"
        )
        table.border_title = title if hosts else "Worker hosts"
        self._show_detail(tones)
        self._refresh_keys()

    def _refresh_keys(self) -> None:
        """The footer again when what the selected host allows changed (drained, down)."""
        row = self.selected_host()
        enabled = None if row is None else (row.name, row.drained, row.up)
        if enabled != self._enabled:
            self._enabled = enabled
            self.app.refresh_bindings()

    def selected_host(self) -> HostRow | None:
        if self._snapshot is None:
            return None
        tables = self.query("#hosts").results(KeyedTable)
        key = next((t.selected_key for t in tables), None)
        return next((h for h in self._snapshot.hosts if host_key(h) == key), None)

    def selected_project(self) -> str | None:
        """A fleet console's project of the selected host (``p`` and ``R`` act on it)."""
        row = self.selected_host()
        return row.project if row is not None else None

    def _show_detail(self, tones: Tones) -> None:
        row = self.selected_host()
        detail = self.query_one("#host-detail", Static)
        if row is None or self._snapshot is None or self._now is None:
            detail.update(Text(NO_HOSTS, style=tones.muted))
            return
        detail.update(host_detail(row, self._snapshot, self._now, tones))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self._show_detail(self.console.tones)
        self._refresh_keys()

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # enter on a row: the detail is below already

    def selected_issue_id(self) -> str | None:
        return None

    def selected_approval(self) -> ApprovalRequest | None:
        return None

    # -- actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if getattr(self.app, "stopping", False):
            return False  # the console is quitting: its screens are going
        row = self.selected_host()
        # False hides a key that does not apply to the selected host (Textual 8)
        if action == "drain_selected":
            return row is not None and not row.drained
        if action == "undrain_selected":
            return row is not None and row.drained
        if action == "probe_selected":
            return row is not None
        return True

    def action_drain_selected(self) -> None:
        row = self.selected_host()
        if row is None or row.drained:
            return
        body = Text("Drain worker host ", end="")
        body.append_text(inert(row.name, "bold", limit=80))
        body.append("? No new issue is placed there. ")
        n = row.running
        body.append(f"{n} running attempt{'s' * (n != 1)} there {'go' if n != 1 else 'goes'} on, ")
        body.append("and issues whose workspace is there still go back to it. ")
        body.append("d undrains it; a restart forgets the drain.")
        self.post_message(
            ConfirmCommand(
                "Drain host", body, DrainHost(host=row.name, project=row.project), "Drain"
            )
        )

    def action_undrain_selected(self) -> None:
        row = self.selected_host()
        if row is not None and row.drained:
            self.post_message(SendCommand(UndrainHost(host=row.name, project=row.project)))

    def action_probe_selected(self) -> None:
        row = self.selected_host()
        if row is not None:
            self.post_message(SendCommand(ProbeHost(host=row.name, project=row.project)))
