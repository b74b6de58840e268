"""The console before its scheduler exists, so launch to the first painted frame is short.

``symphony-tui`` paints the console's first frame (its layout, ``◌ starting the
scheduler…`` on the status line) before it loads the workflow and builds the scheduler:
that build (config, WORKFLOW.md, the Liquid prompt check, trackers, backends, the HTTP
API) costs more than the console itself, so it runs afterwards, off the event loop
(``SymphonyApp(start=...)``, docs/architecture.md "Start-up"). Until it is done the console
holds a :class:`StartingPort`: there is nothing to show yet, and every command is refused
with :data:`STARTING_MESSAGE` (nothing is queued: the operator sees the refusal and can
press the key again once the panes fill in). A build that fails raises
:class:`StartFailed`, whose one-line message the CLI prints on exit, the same line as a
failure before the console starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.domain import AgentEvent, Snapshot
    from symphony_tui.domain.audit import AuditEntry
    from symphony_tui.domain.commands import Command
    from symphony_tui.domain.diff import DiffPage, WorkspaceDiff

STARTING_MESSAGE = "the scheduler is still starting; try again in a moment"
STARTING_STATUS = "◌ starting the scheduler…"
#: The title of the message that says which scheduler an attached console is attached to
#: (``Started.messages``); a re-attach's toast replaces it.
ATTACHED = "attached"


class StartFailed(Exception):
    """The scheduler could not be built. ``str(exc)`` is the one-line reason (without the
    ``symphony-tui:`` prefix) the CLI prints on stderr after the console closed, exit 1."""


class NotStarted(RuntimeError):
    """Raised by :meth:`StartingPort.snapshot`: there is no snapshot before the scheduler
    is built (the console's refresh skips its tick while ``port.starting``)."""


@dataclass(frozen=True)
class Started:
    """What a finished start hands the console: the ``port`` to read and command, the
    scheduler's main coroutine (``runner``, run in the worker group ``scheduler``), the
    ``shutdown`` awaited once before exit, ``notices`` shown once as warnings (the
    workflow's unread settings), ``messages`` shown once as information (a generated API
    token) and, for an in-process scheduler, its live ``notify`` settings."""

    port: SchedulerPort
    runner: Callable[[], Awaitable[None]] | None = None
    shutdown: Callable[[], Awaitable[None]] | None = None
    notices: Sequence[str] = ()
    messages: Sequence[tuple[str, str]] = ()  # (title, text)
    notify: Callable[[], NotifySettings] | None = None


def notify_of(port: SchedulerPort) -> Callable[[], NotifySettings]:
    """What decides the console's bells and desktop alerts: in process, the workflow's live
    ``notify`` settings (``port.settings``); attached or still starting, the defaults. The
    settings module is imported on the first call (after the first frame)."""

    def provider() -> NotifySettings:
        from symphony_tui.config.settings import NotifySettings, Settings

        live = port.settings
        return live.notify if isinstance(live, Settings) else NotifySettings()

    return provider


class StartingPort(SchedulerPort):
    """The console's port until the scheduler is built: no snapshot, no events, and every
    command, diff or audit read refused with :data:`STARTING_MESSAGE`."""

    starting = True
    detach_only = False

    def snapshot(self) -> Snapshot:
        raise NotStarted(STARTING_MESSAGE)

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        return []

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        return TranscriptGap()

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        return CommandResult(False, STARTING_MESSAGE)

    async def diff(self, issue: str) -> WorkspaceDiff:
        from symphony_tui.domain.diff import WorkspaceDiff

        return WorkspaceDiff(issue_identifier=issue, error=STARTING_MESSAGE)

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        raise NotStarted(STARTING_MESSAGE)

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        return []

    async def note_action(self, what: str, **fields: object) -> AuditEntry | None:
        return None
