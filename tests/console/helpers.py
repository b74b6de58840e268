"""Pilot helpers shared by console tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rich.text import Text
from textual.pilot import Pilot

from symphony_tui.console.app import SymphonyApp
from tests.helpers import until

T = TypeVar("T")

SIZE = (120, 36)


async def settle(pilot: Pilot) -> None:
    """Let queued messages run, render one tick, let that settle too."""
    await pilot.pause()
    app: SymphonyApp = pilot.app  # type: ignore[assignment]
    app.tick()
    await pilot.pause()


async def done(pilot: Pilot) -> None:
    """Wait for command workers (sends) to finish."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def notifications(app: SymphonyApp) -> list[tuple[str, str]]:
    return [(n.message, n.severity) for n in app._notifications]


def plain(renderable) -> str:
    """A table cell's text, whether it is a Rich ``Text`` or a plain value."""
    return renderable.plain if isinstance(renderable, Text) else str(renderable)


def footer_keys(app) -> dict[str, tuple[str, bool]]:
    """The active screen's footer: key -> (description, enabled)."""
    return {k: (b.binding.description, b.enabled) for k, b in app.screen.active_bindings.items()}


async def wait_until(pilot: Pilot, predicate: Callable[[], T], timeout: float = 120.0) -> T:
    """:func:`tests.helpers.until` between the pilot's pauses, so the app refreshes while a
    real agent program works; returns the predicate's truthy value."""
    return await until(predicate, timeout, step=0.05, what="the console", pause=pilot.pause)
