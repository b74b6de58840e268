"""Pilot helpers shared by console tests."""

from __future__ import annotations

from textual.pilot import Pilot

from symphony_tui.console.app import SymphonyApp

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
