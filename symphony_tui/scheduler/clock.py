"""Time for the scheduler: wall clock, monotonic clock and timers, swappable for tests.

Every timing decision of the scheduler (poll ticks, retry timers, stall detection, turn and
approval deadlines) goes through a :class:`Clock`, so tests drive time deterministically
instead of sleeping, with the manual clock of the test fakes (``symphony_tui_testing.clock``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
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
