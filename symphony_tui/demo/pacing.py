"""How fast the simulated agent works: env ``SYMPHONY_DEMO_SPEED``.

The value multiplies every pause (``1`` = the default pace of a few seconds per issue, ``0`` =
no pauses at all, as tests use, ``2`` = twice as slow). A bad value falls back to ``1`` with a
stderr note.
"""

from __future__ import annotations

import asyncio
import math
import os

from symphony_tui.demo.transport import note

ENV_SPEED = "SYMPHONY_DEMO_SPEED"


def speed_from_env(env: dict[str, str] | None = None) -> float:
    """The pause multiplier from ``SYMPHONY_DEMO_SPEED`` (>= 0; default 1)."""
    raw = (os.environ if env is None else env).get(ENV_SPEED, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        note(f"ignoring {ENV_SPEED}={raw!r}: expected a number >= 0")
        return 1.0
    return value


class Pacer:
    """Sleeps scaled by the speed multiplier and an extra ``factor`` (``slow`` directive)."""

    def __init__(self, speed: float, factor: float = 1.0) -> None:
        self.scale = speed * factor

    async def pause(self, ms: float) -> None:
        """Pause ``ms`` milliseconds times the scale; cancellable (interrupts end it)."""
        if self.scale > 0:
            await asyncio.sleep(ms * self.scale / 1000)
        else:
            await asyncio.sleep(0)  # still yield, so an interrupt can get in between steps
