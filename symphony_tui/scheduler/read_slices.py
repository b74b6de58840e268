"""Slices of loop time for the sessions' readers, so that a turn of the event loop stays
short however many agents flood (issue 11, "control never starves").

Every reader awaits ``Inbox.room`` between batches of lines, and each waiting reader runs
one batch per turn of the event loop. With 200 flooding sessions a turn is then 200
batches long, and an operator's HTTP request, which needs several turns (accept, read,
answer), waits behind each of them. :class:`ReadSlices` caps the readers' own work in a
*slice* (CPU time of the loop's thread, from a reader's resuming to its next
:meth:`~ReadSlices.take`) at :data:`SLICE_S`: a reader that asks for more once the slice
is spent is parked in a queue (arrival order: the longest-parked goes first); one
callback per turn opens the next slice and lets the parked readers go, as many as the
readers' own cost per batch in the last slice says fit in one. The rest of the turn
(operator commands, the API, timers, the scheduling loop handling what the readers
posted) runs in between. Readers still use every spare cycle: when nothing else is
queued a turn is microseconds long and the next slice opens at once.

Only the readers' time counts: counting the whole turn's (the scheduling loop's handling
of the readers' events, the API) let one or two readers go per turn once the loop was
busy, so a turn held a couple of batches beside its fixed costs, and each sliced line
cost the scheduler more CPU. At 200 flooding workers (alternating windows of one
scheduler process, load average 70-120): the whole turn's time, 4 ms slices, 27,600
events/s at 19.4 us per event; the readers' time alone, 4 ms: 32,400 at 17.9 us,
``GET /api/v1/state`` p50 / p99 56 / 150 ms; 2 ms: 32,300 at 17.5 us, 36 / 127 ms (no
slices at all, in an earlier such run: 14-16 us, p99 400 ms and more).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

#: Readers' own work (seconds of the loop thread's CPU time) one slice takes in before
#: readers park.
SLICE_S = 0.002


class ReadSlices:
    """Hands out slices of loop time to readers (:meth:`take`). ``clock``: seconds of this
    thread's CPU time (time spent waiting for a core does not use up a slice; tests pass
    their own). Only the event loop's thread uses it."""

    def __init__(self, slice_s: float = SLICE_S, clock: Callable[[], float] = time.thread_time):
        self._slice_s = slice_s
        self._clock = clock
        self._spent = 0.0  # readers' own time in this slice
        self._mark = clock()  # when the running reader resumed (out of take)
        self._batches = 0  # batches since the slice opened
        self._parked: deque[asyncio.Future[None]] = deque()
        self._opening = False  # a callback to open the next slice is scheduled
        #: Readers parked so far (for the benches).
        self.parks = 0

    async def take(self) -> None:
        """Between two batches of a reader: yield once while the slice has time left,
        else wait (in arrival order) until a later slice lets this reader go. The time
        from this reader's last return from here to now is its batch's cost (a reader that
        waited for its pipe inside the batch counts what ran meanwhile too: its slice only
        gets shorter)."""
        clock = self._clock
        self._spent += clock() - self._mark
        self._batches += 1
        if not self._parked and self._spent < self._slice_s:
            await asyncio.sleep(0)
            self._mark = clock()
            return
        loop = asyncio.get_running_loop()
        parked: asyncio.Future[None] = loop.create_future()
        self._parked.append(parked)
        self.parks += 1
        self._open_soon(loop)
        await parked  # a cancelled reader's future is skipped when its turn comes
        self._mark = clock()

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
        one's cost per batch (the readers' own time) says fit in a slice (at least one)."""
        self._opening = False
        per_batch = self._spent / max(1, self._batches)
        fit = int(self._slice_s / per_batch) if per_batch > 0 else len(self._parked)
        self._spent = 0.0
        self._batches = 0
        let_go = 0
        while self._parked and let_go < max(1, fit):
            parked = self._parked.popleft()
            if not parked.done():
                parked.set_result(None)
                let_go += 1
        if self._parked:
            self._open_soon(asyncio.get_running_loop())
