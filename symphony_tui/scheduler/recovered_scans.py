"""Scans of the workspaces earlier runs left (shown as recovered; spec §9).

A scan reads every workspace's manifests (``WorkspaceManager.recover``, which first waits
for queued manifest writes). The loop asks for one now (:meth:`RecoveredScans.now`: start-up
and operator commands) or marks the list stale when runs end (:meth:`mark_stale`); a stale
list is rescanned once, in a thread, for all the runs that ended together
(:meth:`rescan_if_stale`), and its result comes back as a ``Recovered`` input
(:meth:`apply`). A scan outdated by a newer one is dropped (``generation``). Worker
hosts are listed only while up (a down or not yet reached host would cost ssh's connect
timeout); one that comes up asks for a rescan.
"""

from __future__ import annotations

import asyncio

from symphony_tui.scheduler.inbox import Recovered
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.workspaces.manager import WorkspaceManager


class RecoveredScans:
    """The background scan is a task of ``mailbox`` and posts its ``Recovered`` result
    there. Only the loop calls these methods."""

    def __init__(
        self,
        state: SchedulerState,
        workspaces: WorkspaceManager,
        mailbox: Mailbox,
    ) -> None:
        self._state = state
        self._workspaces = workspaces
        self._mailbox = mailbox
        self._stale = False
        self._generation = 0
        #: The background scan under way, or None.
        self.task: asyncio.Task | None = None

    def _hosts(self) -> list[str]:
        hosts = self._state.hosts
        return [h.name for h in hosts.hosts() if h.up and h.reached] if hosts.enabled else []

    def now(self) -> None:
        """Rescan now, in the caller; a background scan still running is then outdated."""
        self._generation += 1
        try:
            self._state.set_recovered(tuple(self._workspaces.recover(self._hosts())))
        except Exception as exc:
            self._state.log("warning", "workspace recovery scan failed", error=str(exc))

    def mark_stale(self) -> None:
        """A run ended: its workspace's manifests changed."""
        self._stale = True

    def rescan_if_stale(self) -> None:
        """Start one background scan when the list is stale and none is running."""
        if not self._stale or self.task is not None:
            return
        self._stale = False
        generation = self._generation
        hosts = self._hosts()

        async def scan() -> None:
            try:
                found = tuple(await asyncio.to_thread(self._workspaces.recover, hosts))
            except Exception as exc:
                self._state.log("warning", "workspace recovery scan failed", error=str(exc))
                found = None
            self._mailbox.post(Recovered(found, generation))

        self.task = self._mailbox.spawn(scan(), name="recovered-scan")

    def apply(self, found: tuple | None, generation: int) -> None:
        """A background scan's result (None: it failed), unless a newer scan outdated it."""
        self.task = None
        if found is not None and generation == self._generation:
            self._state.set_recovered(found)
