"""Pane 2: active workers (running rows), keyed by issue id.

A row's last-activity cell follows streamed text, which under a flood changes on every
refresh tick; it is repainted at most once every ``activity_interval_s`` per row
(:class:`ActivityGate`, to bound terminal bytes), while the row's other cells (status,
approvals, turn, tokens) show on the next tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.fleet import (
    PROJECT_CELLS,
    fit_name,
    is_fleet,
    project_names,
    unknown_by_project,
)
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.widgets.keyed_table import KeyedTable, Row, RowCache
from symphony_tui.text import one_line_tail

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import RunningRow, Snapshot

COLUMNS = (
    ("approval", "", 2),
    ("issue", "Issue", 10),
    ("status", "Status", 12),
    ("turn", "Turn", 4),
    ("attempt", "Try", 3),
    ("age", "Age", 6),
    ("tokens", "Tokens", 7),
    ("mem", "Mem", 4),
    ("last", "Last event", 16),
)
#: At 80 columns the status gives up to 2 cells to the last event.
SHRINK = {"status": 10}
#: With worker hosts configured: the host after the issue; at 80 columns it
#: gives up to 9 cells, the Status column 3, the Issue column 2 and Tokens 1 to the last event,
#: which keeps its least 8 (see ``KeyedTable``'s ``shrink``).
HOST_COLUMN = ("host", "Host", 16)
COLUMNS_WITH_HOSTS = (*COLUMNS[:2], HOST_COLUMN, *COLUMNS[2:])
HOST_SHRINK = {"host": 7, "status": 9, "tokens": 6, "issue": 8}
#: A fleet console: the project after the approval flag (identifiers repeat across
#: projects); at 80 columns it gives up to 3 cells, Status 3, Issue 2 and Tokens 1 to the
#: last event.
PROJECT_COLUMN = ("project", "Project", PROJECT_CELLS)
FLEET_SHRINK = {"project": 7, "status": 9, "tokens": 6, "issue": 8}
#: With worker hosts too, at 80 columns the memory and attempt columns give all their
#: cells (they are hidden there) and Turn one, so the last event keeps its least 8.
FLEET_HOST_SHRINK = {"host": 7, **FLEET_SHRINK, "mem": 0, "attempt": 0, "turn": 3}


def column_spec(
    hosts: bool, fleet: bool
) -> tuple[tuple[tuple[str, str, int], ...], dict[str, int]]:
    """The workers table's columns and what they give the last event at 80 columns."""
    columns = COLUMNS_WITH_HOSTS if hosts else COLUMNS
    shrink = HOST_SHRINK if hosts else SHRINK
    if fleet:
        columns = (columns[0], PROJECT_COLUMN, *columns[1:])
        shrink = FLEET_HOST_SHRINK if hosts else FLEET_SHRINK
    return columns, shrink


MIN_MESSAGE_CELLS = 8  # below this the event kind gives way to the message

#: Statuses that claim the agent is doing something now: while an attached console's link
#: is lost they are shown as unknown since the last update (``worker_rows``' ``unknown_s``).
#: (``RunStatus`` values, a ``StrEnum``: the domain is not imported before the first frame.)
LIVE_STATUSES = frozenset(
    {
        "preparing_workspace",
        "building_prompt",
        "launching_agent",
        "initializing_session",
        "streaming_turn",
        "waiting_for_operator",
        "retrying_model",
        "finishing",
    }
)


#: The status cell of a live row while the link is lost (the age goes in its last event).
UNKNOWN_LABEL: tuple[str, str, str] = ("?", "unknown", "muted")


def link_label(state: str, since: datetime | None, now: datetime) -> tuple[str, str, str]:
    """The status cell of a run whose link to its agent is not connected
    (``RunningRow.link_state``), in the 9 cells the column keeps at 80 columns:
    ``↻ cut 12s`` (then ``↻ cut 3m``, ``↻ cut 2h``) while reconnecting, ``✗ no link``."""
    if state != "reconnecting":
        return ("✗", "no link", "error")
    s = max(int((now - since).total_seconds()), 0) if since is not None else 0
    age = f"{s}s" if s < 60 else f"{s // 60}m" if s < 3600 else f"{min(s // 3600, 99)}h"
    return ("↻", f"cut {age}", "warning")


def _status_cell(value: Any, tones: Tones) -> Text:
    """A status label; ``? unknown`` (dimmed) for ``"unknown"``; a link's label as is."""
    if value == "unknown":
        return fmt.labelled(UNKNOWN_LABEL, tones)
    if isinstance(value, tuple):
        return fmt.labelled(value, tones)
    return fmt.labelled(fmt.STATUS_LABELS.get(value) or fmt.BUDGET_LABEL, tones)


def last_activity(row: RunningRow, tones: Tones, limit: int = 120) -> Text:
    """``event: message`` on one line, inert, at most ``limit`` cells. The message keeps
    its end, the newest words (``symphony_tui.domain.activity``): ``last_message`` is a
    rolling window of streamed text whose head is older than the column is wide."""
    text = Text(end="")
    event = one_line(row.last_event, 20) if row.last_event else ""
    if row.last_message and limit - len(event) - 2 < MIN_MESSAGE_CELLS:
        event = ""  # a narrow column: the words, not the kind
    if event:
        text.append(event, style=tones.muted)
        if row.last_message:
            text.append(": ", style=tones.muted)
    if row.last_message:
        room = max(limit - len(text.plain), 1)
        text.append_text(inert(one_line_tail(row.last_message, room)))
    return text


def worker_rows(
    snapshot: Snapshot,
    now: datetime,
    tones: Tones,
    cache: RowCache | None = None,
    last_width: int = 120,
    gate: ActivityGate | None = None,
    hosts: bool = False,
    unknown_s: float | None = None,
    fleet: bool = False,
    unknown_by: Mapping[str, float] | None = None,
    project_width: int = PROJECT_CELLS,
    near: range | None = None,
) -> list[tuple[str, Row]]:
    """(issue id, cells) of the running rows; the last-event cell fits ``last_width``
    cells (its column's width: the table would crop the newest words). ``hosts``: a host
    cell after the issue (``COLUMNS_WITH_HOSTS``; ``-`` for a run here). With a ``cache``,
    only cells whose value changed are rebuilt (with many busy workers, usually just the
    last event); with a ``gate``, the last-event cell keeps what it showed until the gate
    lets the new one through. ``unknown_s``: the link to the scheduler is lost and its last
    update is this many seconds old; each live status (:data:`LIVE_STATUSES`) and its
    approval flag then read as unknown (dimmed), and its last event says how old it is
    (``as of 19s ago``), never as current. The memory cell is the agent's resident memory
    at the last resource sample (``-`` before it).

    ``fleet``: a project cell after the approval flag (:func:`column_spec`), its name cut
    to ``project_width`` cells;
    ``unknown_by``: project -> seconds since its last update, for each project whose link
    is lost (``fleet.unknown_by_project``): its rows read as unknown as with ``unknown_s``.

    ``near``: the row indices worth building (those on screen and near it,
    ``KeyedTable.near_view``); a row outside it keeps the cells ``cache`` last built for
    it, so a refresh costs what is near the screen, not every worker (each row's
    running time moves every second). A row never built is built wherever it is."""
    cache = cache if cache is not None else RowCache()
    activity: Callable[[RunningRow, int], _Activity] = (
        gate.activity if gate is not None else _Activity
    )

    def plain(v: str) -> Text:
        return Text(v, end="")

    makers: tuple[Callable[[Any], Text], ...] = (
        lambda n: Text(f"⚑{min(n, 9)}", style=tones.warning, end="") if n else Text("", end=""),
        lambda v: inert(v, tones.bold, limit=10),
        lambda v: _status_cell(v, tones),
        plain,
        plain,
        plain,
        plain,
        plain,
        lambda a: last_activity(a.row, tones, a.width),
    )
    if hosts:
        makers = (*makers[:2], lambda v: inert(v, limit=40), *makers[2:])
    if fleet:
        # (name, cells): cut to the column with "…" rather than cropped by the table
        makers = (makers[0], lambda v: inert(v, tones.muted), *makers[1:])
    rows: list[tuple[str, Row]] = []
    names = project_names(snapshot)
    for index, r in enumerate(snapshot.running):
        if near is not None and index not in near:
            kept = cache.last(r.issue_id)
            if kept is not None:
                rows.append((r.issue_id, kept))
                continue
        budget = r.budget_reached
        if budget is not None:  # held: the row says why, until the operator decides
            r = r.model_copy(update={"last_event": "budget reached", "last_message": budget})
        elif r.error is not None:  # failed, its worker still finishing: say why
            r = r.model_copy(update={"last_event": "error", "last_message": r.error})
        status: Any = r.status if budget is None else "budget"
        if budget is None and r.link_state != "connected":
            status = link_label(r.link_state, r.link_since, now)
        pending = r.pending_approvals
        unknown = unknown_s
        if unknown is None and unknown_by and r.project is not None:
            unknown = unknown_by.get(r.project)
        if unknown is not None and budget is None and r.status in LIVE_STATUSES:
            # what it did as of the last update, said so: ``as of 19s ago: <message>``
            status, pending = "unknown", 0
            r = r.model_copy(update={"last_event": f"as of {fmt.duration(unknown)} ago"})
        inputs: tuple = (
            pending,
            r.issue_identifier,
            status,
            str(r.turn_count),
            "-" if r.attempt is None else str(r.attempt),
            fmt.age(r.started_at, now),
            fmt.compact(r.tokens.total_tokens)
            if r.usage_reported and not r.tokens.is_zero
            else "-",
            fmt.memory(r.rss_bytes),
            activity(r, last_width),
        )
        if hosts:
            inputs = (*inputs[:2], r.host or "-", *inputs[2:])
        if fleet:
            inputs = (inputs[0], fit_name(r.project, project_width, names), *inputs[1:])
        rows.append((r.issue_id, cache.row(r.issue_id, inputs, makers, tones)))
    cache.retain(k for k, _ in rows)
    if gate is not None:
        gate.retain(k for k, _ in rows)
    return rows


class _Activity:
    """The last-event cell's input: equal when the event name, message and width are."""

    __slots__ = ("_key", "row", "width")

    def __init__(self, row: RunningRow, width: int) -> None:
        self.row = row
        self.width = width
        self._key = (row.last_event, row.last_message, width)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Activity) and self._key == other._key

    __hash__ = None  # type: ignore[assignment]  # unhashable, as __eq__ says


class ActivityGate:
    """Per row, the last-activity input shown, changed at most once every ``interval_s``
    seconds of ``monotonic``: a change within the interval of the last one is held (the
    older input is returned) until a call after the interval. A new width always goes
    through (the cell is cut to it). ``interval_s`` 0 lets everything through.
    ``holding``: a change was held back since the last :meth:`retain` (the table must be
    shown again once the interval has passed, even if nothing else changes)."""

    def __init__(self, interval_s: float, monotonic: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._shown: dict[str, tuple[_Activity, float]] = {}
        self.holding = False
        self._held = False

    def activity(self, row: RunningRow, width: int) -> _Activity:
        new = _Activity(row, width)
        old = self._shown.get(row.issue_id)
        if old is not None and old[0] == new:
            return old[0]
        now = self._monotonic()
        if old is not None and old[0].width == width and now - old[1] < self.interval_s:
            self._held = True
            return old[0]
        self._shown[row.issue_id] = (new, now)
        return new

    def retain(self, keys: Iterable[str]) -> None:
        """Forget rows not in ``keys``; ends one pass over the rows (``holding``)."""
        keep = set(keys)
        for key in [k for k in self._shown if k not in keep]:
            del self._shown[key]
        self.holding, self._held = self._held, False


class WorkersTable(KeyedTable):
    """``activity_interval_s``: see :class:`ActivityGate` (0: every change at once)."""

    def __init__(
        self,
        *,
        activity_interval_s: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
        **kwargs,
    ) -> None:
        super().__init__(COLUMNS, flex="last", shrink=SHRINK, **kwargs)
        self._cache = RowCache()
        self._gate = ActivityGate(activity_interval_s, monotonic)
        self._shown: tuple[Snapshot, datetime, Tones, float | None] | None = None

    def show(
        self, snapshot: Snapshot, now: datetime, tones: Tones, unknown_s: float | None = None
    ) -> bool:
        """``unknown_s``: see :func:`worker_rows` (a lost link to an attached scheduler)."""
        self._shown = (snapshot, now, tones, unknown_s)
        hosts, fleet = bool(snapshot.hosts), is_fleet(snapshot)
        if self.set_column_spec(*column_spec(hosts, fleet)):
            self._cache = RowCache()  # the cells are laid out differently
        return self.sync(self._current_rows())

    @property
    def holding(self) -> bool:
        """Streamed text is held back (:class:`ActivityGate`): show again next tick."""
        return self._gate.holding

    def rows_for_widths(self) -> list[tuple[str, Row]] | None:
        # the last-event cell is cut to its column: a new width needs new cells
        if self._shown is None:
            return None
        return self._current_rows()

    def _current_rows(self) -> list[tuple[str, Row]]:
        assert self._shown is not None
        snapshot, now, tones, unknown_s = self._shown
        fleet = is_fleet(snapshot)
        return worker_rows(
            snapshot,
            now,
            tones,
            self._cache,
            self.column_width("last"),
            self._gate,
            bool(snapshot.hosts),
            unknown_s=unknown_s,
            fleet=fleet,
            unknown_by=unknown_by_project(snapshot) if fleet else None,
            project_width=self.column_width("project") if fleet else PROJECT_CELLS,
            near=self.near_view() if self.is_mounted else None,
        )

    def scrolled(self) -> None:
        # rows that were far from the view show their last cells: build them now
        if self._shown is not None and self.is_mounted:
            self.sync(self._current_rows())
