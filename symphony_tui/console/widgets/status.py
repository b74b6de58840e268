"""The header line: where we are, counts, next poll, and anything the operator must see."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.fleet import OUT_OF_DATE_STATES, live_of
from symphony_tui.console.sanitize import one_line

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import Snapshot


#: Link states in which the console's data may be out of date (``RemotePort.link``).
LOST_LINK_STATES = frozenset({"reconnecting", "stale"})


def link_text(link, tones: Tones) -> Text:
    """An attached console's link: ``◌ connecting``, ``● live``, ``◌ scheduler link lost ·
    reconnecting · 4s old``, ``✗ scheduler link lost · STALE · 32s old``, ``■ scheduler
    stopped``; ``● live · ↻ re-attached: pid 4242 (http://127.0.0.1:38211)`` for a while
    after the console followed its scheduler to a new address. ``link`` has ``state`` and
    ``age_s`` (seconds since the scheduler was last heard from), and may have ``moved``, as
    :meth:`RemotePort.link` and ``FollowingPort.link`` return."""
    age = "" if link.age_s is None else f" · {fmt.duration(link.age_s)} old"
    if link.state == "stopped":
        return Text(
            stopped_word(getattr(link, "gone", False)), style=tones.error + tones.bold, end=""
        )
    if link.state == "live":
        text = Text("● live", style=tones.success, end="")
        moved = getattr(link, "moved", None)
        if moved:
            text.append(f" · ↻ {one_line(moved, 100)}", style=tones.warning)
        return text
    if link.state == "stale":
        return Text(f"✗ scheduler link lost · STALE{age}", style=tones.error + tones.bold, end="")
    if link.state == "reconnecting":
        return Text(f"◌ scheduler link lost · reconnecting{age}", style=tones.warning, end="")
    return Text(f"◌ {link.state}{age}", style=tones.warning, end="")


def unknown_since(link) -> float | None:
    """Seconds since the last update when ``link`` is lost (reconnecting or stale, or its
    scheduler gone without saying it was stopping): live rows are then shown as unknown
    since then. None for a live link, a clean stop or a local scheduler."""
    if link is None:
        return None
    if link.state not in LOST_LINK_STATES and not (link.state == "stopped" and link.gone):
        return None
    return link.age_s or 0.0


#: What a console says of a scheduler gone without saying it was stopping.
GONE_AGENTS = "its agents may still run; started again, it takes them back"


def stopped_word(gone: bool) -> str:
    """``■ scheduler stopped``, or ``■ scheduler gone`` when it did not say it was stopping."""
    return "■ scheduler gone" if gone else "■ scheduler stopped"


def stopped_text(link, now: datetime, tones: Tones, width: int | None = None) -> Text:
    """The line of an attached console whose scheduler has stopped: ``■ scheduler stopped
    at 14:02:11 (8s ago): why · nothing runs there now; q quits``. With the link's ``hint``
    (what comes next: the console watches for it to start again, or the command that
    attaches again) the hint comes first and the why last, ``■ scheduler stopped at
    14:02:11 (8s ago) · attach again: symphony-tui ~/p/WORKFLOW.md · why``, cut at
    ``width`` cells. One gone without saying it was stopping (``link.gone``) says first
    that its agents may still run: ``■ scheduler gone at 14:02:11 (8s ago) · its agents
    may still run; started again, it takes them back · hint · why``. When the hint itself would be cut, it goes on the rows under the
    stopped line, in fewer words if need be (``watching http://h:8080 for it to start
    there again; elsewhere, CMD`` becomes ``watching h:8080 · elsewhere, CMD``); only what
    still does not fit is cut."""
    at = link.stopped_at
    when = ""
    if at is not None:
        when = f" at {fmt.clock_time(at)} ({fmt.duration((now - at).total_seconds())} ago)"
    hint = getattr(link, "hint", None)
    why = one_line(link.error, 160) if link.error else ""
    hint = one_line(hint, 160) if hint else None
    gone = bool(getattr(link, "gone", False))
    text = _stopped_line(tones, when, why, hint, gone=gone)
    if width is None or width <= 0 or text.cell_len <= width:
        return text
    if not hint or (
        (gone or not hint.startswith("watching"))
        and _stopped_line(tones, when, "", hint, gone=gone).cell_len <= width
    ):
        text.truncate(width, overflow="ellipsis")  # the hint is whole: what is cut is the why
        return text
    if gone:
        text = _stopped_line(tones, when, why, None, gone=True)
    else:
        text = Text(stopped_word(gone), style=tones.error + tones.bold, end="")
        text.append(f"{when}{f': {why}' if why else ''}")
    text.truncate(width, overflow="ellipsis")
    # the hint on the rows left under it, broken between words here so that the alert's
    # height (one row a line) is what shows; what does not fit the last row is cut
    rows = _rows(hint, width)
    if len(rows) > HINT_ROWS:
        rows = _rows(_short_hint(hint), width)
    for row in rows[:HINT_ROWS]:
        text.append("\n")
        text.append(row, style=tones.bold)
    if len(rows) > HINT_ROWS:
        text.truncate(text.cell_len - 1)
        text.append("…", style=tones.bold)
    return text


HINT_ROWS = 2  # under the stopped line: the alert shows three rows at most


def _rows(words: str, width: int) -> list[str]:
    """``words`` broken into rows of at most ``width`` cells, between words where it can."""
    rows: list[str] = []
    row = ""
    for word in words.split(" "):
        while cell_len(word) > width:  # a path longer than a row is folded
            if row:
                rows.append(row)
                row = ""
            rows.append(word[:width])
            word = word[width:]
        if not row:
            row = word
        elif cell_len(row) + 1 + cell_len(word) <= width:
            row = f"{row} {word}"
        else:
            rows.append(row)
            row = word
    if row:
        rows.append(row)
    return rows


def _short_hint(hint: str) -> str:
    """The hint in fewer words: the address without its scheme, then the command."""
    watching = re.match(r"watching (\S+) for it to start there again; elsewhere, (.*)", hint)
    if watching:
        address = re.sub(r"^[a-z]+://", "", watching[1]).rstrip("/")
        return f"watching {address} · elsewhere, {watching[2]}"
    return hint


def _stopped_line(
    tones: Tones, when: str, why: str, hint: str | None, *, gone: bool = False
) -> Text:
    text = Text(stopped_word(gone), style=tones.error + tones.bold, end="")
    if gone:
        # its agents may still run: that first, then what comes next, why it is gone last
        text.append(f"{when} · {GONE_AGENTS}")
        if hint:
            text.append(" · ")
            text.append(hint, style=tones.bold)
        if why:
            text.append(f" · {why}")
        return text
    if not hint:
        text.append(f"{when}{f': {why}' if why else ''} · nothing runs there now; q quits")
        return text
    if hint.startswith("watching"):
        # nothing to type: what stopped it matters more, and the short hint follows
        text.append(f"{when}{f': {why}' if why else ''} · ")
        text.append(hint, style=tones.bold)
    else:
        text.append(f"{when} · ")
        text.append(hint, style=tones.bold)
        if why:
            text.append(f" · {why}")
    return text


def status_text(
    snapshot: Snapshot,
    now: datetime,
    tones: Tones,
    link=None,
    *,
    showing: str | None = None,
    width: int | None = None,
) -> Text:
    """One line: the link (attached consoles), counts, next poll, approvals, paused,
    tracker, backend, workflow. A fleet console (``projects``) ends with its projects
    instead: how many are live, which one is shown (``showing``: the project filter) and
    the key of the projects table. A fleet's line longer than ``width`` cells is said
    again in its short words (``⚑ 3``, ``⌂ 2/3 live``), so its projects' state is not the
    part cut; one scheduler's line ends with what can be cut (poll, tracker, workflow)."""
    text = _status_text(snapshot, now, tones, link, showing, short=False)
    if not snapshot.projects or width is None or text.cell_len <= width:
        return text
    # too wide: the short words, then the paused projects' names shorter, then fewer of
    # them (their count stays)
    named = len(_paused_names(snapshot, showing))
    for keep, cells in [(k, c) for k in range(named, 0, -1) for c in NAME_CELLS] + [(0, 0)]:
        text = _status_text(snapshot, now, tones, link, showing, short=True, keep=keep, cells=cells)
        if text.cell_len <= width:
            break
    return text


def _paused_names(s: Snapshot, showing: str | None) -> list[str]:
    """The fleet's projects whose dispatching is paused (the shown one's alone, with
    ``showing``)."""
    if showing is not None:
        return [showing] if s.dispatch_paused else []
    return [p.name for p in s.projects if p.dispatch_paused]


#: Cells a paused project's name may take in the status line: whole (up to the first),
#: else cut to the second.
NAME_CELLS = (24, 12)


def paused_words(
    names: list[str], keep: int | None = None, *, cells: int = NAME_CELLS[0], showing: bool = False
) -> str:
    """A fleet's paused projects: ``⏸ alpha paused``, ``⏸ 2 paused: alpha, beta``; at
    most ``keep`` names (``⏸ 3 paused: alpha, +2``; 0: ``⏸ 3 paused``), each cut to
    ``cells``; with ``showing`` (the one project shown, named beside it) ``⏸ paused``;
    ``""`` when none is."""
    if not names:
        return ""
    if showing:
        return "⏸ paused"
    keep = len(names) if keep is None else keep
    shown = [one_line(n, cells) for n in names[:keep]]
    if len(names) == 1:
        return f"⏸ {shown[0]} paused" if shown else "⏸ 1 paused"
    if not shown:
        return f"⏸ {len(names)} paused"
    rest = f", +{len(names) - keep}" if keep < len(names) else ""
    return f"⏸ {len(names)} paused: {', '.join(shown)}{rest}"


def _status_text(
    snapshot: Snapshot,
    now: datetime,
    tones: Tones,
    link,
    showing: str | None,
    *,
    short: bool,
    keep: int | None = None,
    cells: int = NAME_CELLS[0],
) -> Text:
    s = snapshot
    text = Text(end="", no_wrap=True, overflow="ellipsis")
    if link is not None:
        text.append_text(link_text(link, tones))
        text.append(" │ ")
    # most urgent first: a narrow terminal cuts the end of the line
    cap = f"/{s.max_concurrent_agents}" if s.max_concurrent_agents else ""
    text.append(f"● {len(s.running)}{cap} running", style=tones.success if s.running else "")
    text.append(" · ")
    text.append(f"↻ {len(s.retrying)} retry", style=tones.warning if s.retrying else "")
    text.append(" · ")
    text.append(f"✓ {fmt.done_count(s)} done")
    if s.hosts:  # worker hosts: how many are up, runs over their capacity
        up = sum(1 for h in s.hosts if h.up)
        caps = [h.capacity for h in s.hosts]
        room = "" if None in caps else f"/{sum(c or 0 for c in caps)}"
        busy = sum(h.running for h in s.hosts)
        text.append(" │ ")
        drained = sum(1 for h in s.hosts if h.drained)
        text.append(
            f"⇄ {up}/{len(s.hosts)} hosts up · {busy}{room} on hosts"
            + (f" · {drained} drained" if drained else ""),
            style=tones.warning if up < len(s.hosts) or drained else "",
        )
    if s.approvals:
        text.append(" │ ")
        word = "" if short else f" approval{'s' * (len(s.approvals) != 1)}"
        text.append(f"⚑ {len(s.approvals)}{word}", style=tones.warning + tones.bold)
    if s.projects:
        return _fleet_tail(text, s, tones, showing, short=short, keep=keep, cells=cells)
    text.append(" │ ")
    if s.dispatch_paused:
        text.append("⏸ DISPATCH PAUSED", style=tones.warning + tones.bold)
    elif s.next_poll_at is not None:
        text.append(f"next poll {fmt.until(s.next_poll_at, now)}", style=tones.muted)
    else:
        text.append("next poll -", style=tones.muted)
    text.append(" │ ")
    text.append(f"{one_line(s.tracker_kind or '-', 12)} · {one_line(s.backend or '-', 12)}")
    text.append(" │ ")
    text.append(one_line(s.workflow_path or "-", 60), style=tones.muted)
    return text


def _fleet_tail(
    text: Text,
    s: Snapshot,
    tones: Tones,
    showing: str | None,
    *,
    short: bool,
    keep: int | None,
    cells: int,
) -> Text:
    """The status line's end in a fleet console: ``⌂ 2/3 projects live · ⏸ 2 paused: api,
    web · P projects``, ``⌂ 2/3 projects live · showing api · ⏸ paused · P projects``
    (``short``: ``⌂ 2/3 live · api · ⏸ paused``; ``keep``, ``cells``: :func:`paused_words`).
    A duplicate (a line reaching another's scheduler) is not counted."""
    live, count = live_of(s)
    text.append(" │ ")
    text.append(
        f"⌂ {live}/{count} {'live' if short else 'projects live'}",
        style=tones.warning if live < count else "",
    )
    if showing is not None:
        text.append(f" · {'' if short else 'showing '}{one_line(showing, 24)}", style=tones.bold)
    paused = paused_words(_paused_names(s, showing), keep, cells=cells, showing=showing is not None)
    if paused:
        text.append(f" · {paused}", style=tones.warning + tones.bold)
    if not short:
        text.append(" · P projects", style=tones.muted)
    return text


#: A fleet project's link states in the order of their warnings, the most urgent first: a
#: project its console may no longer reach, then one whose scheduler stopped (nothing runs
#: there). Another out-of-date state (``console.fleet.OUT_OF_DATE_STATES``) goes with the
#: lost ones, after them.
PROJECT_URGENCY = ("lost", "stale", "reconnecting", "down", "refused", "config")
#: Each warning's urgency (lower first); a lost project's is ``_RANK_PROJECT`` plus its
#: place in :data:`PROJECT_URGENCY`.
_RANK_LINK, _RANK_CONFIG, _RANK_TRACKER, _RANK_PROJECT = 0, 1, 2, 10
_RANK_HOST, _RANK_STOPPED, _RANK_PAUSED = 20, 30, 40


@dataclass(frozen=True)
class Alert:
    """One warning of the alert line: ``label`` (``✗ project api stale: ``) and
    ``value``; ``rank``: its urgency (lower first); ``short``: its words in a summary of
    the warnings that do not fit (``api stale``)."""

    rank: int
    label: str
    value: str
    short: str


def project_alerts(snapshot: Snapshot) -> list[Alert]:
    """A fleet console's projects whose link is lost or whose scheduler stopped, one
    warning per state: ``✗ project api stale: why · last update 32s ago``, or, for
    several in one state, ``✗ 2 projects stale: api, web`` (`` · why`` when it is the
    same for all); lost before stopped (:data:`PROJECT_URGENCY`). A clean stop is no
    error: ``■ project web stopped: stopped by SIGTERM`` (the warning tone, :func:`_line`)."""
    by_state: dict[str, list] = {}
    for p in snapshot.projects:
        if p.link_state in OUT_OF_DATE_STATES:
            by_state.setdefault(p.link_state, []).append(p)
    alerts: list[Alert] = []
    for state, rows in by_state.items():
        mark = "✗"
        if state == "stopped":
            rank, mark = _RANK_STOPPED, "■"
        elif state in PROJECT_URGENCY:
            rank = _RANK_PROJECT + PROJECT_URGENCY.index(state)
        else:
            rank = _RANK_PROJECT + len(PROJECT_URGENCY)
        if len(rows) == 1:
            p = rows[0]
            said = p.error or p.stop_reason
            why = one_line(said, 160) if said else "no update"
            age = "" if p.age_s is None else f" · last update {fmt.duration(p.age_s)} ago"
            name = one_line(p.name, 30)
            label = f"{mark} project {name} {state}: "
            alerts.append(Alert(rank, label, f"{why}{age}", f"{name} {state}"))
            continue
        names = ", ".join(one_line(p.name, 30) for p in rows)
        errors = {p.error or p.stop_reason for p in rows}
        if len(errors) == 1 and None not in errors:  # one reason for all: said once
            names += f" · {one_line(errors.pop(), 160)}"
        label = f"{mark} {len(rows)} projects {state}: "
        alerts.append(Alert(rank, label, names, f"{len(rows)} projects {state}"))
    return alerts


def host_alerts(snapshot: Snapshot) -> list[Alert]:
    """Worker hosts that are down: ``✗ host build-2 down: why``, several in one line
    (``✗ 2 hosts down: build-1, build-2``)."""
    down = [h for h in snapshot.hosts if not h.up]
    if len(down) == 1:
        name = one_line(down[0].name, 40)
        why = one_line(down[0].last_error or "unreachable", 200)
        return [Alert(_RANK_HOST, f"✗ host {name} down: ", why, f"host {name} down")]
    if down:
        names = ", ".join(one_line(h.name, 40) for h in down)
        return [Alert(_RANK_HOST, f"✗ {len(down)} hosts down: ", names, f"{len(down)} hosts down")]
    return []


def alert_text(
    snapshot: Snapshot,
    now: datetime,
    tones: Tones,
    link=None,
    *,
    width: int | None = None,
    lines: int | None = None,
) -> Text | None:
    """What the operator must see, the most urgent first, one warning a line: a lost
    scheduler link (attached consoles), config and tracker errors, a fleet's lost
    projects, hosts down, its stopped projects, a paused tracker; ``None`` when all is
    well. ``width``: the cells a line has (a stopped scheduler's line is cut to it,
    :func:`stopped_text`); ``lines``: the rows the alert line has. When the warnings
    wrapped to ``width`` would take more rows than ``lines``, each is cut to one row,
    and those beyond ``lines`` are summed up in the last (``+2 more: web stopped, host
    build-2 down``)."""
    s = snapshot
    since = unknown_since(link)
    if link is not None and link.state == "stopped":
        return stopped_text(link, now, tones, width)
    alerts: list[Alert] = []
    if since is not None:
        why = one_line(link.error, 200) if link.error else "no update"
        value = f"{why} · last update {fmt.duration(since)} ago"
        alerts.append(Alert(_RANK_LINK, "✗ scheduler link lost: ", value, "scheduler link lost"))
    if s.config_error:
        value = one_line(s.config_error, 200)
        alerts.append(Alert(_RANK_CONFIG, "✗ config error: ", value, "config error"))
    if s.tracker_error:
        value = one_line(s.tracker_error, 200)
        alerts.append(Alert(_RANK_TRACKER, "✗ tracker error: ", value, "tracker error"))
    alerts += project_alerts(s)
    alerts += host_alerts(s)
    if s.tracker_paused_until is not None and s.tracker_paused_until > now:
        value = f"resumes in {fmt.until(s.tracker_paused_until, now)}"
        alerts.append(Alert(_RANK_PAUSED, "⏸ tracker paused: ", value, "tracker paused"))
    if not alerts:
        return None
    alerts.sort(key=lambda a: a.rank)  # stable: same rank, order as found
    if width is not None and width > 0 and lines and _alert_rows(alerts, width) > lines:
        return _fitted(alerts, tones, width, lines)
    text = Text(end="")
    for i, alert in enumerate(alerts):
        if i:
            text.append("\n")
        text.append_text(_line(alert, tones))
    return text


def _fitted(alerts: list[Alert], tones: Tones, width: int, lines: int) -> Text:
    """``alerts`` one row each, cut to ``width`` cells, in ``lines`` rows: those beyond
    summed up in the last (``+2 more: web stopped, host build-2 down``)."""
    text = Text(end="")
    shown = alerts if len(alerts) <= lines else alerts[: lines - 1]
    rest = alerts[len(shown) :]
    for i, alert in enumerate(shown):
        line = _line(alert, tones)
        line.truncate(width, overflow="ellipsis")
        if i:
            text.append("\n")
        text.append_text(line)
    if rest:
        more = Text("", end="", no_wrap=True)
        more.append(f"+{len(rest)} more: ", style=tones.error + tones.bold)
        more.append(", ".join(a.short for a in rest))
        more.truncate(width, overflow="ellipsis")
        if shown:
            text.append("\n")
        text.append_text(more)
    return text


def _line(alert: Alert, tones: Tones) -> Text:
    """An error's label (``✗ ...``) in the error tone, bold; any other (``■`` a clean
    stop, ``⏸`` a pause) in the warning tone."""
    style = tones.error + tones.bold if alert.label.startswith("✗") else tones.warning
    line = Text("", end="", no_wrap=True)
    line.append(alert.label, style=style)
    line.append(alert.value)
    return line


def _alert_rows(alerts: list[Alert], width: int) -> int:
    """Rows ``alerts`` take wrapped to ``width`` cells, one a line."""
    return sum(wrapped_rows(a.label + a.value, width) for a in alerts)


def wrapped_rows(line: str, width: int) -> int:
    """Rows one line of the alert line takes at ``width`` cells (at least one)."""
    return max(1, -(-cell_len(line) // width))
