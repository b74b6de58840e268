"""Each run's long-lived objects out of the full collections' reach, so no full GC pause
takes over 50 ms.

A full (generation 2) collection traverses every object the collector tracks outside the
permanent generation. Start-up's heap is frozen (:func:`gc.freeze`, ``cli.py``); what is
left are the runs: a codex run holds about 190 tracked objects for its whole life (its
tasks and their coroutines, contexts and handles, the subprocess transports and
protocols, the session, its RPC connection and reader state; measured with
``tests/bench/sched_host.py``'s heap dumps at 10 and 60 idle runs). At 200 workers that is
40,000 objects, and a full collection over them costs 37-41 ms of CPU (57-87 ms of wall
time on a shared 2-core machine), every time the flood's short-lived backlog is promoted
often enough to trigger one.

:class:`HeapFreezer` freezes the heap again shortly after sessions open (one freeze for a
burst of run starts, :data:`FREEZE_DELAY_S` after the first of them), after a collection
of the young generations, so their garbage is not frozen with it. A frozen object is
still freed by reference counting when its run ends; only a *cycle* of frozen objects
outlives it. An ended run leaves none: the run drops its worker, task and session
(``Run.release``), and the codex session breaks its own cycles when it closes
(``agents/codex``: the RPC connection's callbacks, asyncio's subprocess protocol and
stdin writer). What other cycles become garbage in the old generation before a freeze is
frozen with it, so the permanent generation is handed back (:func:`gc.unfreeze`),
collected once in full and frozen again when it has grown by :data:`RECLAIM_GROWTH`
times its size after the last reclaim (and by at least :data:`RECLAIM_MIN_OBJECTS`), at a
moment the inbox is not busy (or at twice that growth, busy or not). That collection
traverses everything, start-up's heap included (``gc.unfreeze`` moves the whole
permanent generation to the oldest one: there is no unfreezing only what came later), so
it is the one long pause; its cost is paid once per doubling of the frozen heap, as
CPython's own rule pays a full collection once the old generation grew by a quarter.
Runs that start only add their live objects, which the next reclaim finds alive and
counts in its new size.

It also freezes shortly after every full collection it did not run itself
(:meth:`HeapFreezer.watch`, a :data:`gc.callbacks` entry). The console shares the
scheduler's process, and its render caches (Textual's ``FIFOCache`` and ``Strip``,
Rich's ``Segment``: 50,000-80,000 live objects under a flood) are long-lived too, without
any session opening to freeze them: unfrozen, a console under a 40-agent flood runs a
full collection every ~6 s, growing to 185 ms of CPU. Right after a full collection no cyclic
garbage is left, so freezing then keeps nothing that should go, and the next full
collection traverses only what was promoted since.

Only the CLI's own processes use it: the scheduler's (``build_runtime(freeze_heap=True)``)
and an attached or fleet console's, which only watches (``cli._heap_watched``). It changes
the collector for the whole process, which a test process must not have.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

#: Seconds from the first session opened since the last freeze to the next freeze: the
#: runs started by one tick open their sessions together, and one freeze serves them all.
FREEZE_DELAY_S = 2.0
#: The permanent generation is collected once in full when it has grown by this many
#: times its size after the last reclaim (or the first freeze), and by at least
#: :data:`RECLAIM_MIN_OBJECTS` objects (see the module docstring).
RECLAIM_GROWTH = 1.0
RECLAIM_MIN_OBJECTS = 50_000


class HeapFreezer:
    """Freezes the collector's heap after sessions open (:meth:`session_opened`) and
    reclaims what was frozen in garbage cycles once the frozen heap has grown enough
    (checked at each freeze and :meth:`run_ended`). ``quiet()``: True while the scheduler
    has time for a long pause (its inbox is not busy); ``delay_s``: default
    :data:`FREEZE_DELAY_S`; ``growth`` / ``min_objects``: default :data:`RECLAIM_GROWTH`
    / :data:`RECLAIM_MIN_OBJECTS`. Only the event loop's thread calls it."""

    def __init__(
        self,
        quiet: Callable[[], bool],
        *,
        delay_s: float | None = None,
        growth: float = RECLAIM_GROWTH,
        min_objects: int = RECLAIM_MIN_OBJECTS,
    ) -> None:
        self._quiet = quiet
        self._delay_s = FREEZE_DELAY_S if delay_s is None else delay_s
        self._growth = growth
        self._min_objects = min_objects
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._collecting = False  # a collection of ours runs (the callback ignores it)
        #: Objects in the permanent generation after the last reclaim (or the first
        #: freeze: None before it).
        self.base: int | None = None
        #: At least the permanent generation's size: counted at the first freeze and each
        #: reclaim, then raised by what each freeze moves there (frozen objects freed by
        #: reference counting are not taken off). Counting it exactly walks every frozen
        #: object (``gc.get_freeze_count``: 30-40 ms over a console's 300,000 on a busy
        #: machine), so it is counted only when this bound says a reclaim may be due.
        self._frozen = 0
        #: Freezes and reclaims so far (for the benches and tests).
        self.freezes = 0
        self.reclaims = 0

    def watch(self) -> None:
        """Freeze soon after each full collection (see the module docstring) from now on,
        until :meth:`close`. Called on the event loop's thread (the scheduler's start)."""
        self._loop = asyncio.get_running_loop()
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def _on_collection(self, phase: str, info: dict) -> None:
        # any thread may trigger a collection; the freeze itself runs on the loop's thread
        if phase != "stop" or info.get("generation") != 2 or self._collecting:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._soon)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def session_opened(self) -> None:
        """A run's session is open (its long-lived objects exist): freeze soon."""
        self._soon()

    def run_ended(self) -> None:
        """A run ended: reclaim soon if the frozen heap has grown enough."""
        if self._grown() >= 1.0:
            self._soon()

    def _soon(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay_s, self._freeze)

    def _grown(self) -> float:
        """The frozen heap's growth since the last reclaim, in units of the growth that
        makes one due (>= 1.0: due; 0.0 before the first freeze). Counted exactly when
        the upper bound reaches 1.0."""
        if self.base is None:
            return 0.0
        due = max(self._min_objects, self._growth * self.base, 1)
        if (self._frozen - self.base) / due >= 1.0:
            self._frozen = gc.get_freeze_count()
        return (self._frozen - self.base) / due

    def close(self) -> None:
        """Stop freezing (the scheduler stops)."""
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        self._loop = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _freeze(self) -> None:
        self._timer = None
        self._collecting = True
        try:
            self._freeze_now()
        finally:
            self._collecting = False

    def _freeze_now(self) -> None:
        grown = self._grown()
        if grown >= 1.0 and (grown >= 2.0 or self._quiet()):
            self.reclaims += 1
            gc.unfreeze()
            gc.collect()  # the one long pause: everything, start-up's heap included
            gc.freeze()
            self.base = self._frozen = gc.get_freeze_count()
        else:
            gc.collect(1)  # the young generations' garbage is not frozen with the rest
            if self.base is None:
                gc.freeze()
                self.base = self._frozen = gc.get_freeze_count()
            else:
                self._frozen += len(gc.get_objects())  # what this freeze moves
                gc.freeze()
            if self._grown() >= 1.0:  # due (busy: try again later)
                self._soon()
        self.freezes += 1
