"""What the console knows of its scheduler, shared by the app and its helpers.

One :class:`ConsoleState` per console: the port it reads and commands (a
:class:`~symphony_tui.console.starting.StartingPort` until the scheduler is built, then
the built one), the last snapshot read, whether the scheduler runs elsewhere and whether
the console is leaving. The app's refresh writes ``snapshot``; ``console/lifecycle.py``
writes the rest; everything else reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.domain import RunningRow, Snapshot
    from symphony_tui.scheduler.port import SchedulerPort


class ConsoleState:
    """``port``: the scheduler's port; ``snapshot``: the one shown last (``None`` before
    the first tick); ``detach_only``: the scheduler runs elsewhere (``symphony-tui
    attach``), quitting detaches; ``stopping``: a quit or detach began, so no key but quit
    runs an action and nothing is repainted; ``notify``: what decides the console's bells
    and desktop alerts (``console.starting.notify_of``)."""

    def __init__(
        self,
        port: SchedulerPort,
        *,
        detach_only: bool,
        notify: Callable[[], NotifySettings],
    ) -> None:
        self.port = port
        self.snapshot: Snapshot | None = None
        self.detach_only = detach_only
        self.stopping = False
        self.notify = notify

    @property
    def starting(self) -> bool:
        """True until the scheduler is built (``console.starting``)."""
        return self.port.starting

    def ident(self, issue_id: str) -> str:
        """The identifier of ``issue_id`` (``DEMO-3``) when the snapshot knows it."""
        if self.snapshot is not None:
            for r in self.snapshot.running:
                if r.issue_id == issue_id:
                    return r.issue_identifier
            for i in self.snapshot.issues:
                if i.issue_id == issue_id:
                    return i.identifier
        return issue_id

    def running_ids(self) -> set[str]:
        return {r.issue_id for r in self.snapshot.running} if self.snapshot else set()

    def running_row(self, issue_id: str | None) -> RunningRow | None:
        rows = self.snapshot.running if self.snapshot else ()
        return next((r for r in rows if r.issue_id == issue_id), None)

    def workspace_of(self, issue_id: str | None) -> tuple[str, str | None, str, str | None] | None:
        """``(issue_id, identifier, path, worker host)`` of the issue's workspace (its live
        run's, else a recovered one); the host is ``None`` for this machine."""
        if issue_id is None or self.snapshot is None:
            return None
        from symphony_tui.scheduler.workspace_view import locate  # after the first snapshot

        found = locate(self.snapshot, issue_id)
        return (found[0], found[1], found[2], found[4]) if found else None

    def session_of(self, issue_id: str) -> str | None:
        """The thread / session id of the issue's run or recovered workspace."""
        snap = self.snapshot
        if snap is None:
            return None
        for row in snap.running:
            if row.issue_id == issue_id:
                return row.thread_id or row.session_id
        for ws in snap.recovered:
            if ws.issue_id == issue_id:
                return ws.thread_id or ws.conversation_id or ws.session_id
        return None
