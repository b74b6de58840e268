"""Pure formatting of snapshot values for display (no Textual; rich ``Text`` only).

Every function that shows agent or tracker text goes through
:mod:`symphony_tui.console.sanitize`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text

from symphony_tui.console.fleet import fit_name
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.domain import ClaimState, EventKind, RunStatus
from symphony_tui.domain.kinds import WAITING_FOR_MEMORY

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import AgentEvent, IssueRow, Snapshot

# glyph + word for every claim state, so colour is never the only signal
CLAIM_LABELS: dict[str, tuple[str, str, str]] = {
    "running": ("●", "running", "success"),
    "retry": ("↻", "retry", "warning"),
    "blocked": ("⧗", "blocked", "warning"),
    "done": ("✓", "done", "primary"),
    "released": ("◌", "held", "muted"),  # interrupted or stopped: held until rerun
    "memory": ("⧖", "memory", "warning"),  # no machine with memory to spare takes it
    "idle": ("○", "idle", "muted"),
}

STATUS_LABELS: dict[RunStatus, tuple[str, str, str]] = {
    RunStatus.PREPARING_WORKSPACE: ("◔", "preparing", "muted"),
    RunStatus.BUILDING_PROMPT: ("◔", "prompting", "muted"),
    RunStatus.LAUNCHING_AGENT: ("◑", "launching", "muted"),
    RunStatus.INITIALIZING_SESSION: ("◑", "starting", "muted"),
    RunStatus.STREAMING_TURN: ("●", "working", "success"),
    RunStatus.WAITING_FOR_OPERATOR: ("!", "waiting", "warning"),
    RunStatus.RETRYING_MODEL: ("⚠", "no model", "warning"),
    RunStatus.FINISHING: ("◕", "finishing", "primary"),
    RunStatus.SUCCEEDED: ("✓", "succeeded", "success"),
    RunStatus.FAILED: ("✗", "failed", "error"),
    RunStatus.TIMED_OUT: ("✗", "timed out", "error"),
    RunStatus.STALLED: ("✗", "stalled", "error"),
    RunStatus.CANCELED_BY_RECONCILIATION: ("◌", "reconciled", "muted"),
    RunStatus.INTERRUPTED: ("■", "interrupted", "warning"),
    RunStatus.STOPPED: ("■", "stopped", "warning"),
}

#: A run held by a token budget (``RunningRow.budget_reached``), in place of its status.
BUDGET_LABEL: tuple[str, str, str] = ("$", "budget", "error")

EVENT_TONES: dict[EventKind, str] = {
    EventKind.ERROR: "error",
    EventKind.TURN_FAILED: "error",
    EventKind.MALFORMED: "error",
    EventKind.WARNING: "warning",
    EventKind.APPROVAL_REQUESTED: "warning",
    EventKind.TURN_CANCELLED: "warning",
    EventKind.RETRY_SCHEDULED: "warning",
    EventKind.TURN_COMPLETED: "success",
    EventKind.APPROVAL_RESOLVED: "success",
    EventKind.DISPATCH: "primary",
    EventKind.OPERATOR: "accent",
    EventKind.FEEDBACK: "accent",
}


# short names keep the log's message column wide on 80-column terminals
KIND_SHORT: dict[EventKind, str] = {
    EventKind.SESSION_STARTED: "session",
    EventKind.TURN_STARTED: "turn",
    EventKind.TURN_COMPLETED: "turn done",
    EventKind.TURN_FAILED: "turn fail",
    EventKind.TURN_CANCELLED: "turn stop",
    EventKind.MESSAGE_DELTA: "delta",
    EventKind.COMMAND_STARTED: "cmd",
    EventKind.COMMAND_OUTPUT: "output",
    EventKind.COMMAND_COMPLETED: "cmd done",
    EventKind.FILE_CHANGE: "file",
    EventKind.TOOL_CALL: "tool",
    EventKind.APPROVAL_REQUESTED: "approval?",
    EventKind.APPROVAL_RESOLVED: "approval",
    EventKind.TOKEN_USAGE: "tokens",
    EventKind.RATE_LIMITS: "limits",
    EventKind.NOTIFICATION: "note",
    EventKind.RETRY_SCHEDULED: "retry",
    EventKind.RUN_ENDED: "run ended",
}
KIND_WIDTH = 9


def kind_name(kind: EventKind) -> str:
    return KIND_SHORT.get(kind, kind.value)[:KIND_WIDTH]


def claim_key(row: IssueRow, completed: frozenset[str]) -> str:
    """Which :data:`CLAIM_LABELS` entry describes ``row``. ``completed`` holds
    identifiers (``Snapshot.completed``); a fleet's carry their project
    (``api/DEMO-1``, ``fleet.merge``)."""
    if row.claim == ClaimState.RUNNING:
        return "running"
    if row.claim == ClaimState.RETRY_QUEUED:
        return "retry"
    if (
        row.issue_id in completed
        or row.identifier in completed
        or (row.project is not None and f"{row.project}/{row.identifier}" in completed)
    ):
        return "done"
    if row.blocked:
        return "blocked"
    if row.claim == ClaimState.RELEASED:
        return "released"
    if row.note.startswith(WAITING_FOR_MEMORY):
        return "memory"
    return "idle"


def done_count(snapshot: Snapshot) -> int:
    """How many of ``snapshot.completed`` are done now: an identifier whose issue runs or
    waits to retry again (a rerun, or back in an active state) is not counted. A fleet's
    identifiers carry their project (``api/DEMO-1``), as its rows' ``project`` says."""
    busy: set[str] = set()
    for row in (*snapshot.running, *snapshot.retrying):
        ident = row.issue_identifier
        busy.add(ident if row.project is None else f"{row.project}/{ident}")
    return sum(1 for ident in snapshot.completed if ident not in busy)


def labelled(entry: tuple[str, str, str], tones: Tones) -> Text:
    glyph, word, tone = entry
    return Text(f"{glyph} {word}", style=getattr(tones, tone), end="")


def priority(value: int | None) -> str:
    """Linear-style priority: 1 urgent .. 4 low; 0/None -> ``-``."""
    return {1: "urgent", 2: "high", 3: "medium", 4: "low"}.get(value or 0, "-")


def duration(seconds: float | None) -> str:
    """Compact duration: ``42s``, ``3m05s``, ``2h07m``, ``3d04h``; negative -> ``0s``."""
    if seconds is None:
        return "-"
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def age(since: datetime | None, now: datetime) -> str:
    return "-" if since is None else duration((now - since).total_seconds())


def until(when: datetime | None, now: datetime) -> str:
    """Time left before ``when``; ``due`` once it has passed."""
    if when is None:
        return "-"
    left = (when - now).total_seconds()
    return "due" if left <= 0 else duration(left)


def compact(n: int | float | None) -> str:
    """Token counts: ``950``, ``12.3k``, ``4.56M``."""
    if n is None:
        return "-"
    n = float(n)
    if abs(n) < 1000:
        return f"{n:.0f}"
    if abs(n) < 1_000_000:
        return f"{n / 1000:.1f}k"
    if abs(n) < 1_000_000_000:
        return f"{n / 1_000_000:.2f}M"
    return f"{n / 1_000_000_000:.2f}G"


def memory(n_bytes: int | None) -> str:
    """Resident memory in at most 4 cells: ``812M``, ``1.9G``, ``12G``; ``-`` unknown."""
    if n_bytes is None:
        return "-"
    mib = n_bytes / (1024 * 1024)
    if mib < 999.5:
        return f"{mib:.0f}M"
    gib = mib / 1024
    return f"{gib:.1f}G" if gib < 9.95 else f"{gib:.0f}G"


def grouped(n: int) -> str:
    return f"{n:,}"


def clock_time(at: datetime | None) -> str:
    """``HH:MM:SS`` in local time (the operator's wall clock); ``--:--:--`` if unknown."""
    if at is None:
        return "--:--:--"
    if at.tzinfo is not None:
        at = at.astimezone()
    return at.strftime("%H:%M:%S")


#: Cells of an event's project in a fleet console's log line.
PROJECT_LOG_CELLS = 7


def event_line(
    event: AgentEvent, tones: Tones, *, message_limit: int = 400, names: tuple[str, ...] = ()
) -> Text:
    """One log line: ``HH:MM:SS ISSUE kind message`` with inert message text; in a fleet
    console (the event names its project) ``HH:MM:SS PROJECT ISSUE kind message``."""
    # each column's space takes its column's style, so a drawn line is one styled run per
    # column (every run costs the terminal a full colour sequence)
    line = Text(end="")
    where = f"{clock_time(event.at)} "
    if event.project is not None:
        project = fit_name(event.project, PROJECT_LOG_CELLS, names)
        where += f"{project:<{PROJECT_LOG_CELLS}} "
    line.append(where, style=tones.muted)
    ident = one_line(event.issue_identifier or event.issue_id or "-", 8)
    line.append(f"{ident:<8} ", style=tones.bold)
    tone = EVENT_TONES.get(event.kind)
    kind = f"{kind_name(event.kind):<{KIND_WIDTH}} "
    line.append(kind, style=getattr(tones, tone) if tone else tones.muted)
    line.append_text(inert(event.message, limit=message_limit))
    return line


def event_matches(event: AgentEvent, words: tuple[str, ...]) -> bool:
    """Every word (lowercase) occurs in the project, issue, kind or message of ``event``."""
    if not words:
        return True
    hay = " ".join(
        (
            event.project or "",
            event.issue_identifier or "",
            event.issue_id or "",
            event.kind.value,
            kind_name(event.kind),
            one_line(event.message),
        )
    ).lower()
    return all(w in hay for w in words)
