"""Time for the scheduler: wall clock, monotonic clock and timers, swappable for tests.

Every timing decision of the scheduler (poll ticks, retry timers, stall detection, turn and
approval deadlines) goes through a :class:`Clock`, so tests drive time with
:class:`FakeClock` deterministically instead of sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Timezone-aware UTC wall time."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` (synchronously, on the event loop) after ``delay_s`` seconds."""
        ...


class RealClock:
    """The event loop's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay_s), callback)


def _cancelled() -> None:
    """A cancelled fake timer's callback (never called)."""


@dataclass(order=True)
class _FakeTimer:
    due: float
    order: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True
        # As asyncio's ``TimerHandle.cancel``: what the callback refers to (a worker) is
        # not kept alive until the timer would have been due.
        self.callback = _cancelled


class FakeClock:
    """A manual clock. ``await advance(s)`` fires due timers in order, letting the event loop
    run between them so tasks woken by a timer make progress before the next one fires."""

    def __init__(self, start: datetime | None = None) -> None:
        self._wall0 = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self._t = 0.0
        self._timers: list[_FakeTimer] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._wall0 + timedelta(seconds=self._t)

    def monotonic(self) -> float:
        return self._t

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> TimerHandle:
        timer = _FakeTimer(self._t + max(0.0, delay_s), next(self._order), callback)
        heapq.heappush(self._timers, timer)
        return timer

    @property
    def pending_timers(self) -> int:
        return sum(1 for t in self._timers if not t.cancelled)

    async def settle(self, rounds: int = 20) -> None:
        """Let ready tasks run (several loop iterations) without moving time."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        target = self._t + seconds
        await self.settle()
        while self._timers and self._timers[0].due <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._t = max(self._t, timer.due)
            timer.callback()
            await self.settle()
        self._t = target
        await self.settle()
