"""The header line: where we are, counts, next poll, and anything the operator must see."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.fleet import OUT_OF_DATE_STATES
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
    ``width`` cells. When the hint itself would be cut, it goes on the rows under the
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
        not hint.startswith("watching")
        and _stopped_line(tones, when, "", hint, gone=gone).cell_len <= width
    ):
        text.truncate(width, overflow="ellipsis")  # the hint is whole: what is cut is the why
        return text
    text = Text(stopped_word(gone), style=tones.error + tones.bold, end="")
    if gone:
        why = f"{why} · {GONE_AGENTS}" if why else GONE_AGENTS
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
    if gone:  # its agents may still run: that comes before what to do next
        why = f"{why} · {GONE_AGENTS}" if why else GONE_AGENTS
    if not hint:
        then = "q quits" if gone else "nothing runs there now; q quits"
        text.append(f"{when}{f': {why}' if why else ''} · {then}")
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
    if snapshot.projects and width is not None and text.cell_len > width:
        text = _status_text(snapshot, now, tones, link, showing, short=True)
    return text


def _status_text(
    snapshot: Snapshot, now: datetime, tones: Tones, link, showing: str | None, *, short: bool
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
        return _fleet_tail(text, s, tones, showing, short=short)
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


def _fleet_tail(text: Text, s: Snapshot, tones: Tones, showing: str | None, *, short: bool) -> Text:
    """The status line's end in a fleet console: ``⌂ 2/3 projects live · showing api ·
    ⏸ 1 paused · P projects`` (``short``: ``⌂ 2/3 live · api · ⏸ 1 paused``)."""
    live = sum(1 for p in s.projects if p.link_state == "live")
    text.append(" │ ")
    text.append(
        f"⌂ {live}/{len(s.projects)} {'live' if short else 'projects live'}",
        style=tones.warning if live < len(s.projects) else "",
    )
    if showing is not None:
        text.append(f" · {'' if short else 'showing '}{one_line(showing, 24)}", style=tones.bold)
        paused = 1 if s.dispatch_paused else 0
    else:
        paused = sum(1 for p in s.projects if p.dispatch_paused)
    if paused:
        text.append(f" · ⏸ {paused} paused", style=tones.warning + tones.bold)
    if not short:
        text.append(" · P projects", style=tones.muted)
    return text


def project_alerts(snapshot: Snapshot) -> list[tuple[str, str]]:
    """A fleet console's projects whose link is lost or whose scheduler stopped, one
    ``(label, value)`` each: ``✗ project api stale: why · last update 32s ago``."""
    parts: list[tuple[str, str]] = []
    for p in snapshot.projects:
        if p.link_state not in OUT_OF_DATE_STATES:
            continue
        said = p.error or p.stop_reason
        why = one_line(said, 160) if said else "no update"
        age = "" if p.age_s is None else f" · last update {fmt.duration(p.age_s)} ago"
        parts.append((f"✗ project {one_line(p.name, 30)} {p.link_state}: ", f"{why}{age}"))
    return parts


def alert_text(
    snapshot: Snapshot, now: datetime, tones: Tones, link=None, *, width: int | None = None
) -> Text | None:
    """A lost scheduler link (attached consoles), then config / tracker problems, one a
    line, or ``None`` when all is well. ``width``: the cells a line has (a stopped
    scheduler's line is cut to it, :func:`stopped_text`)."""
    s = snapshot
    text = Text(end="")
    parts: list[tuple[str, str]] = []
    since = unknown_since(link)
    if link is not None and link.state == "stopped":
        return stopped_text(link, now, tones, width)
    if since is not None:
        why = one_line(link.error, 200) if link.error else "no update"
        parts.append(("✗ scheduler link lost: ", f"{why} · last update {fmt.duration(since)} ago"))
    parts += project_alerts(s)
    if s.config_error:
        parts.append(("✗ config error: ", one_line(s.config_error, 200)))
    if s.tracker_error:
        parts.append(("✗ tracker error: ", one_line(s.tracker_error, 200)))
    for host in s.hosts:
        if not host.up:
            why = one_line(host.last_error or "unreachable", 200)
            parts.append((f"✗ host {one_line(host.name, 40)} down: ", why))
    if s.tracker_paused_until is not None and s.tracker_paused_until > now:
        parts.append(("⏸ tracker paused: ", f"resumes in {fmt.until(s.tracker_paused_until, now)}"))
    if not parts:
        return None
    for i, (label, value) in enumerate(parts):
        if i:
            text.append("\n")
        text.append(label, style=tones.error + tones.bold if "✗" in label else tones.warning)
        text.append(value)
    return text
