"""Helpers shared by the test files: waiting for a condition, a free loopback port, the
tracker tests' wall clock and settings holder.

The fakes of what lives outside this machine (and the scripted agent, the manual clock) are
the package ``symphony_tui_testing``; the console's pilot helpers are ``tests.console.helpers``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from symphony_tui.config.settings import Settings

T = TypeVar("T")

WAIT_S = 60.0
"""Default wait, seconds: generous, since only a failing test waits it out (runs, hooks and
agent programs do real work in real time)."""


async def until(
    predicate: Callable[[], T],
    timeout: float = WAIT_S,
    *,
    step: float = 0.02,
    what: str = "the condition",
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """Poll ``predicate`` every ``step`` seconds until it returns something truthy, and return
    that. Raises ``AssertionError`` naming ``what`` after ``timeout`` seconds of event-loop
    time. ``pause`` waits between polls (a Textual pilot's ``pause`` lets the app refresh)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await pause(step)


def until_blocking(
    predicate: Callable[[], T],
    timeout: float = WAIT_S,
    *,
    step: float = 0.2,
    what: str = "the condition",
) -> T:
    """:func:`until` for a test without an event loop (it drives child processes): blocks the
    thread between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(step)


async def until_exists(path: Path, timeout: float = WAIT_S) -> None:
    """Wait for ``path`` to exist: a hook (a real process) says it started by writing it."""
    await until(path.exists, timeout, what=f"{path} to appear")


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port on the loopback ``address`` that nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


class WallClock:
    """Aware UTC time that moves only when told: the ``clock`` a tracker and the HTTP fakes
    read (``clock() -> datetime``)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class SettingsBox:
    """Mutable holder so a test can 'reload' settings; the tracker calls it every request."""

    def __init__(self, settings: Settings) -> None:
        self.value = settings

    def __call__(self) -> Settings:
        return self.value

    def update(self, **tracker: object) -> None:
        self.value = self.value.model_copy(
            update={"tracker": self.value.tracker.model_copy(update=tracker)}
        )
