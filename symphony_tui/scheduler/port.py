"""What a front end (console, HTTP API, headless runner) may do with a scheduler.

Front ends read immutable snapshots and events and send commands; they never touch
scheduler objects (docs/architecture.md "Who owns which state"). The console polls at a steady rate
(``snapshot()`` + ``events_since(last_seq)``), which coalesces floods by construction.

The ports are the in-process scheduler (``orchestrator.Orchestrator``), an attached
scheduler's (``api/client.py`` ``RemotePort``, followed across restarts by
``api/follow.py`` ``FollowingPort``) and the console's placeholder while the
scheduler is built (``console/starting.py`` ``StartingPort``). Each subclasses
:class:`SchedulerPort`, whose members with a body are the defaults of a port that does
not have that side (no link, no settings, no control API to serve).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the console imports this before its first frame
    from symphony_tui.config.settings import Settings
    from symphony_tui.domain import AgentEvent, Snapshot
    from symphony_tui.domain.audit import AuditEntry
    from symphony_tui.domain.commands import Command
    from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
    from symphony_tui.scheduler.posture import ControlSurface


@dataclass(frozen=True)
class CommandResult:
    """Outcome of a command: ``ok`` and a one-line ``message`` for the operator; ``issue``:
    the identifier (``ABC-12``) of the issue it was about when the scheduler knew it (an
    approval's owner too), for the audit log; not part of equality."""

    ok: bool
    message: str = ""
    issue: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TranscriptGap:
    """What an issue's transcript no longer holds: ``events`` and ``bytes`` dropped from
    its oldest end under the scheduler's memory budget (``scheduler/history/transcripts.py``), and
    the ``event_file`` (a path, or ``None`` when events are not written) that has them all.
    ``events == 0`` when nothing was dropped or the port cannot tell."""

    events: int = 0
    bytes: int = 0
    event_file: str | None = None


class Link(Protocol):
    """How current an attached console's data is (``api/client.py`` ``LinkStatus``):
    ``state`` (``connecting``, ``live``, ``reconnecting``, ``stale``, ``stopped``),
    ``age_s`` since the scheduler was last heard from, ``via`` (``stream`` or ``poll``), the
    last ``error`` (one line), and when it ``stopped_at``."""

    @property
    def state(self) -> str: ...

    @property
    def age_s(self) -> float | None: ...

    @property
    def via(self) -> str: ...

    @property
    def error(self) -> str | None: ...

    @property
    def stopped_at(self) -> datetime | None: ...


class SchedulerPort(Protocol):
    #: True while the scheduler is still being built (``StartingPort``): nothing is shown
    #: and every command is refused.
    starting: bool = False
    #: True when quitting the console leaves the scheduler running (an attached console:
    #: ``q`` detaches, unless it sends the stop command).
    detach_only: bool = False
    #: True when a detach-only port can still carry the ``stop_scheduler`` command to its
    #: scheduler and wait for its end (:meth:`wait_stopped`): ``q`` offers stop or detach.
    carries_stop: bool = False

    @property
    def stopped(self) -> bool:
        """True once the scheduler has shut down."""
        return False

    @property
    def settings(self) -> Settings | None:
        """The workflow's live settings, for a scheduler in this process; else None."""
        return None

    def link(self) -> Link | None:
        """The link to an attached scheduler now; None in process (nothing to lose)."""
        return None

    async def wait_stopped(self) -> bool:
        """After a stop command: wait until the scheduler has stopped. True when its end
        is known (its process gone); False when that cannot be told from here."""
        return False

    def serve_controls(self, surface: ControlSurface | None) -> None:
        """The control API now served for this scheduler (None: none); its runs'
        postures say so (``scheduler/posture.py``). Nothing for a port that runs none."""
        return None

    def snapshot(self) -> Snapshot:
        """The latest published snapshot (cheap; no copying)."""
        ...

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        """Events with ``event.seq > seq``, oldest first, from the bounded ring buffer;
        filtered to one issue when ``issue_id`` is given."""
        ...

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        """What :meth:`events_since` for ``issue_id`` can no longer return (the oldest
        entries dropped under the memory budget), and where the full history is."""
        ...

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        """Apply an operator command (Refresh, Interrupt, Stop, Approve, Deny, Answer,
        Rerun, PauseDispatch, MoveIssue) and report what happened; the audit log names
        ``who`` (``user@host``, default the scheduler's user) and ``via``."""
        ...

    async def diff(self, issue: str) -> WorkspaceDiff:
        """The changed files of ``issue``'s workspace (id or identifier; its live run's,
        else its recovered workspace) against its base, computed by the scheduler
        (``workspaces/diff.py``); ``error`` says why when there is none."""
        ...

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        """Lines ``offset`` .. ``offset + limit`` of one changed file's diff."""
        ...

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        """The newest ``limit`` operator actions of the audit log, oldest first."""
        ...

    async def note_action(self, what: str, **fields: object) -> AuditEntry | None:
        """Audit an operator action the console did itself (shell, editor, export, copy):
        ``issue``, ``detail``, ``ok``, ``message`` as in ``AuditLog.record``."""
        ...
