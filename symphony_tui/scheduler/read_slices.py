"""Slices of loop time for the sessions' readers, so that a turn of the event loop stays
short however many agents flood, and control is never starved.

Every reader awaits ``Inbox.room`` between batches of lines, and each waiting reader runs
one batch per turn of the event loop. With 200 flooding sessions a turn is then 200
batches long, and an operator's HTTP request, which needs several turns (accept, read,
answer), waits behind each of them. :class:`ReadSlices` caps the reader work of a *slice*
of loop time (CPU time of the loop's thread) at :data:`SLICE_S`: a reader that asks for more once the slice is spent is
parked in a queue (arrival order: the longest-parked goes first); one callback per turn
opens the next slice and lets the parked readers go, as many as fitted in the last
slice, by what a batch cost in the last one. The rest of the turn (operator commands, the API, timers, the scheduling loop
itself) runs in between. Readers still use every spare cycle: when nothing else is
queued a turn is microseconds long and the next slice opens at once.

The turn's other work counts against the readers (their cost per batch is the turn's
time over its batches). Counting the readers' own time alone measures better at 200
flooding workers and worse at 50 (``bench_flood --before``, one run each): at 200 it takes
in 32,300 events/s at 21.2 us per event against 26,400 at 24.0 us, interrupt p99 138
against 227 ms, but at 50 workers 29,400 at 17.0 us against 44,200 at 13.3 us, approval
visible p99 275 against 168 ms (unexplained; fewer parked readers, so fewer joined deltas,
is a guess).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

#: Reader work (seconds of wall time) one slice of the loop takes in before readers park.
SLICE_S = 0.004


class ReadSlices:
    """Hands out slices of loop time to readers (:meth:`take`). ``clock``: seconds of this
    thread's CPU time (time spent waiting for a core does not use up a slice; tests pass
    their own). Only the event loop's thread uses it."""

    def __init__(self, slice_s: float = SLICE_S, clock: Callable[[], float] = time.thread_time):
        self._slice_s = slice_s
        self._clock = clock
        self._opened = clock()
        self._batches = 0  # batches since the slice opened
        self._parked: deque[asyncio.Future[None]] = deque()
        self._parked_by: dict[object, asyncio.Future[None]] = {}  # take's key -> its future
        self._opening = False  # a callback to open the next slice is scheduled
        #: Readers parked so far, and let go early by :meth:`hurry` (for the benches).
        self.parks = 0
        self.hurried = 0

    async def take(self, key: object = None) -> None:
        """Between two batches of a reader: yield once while the slice has time left,
        else wait (in arrival order) until a later slice lets this reader go, or until
        :meth:`hurry` is called with the same ``key`` (a reader's host; None: no key)."""
        self._batches += 1
        if not self._parked and self._clock() - self._opened < self._slice_s:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        parked: asyncio.Future[None] = loop.create_future()
        self._parked.append(parked)
        self.parks += 1
        self._open_soon(loop)
        if key is None:
            await parked  # a cancelled reader's future is skipped when its turn comes
            return
        self._parked_by[key] = parked
        try:
            await parked
        finally:
            if self._parked_by.get(key) is parked:
                del self._parked_by[key]

    def hurry(self, key: object) -> None:
        """Let the reader parked with ``key`` go now, before those parked earlier: it holds
        a request of its agent (an approval, a question) behind what it reads, so
        control is never starved. Nothing when that reader is not parked. It still counts
        in the slice it runs in."""
        parked = self._parked_by.pop(key, None)
        if parked is not None and not parked.done():
            parked.set_result(None)
            self.hurried += 1

    @property
    def pressed(self) -> bool:
        """True while readers wait for a slice: the loop is short of time for their
        lines, so sessions that can join their streamed deltas should (``Inbox.busy``)."""
        return bool(self._parked)

    def _open_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._opening:
            self._opening = True
            loop.call_soon(self._open)

    def _open(self) -> None:
        """A new turn: open the next slice and let go as many parked readers as the last
        one's cost per batch says fit in a slice (at least one)."""
        self._opening = False
        while self._parked and self._parked[0].done():  # hurried or cancelled ones
            self._parked.popleft()
        now = self._clock()
        per_batch = (now - self._opened) / max(1, self._batches)  # the turn's other work too
        fit = int(self._slice_s / per_batch) if per_batch > 0 else len(self._parked)
        self._opened = now
        self._batches = 0
        let_go = 0
        while self._parked and let_go < max(1, fit):
            parked = self._parked.popleft()
            if not parked.done():
                parked.set_result(None)
                let_go += 1
        if self._parked:
            self._open_soon(asyncio.get_running_loop())
