"""An attached console's port that follows its scheduler across restarts.

A console attached by what names the scheduler (its workflow on this machine, which
``symphony-tui WORKFLOW.md`` does when the project's scheduler already runs, or an ssh host
whose schedulers ``attach ssh://`` discovers) finds it again when it is started again, on
another port: :class:`FollowingPort` wraps one :class:`~symphony_tui.api.client.RemotePort`
at a time and, once that one's scheduler has stopped, asks its ``find`` (the discovery the
attach used, :mod:`symphony_tui.api.discovery`) every ``every_s`` until another process
serves, then moves to it. Over ssh, where no process is watched, it also asks while the
link is lost: a scheduler killed there leaves a forward that reaches nothing. A console
attached by a fixed ``http(s)://`` address watches that address (``watching``): a new
process answering there is followed the same way; its link's ``hint`` also says how to
attach again to one started on another port.

Events keep one order across a move. The event log's (``events_since`` without an issue)
are kept here, not in the current port: every event taken from each scheduler in turn,
numbered in the order taken, the newest :data:`~symphony_tui.api.client.RING`, so what the
console showed before a restart is still there (read again from the start, exported)
after it. An issue's transcript is what the schedulers before held of it when the console
left them, then the current one's (a restarted scheduler's starts empty), numbered after
the highest ``seq`` the console was handed by the ones before
(:class:`~symphony_tui.api.transcripts.KeptTranscripts`). So a reader's position
(``events_since(last_seq)``, per issue too) carries on; the new scheduler's history up to
the last event the console took from the one before is not taken again (``RemotePort``'s
``taken``), so nothing is shown twice. What a scheduler killed with ``kill -9`` did after
its last frame is lost with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shlex
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from symphony_tui.api.attach import AttachError, Attachment
from symphony_tui.api.auth import is_loopback
from symphony_tui.api.client import RING, LinkStatus, RemoteError, RemotePort
from symphony_tui.api.transcripts import KeptTranscripts
from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap

if TYPE_CHECKING:
    from symphony_tui.domain import AgentEvent, Snapshot
    from symphony_tui.domain.audit import AuditEntry
    from symphony_tui.domain.commands import Command
    from symphony_tui.domain.diff import DiffPage, WorkspaceDiff

T = TypeVar("T")

#: Seconds between two looks for a stopped scheduler on this machine.
FIND_EVERY_S = 1.0
#: Seconds between two looks over ssh (one ``ssh`` run each).
FIND_SSH_EVERY_S = 5.0
#: Seconds the header says the console moved to a restarted scheduler.
MOVED_SHOW_S = 60.0

#: ``find(current)``: the scheduler found again when another process or address serves it
#: than ``current``'s (a probed-ready :class:`Attachment`, its forward open), None when
#: ``current``'s still does or the look failed; raises :class:`AttachError` (one line)
#: when none runs there. Blocking.
Finder = Callable[[Attachment], "Attachment | None"]


class FollowingPort(SchedulerPort):
    """The port (module doc). ``attachment``: the scheduler attached first; ``find``:
    how to find it again (None: not followed); ``watching``: the fixed address ``find``
    watches (None: ``find`` follows the scheduler wherever it starts); ``again``: the
    command that attaches again to a fixed address's scheduler started again elsewhere
    (default: ``symphony-tui WORKFLOW.md`` with its workflow, or ``attach ssh://HOST`` for
    another machine's); ``watch_lost``: also look while the link is lost (ssh, where no
    process is watched)."""

    detach_only = True
    carries_stop = True

    def __init__(
        self,
        attachment: Attachment,
        find: Finder | None = None,
        *,
        watching: str | None = None,
        again: str | None = None,
        every_s: float = FIND_EVERY_S,
        watch_lost: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attachment = attachment
        self.find = find
        self.watching = watching
        self.again = again
        self.every_s = every_s
        self.watch_lost = watch_lost
        self._clock = clock
        #: The event log: every scheduler's events in the order taken, numbered here.
        self._ring: deque[AgentEvent] = deque(maxlen=RING)
        self._seq = 0
        self.port: RemotePort = attachment.port(on_events=self._take, ring=0)
        #: Each issue's transcript from the schedulers before, read before the current one's.
        self._transcripts = KeptTranscripts()
        self.moves = 0
        self._moved: tuple[str, float] | None = None  # (what, when) of the last move
        self._stop = asyncio.Event()

    # -- following ------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow the scheduler until :meth:`close`: its port's own run, and, once it
        stopped (or, with ``watch_lost``, while its link is lost), look for it again."""
        while not self._stop.is_set():
            port = self.port
            running = asyncio.create_task(port.run())
            try:
                while not running.done():
                    await asyncio.wait({running}, timeout=self.every_s)
                    if self._stop.is_set():
                        return
                    if not running.done() and self._lost():
                        await self._look(lost=True)
                        if self.port is not port:
                            break
                if self.find is None and self.port is port:
                    return  # stopped, at a fixed address
                while self.port is port and not self._stop.is_set():
                    await self._look(lost=False)
                    if self.port is port:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._stop.wait(), timeout=self.every_s)
            finally:
                if not running.done():
                    running.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await running

    def _lost(self) -> bool:
        """Whether to look for the scheduler while its port still runs: with
        ``watch_lost``, once its link is lost."""
        lost = self.port.link().state in ("reconnecting", "stale")
        return self.watch_lost and self.find is not None and lost

    async def _look(self, *, lost: bool) -> None:
        """Ask ``find`` once; move to what it found. While the link is only lost, a
        discovery that finds nothing running there means its scheduler stopped."""
        assert self.find is not None
        current = self.attachment
        try:
            found = await in_thread(self.find, current, undo=_close_found)
        except AttachError as exc:
            if lost:
                self.port.note_stopped(str(exc))
            return
        except Exception:  # a look that failed says nothing about the scheduler
            return
        if found is None or self._stop.is_set():
            if found is not None:
                found.close()
            return
        await self._move(found)

    async def _move(self, found: Attachment) -> None:
        """Follow ``found`` from now on: its port first fetches the state and events once
        (so the console shows it at once), then streams."""
        held: list[AgentEvent] = []  # taken into the log only once the port is followed
        port = found.port(on_events=held.extend, ring=0)
        port.taken_before = self.port.taken()
        try:
            await port.refresh_once()
        except RemoteError:
            await port.close()
            await in_thread(found.close)
            return
        old, old_attachment = self.port, self.attachment
        old.on_events = None  # the new process's history has what the old one said since
        self._transcripts.leave(old)
        self.port, self.attachment = port, found
        port.on_events = self._take
        self._take(held)
        self.moves += 1
        self._moved = (f"re-attached: {found}", self._clock())
        await old.close()
        await in_thread(old_attachment.close)

    async def close(self) -> None:
        """Stop following; close the current port and the forwards this port opened."""
        self._stop.set()
        await self.port.close()
        if self.moves:
            await in_thread(self.attachment.close)

    # -- SchedulerPort --------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self.port.stopped

    def link(self) -> LinkStatus:
        link = self.port.link()
        moved = None
        if self._moved is not None and self._clock() - self._moved[1] < MOVED_SHOW_S:
            moved = self._moved[0]
        hint = None
        if link.state == "stopped":
            hint = self._hint()
        if moved is None and hint is None:
            return link
        return dataclasses.replace(link, moved=moved, hint=hint)

    def _hint(self) -> str:
        """What comes after a stop, one line: this console watches for its scheduler (at
        its fixed address: which, and how to attach to it started on another port), or
        the command that attaches to it again."""
        if self.find is not None and self.watching is None:
            return "watching for it to start again"
        again = self._again()
        if self.watching is not None:
            return f"watching {self.watching} for it to start there again; elsewhere, {again}"
        return again

    def _again(self) -> str:
        """How to attach again to this scheduler started on another port, one line."""
        again = self.again
        host = urlsplit(self.attachment.url).hostname or ""
        workflow = self.attachment.workflow or self.port.snapshot().workflow_path
        if again is None and not is_loopback(host):
            again = f"symphony-tui attach ssh://{host}"
        elif again is None and workflow:
            again = f"symphony-tui {shlex.quote(workflow)}"
        if again is None:
            return "attach again at its new address (symphony-tui ps lists it)"
        return f"attach again: {again}"

    def snapshot(self) -> Snapshot:
        """The scheduler's snapshot; of one gone without saying it was stopping, the last
        it sent, its runs kept (the link says they are unknown: its agents may still run)
        and no approvals (nothing is there to answer them)."""
        if self.port.gone:
            return self.port.last_said().model_copy(update={"approvals": (), "next_poll_at": None})
        return self.port.snapshot()

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        if issue_id is None:
            newer: list[AgentEvent] = []
            for event in reversed(self._ring):
                if event.seq <= seq or len(newer) >= limit:
                    break
                newer.append(event)
            newer.reverse()
            return newer
        return self._transcripts.since(self.port, issue_id, seq, limit=limit)

    def _take(self, events: list[AgentEvent]) -> None:
        """Keep the current port's ``events`` (new ones, in its order) in the log, each
        with the next number."""
        for event in events:
            self._seq += 1
            self._ring.append(event.model_copy(update={"seq": self._seq}))

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        return self.port.transcript_gap(issue_id)

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        return await self.port.send(command, who=who, via=via)

    async def wait_stopped(self) -> bool:
        return await self.port.wait_stopped()

    async def diff(self, issue: str) -> WorkspaceDiff:
        return await self.port.diff(issue)

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        return await self.port.diff_file(issue, path, offset=offset, limit=limit)

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        return await self.port.audit_entries(limit)

    async def note_action(self, what: str, **fields: object) -> AuditEntry | None:
        return await self.port.note_action(what, **fields)


def _close_found(found: Attachment | None) -> None:
    if found is not None:
        found.close()


async def in_thread(
    fn: Callable[..., T],
    *args: object,
    undo: Callable[[T], object] | None = None,
    name: str = "attach",
) -> T:
    """``fn(*args)`` in a daemon thread of its own, named ``name`` (an ``ssh`` that hangs
    never holds up the console's exit). ``undo(result)`` runs there when the caller was
    cancelled meanwhile (a forward opened for nobody is closed)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting task
            error = exc
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(settle, lambda: future.set_exception(error))
            return
        if future.cancelled() and undo is not None:
            undo(result)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, lambda: future.set_result(result))

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
