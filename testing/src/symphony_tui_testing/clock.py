"""A manual :class:`~symphony_tui.scheduler.clock.Clock` for scheduler tests: time moves only
when the test says, and due timers fire in order as it does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from symphony_tui.scheduler.clock import TimerHandle


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
