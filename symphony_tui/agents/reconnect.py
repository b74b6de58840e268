"""Reconnecting a dropped event stream: capped exponential backoff with jitter.

Shared by the HTTP-server backends (OpenHands' event WebSocket, OpenCode's SSE stream;
docs/protocols.md). Attempt ``n`` (1-based) waits ``min(initial * 2**(n-1), max)`` seconds
scaled by a random factor in ``[1 - jitter, 1]`` ("equal jitter" for ``jitter = 0.5``):
never longer than the cap, and many sessions of one server that lost their streams at
the same moment do not all come back in the same instant. The random source and the sleep
are injectable, so tests are deterministic.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from symphony_tui.agents.base import AgentError

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Timing of reconnect attempts: seconds, a fraction (``jitter`` in ``[0, 1]``) and a
    count. Raises ``ValueError`` for a negative time, a jitter outside ``[0, 1]`` or no
    attempts."""

    initial_s: float = 0.25
    max_s: float = 5.0
    max_attempts: int = 12
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.initial_s < 0 or self.max_s < 0:
            raise ValueError("backoff times must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"backoff jitter must be within [0, 1], got {self.jitter}")
        if self.max_attempts < 1:
            raise ValueError("at least one reconnect attempt is needed")

    def nominal_s(self, attempt: int) -> float:
        """The capped exponential delay of attempt ``attempt`` (1-based), before jitter."""
        if self.initial_s == 0:
            return 0.0
        # 2**63 overflows nothing but is far past any cap: stop doubling early.
        exponent = min(max(attempt - 1, 0), 62)
        return min(self.initial_s * (2**exponent), self.max_s)

    def delay_s(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """The jittered delay of attempt ``attempt``: ``nominal * (1 - jitter * draw())``
        with ``draw()`` in ``[0, 1)``."""
        return self.nominal_s(attempt) * (1.0 - self.jitter * draw())


@dataclass(frozen=True)
class StreamOptions:
    """Timing of an HTTP backend's event stream, in seconds. ``readiness_timeout_s``: how
    long a new connection may take to be ready (OpenCode's ``server.connected``,
    OpenHands' first state update); ``watchdog_s``: silence after which an OpenCode SSE
    connection is dropped (OpenHands' WebSocket has its own pings); the rest is the
    reconnect :class:`Backoff`."""

    readiness_timeout_s: float = 30.0
    watchdog_s: float = 45.0
    backoff_initial_s: float = 0.25
    backoff_max_s: float = 5.0
    max_attempts: int = 12
    backoff_jitter: float = 0.5  # fraction of each delay drawn at random

    @property
    def backoff(self) -> Backoff:
        return Backoff(
            self.backoff_initial_s, self.backoff_max_s, self.max_attempts, self.backoff_jitter
        )


class Reconnector:
    """Runs reconnect attempts for one stream. ``what`` names it in messages (``"event
    socket"``); ``notice(message)`` hears each ``reconnecting`` line; ``draw`` and
    ``sleep`` default to :func:`random.random` and :func:`asyncio.sleep`."""

    def __init__(
        self,
        backoff: Backoff,
        what: str,
        *,
        notice: Callable[[str], None] = lambda message: None,
        draw: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.backoff = backoff
        self.what = what
        self._notice = notice
        self._draw = draw
        self._sleep = sleep
        self.delays: list[float] = []  # every delay waited, in order (diagnostics, tests)

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T]],
        *,
        last: str,
        retryable: tuple[type[BaseException], ...],
        final: tuple[type[BaseException], ...] = (),
        describe: Callable[[BaseException], str] = str,
        closing: Callable[[], bool] = lambda: False,
    ) -> T | None:
        """Call ``attempt(n)`` for ``n = 1..max_attempts``, each after its delay, until one
        returns; its value is returned. ``last`` says why the stream dropped (shown in the
        first notice); an exception of a ``retryable`` type is the next attempt's reason
        (``describe(error)``) unless it is also of a ``final`` type; anything else
        propagates. Returns None without trying when
        ``closing()`` turns true during a delay. Raises ``AgentError("transport_error")``
        naming the last reason when every attempt failed."""
        for n in range(1, self.backoff.max_attempts + 1):
            delay = self.backoff.delay_s(n, self._draw)
            self._notice(f"{self.what} dropped ({last}); reconnect attempt {n} in {delay:.2f}s")
            self.delays.append(delay)
            await self._sleep(delay)
            if closing():
                return None
            try:
                return await attempt(n)
            except final:
                raise
            except retryable as e:
                last = describe(e)
        raise AgentError(
            "transport_error",
            f"{self.what} lost; {self.backoff.max_attempts} reconnect attempts failed "
            f"(last: {last})",
        )
