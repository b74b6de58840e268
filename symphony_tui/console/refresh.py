"""The console's steady refresh: read the port's snapshot, repaint what is visible.

One timer drives rendering (``REFRESH_HZ`` in ``console.app``), not events; each screen
remembers the render key it last showed so unchanged input skips the repaint (unless the
screen is ``holding`` something back for a while, see ``console.widgets.workers``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from textual.css.query import NoMatches
from textual.screen import Screen

from symphony_tui.console.sanitize import one_line

if TYPE_CHECKING:
    from symphony_tui.console.attention import ConsoleAttention
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.console.tones import Tones
    from symphony_tui.console.ui import Ui
    from symphony_tui.domain import Snapshot


class Refresher:
    """Reads ``state.port`` into ``state.snapshot`` (telling ``attention``) and paints
    screens from it; a failed read or paint is a notification through ``ui`` (a failed
    read once until it reads again)."""

    def __init__(self, state: ConsoleState, ui: Ui, attention: ConsoleAttention) -> None:
        self._state = state
        self._ui = ui
        self._attention = attention
        self._port_error: str | None = None
        #: What each screen last showed; weak, so closed screens (a worker screen per
        #: enter) are not kept, and a new screen never inherits a dead one's key.
        self.render_keys: weakref.WeakKeyDictionary[Screen, tuple] = weakref.WeakKeyDictionary()

    def read(self) -> Snapshot | None:
        """The port's snapshot as shown (``state.snapshot``: narrowed to a fleet console's
        project filter); ``None`` when the port failed. Attention hears of the whole one
        (an approval waiting in another project still rings)."""
        try:
            snapshot = self._state.port.snapshot()
        except Exception as exc:
            text = one_line(f"{type(exc).__name__}: {exc}", 300)
            if text != self._port_error:
                self._port_error = text
                self._ui.notify(text, title="snapshot failed", severity="error", markup=False)
            return None
        self._port_error = None
        shown = self._state.take(snapshot)
        self._attention.on_snapshot(snapshot)
        return shown

    def paint(
        self, stack: Sequence[Screen], snapshot: Snapshot, now: datetime, tones: Tones, key: tuple
    ) -> None:
        """Paint the top screen of ``stack`` and, through modal dialogs, the screens under
        them, each unless it showed ``key`` last (and holds nothing back)."""
        for screen in reversed(stack):
            self._paint(screen, snapshot, now, tones, key)
            if not screen.is_modal:
                break

    def _paint(
        self, screen: Screen, snapshot: Snapshot, now: datetime, tones: Tones, key: tuple
    ) -> None:
        show = getattr(screen, "show", None)
        if show is None or not screen.is_mounted:
            return  # a screen still composing is painted by the next tick
        try:
            if self.render_keys.get(screen) != key or getattr(screen, "holding", False):
                show(snapshot, now, tones)
                self.render_keys[screen] = key
            elif (pull := getattr(screen, "pull", None)) is not None:
                pull(tones)
        except NoMatches:
            pass  # widgets come and go while a screen is built or torn down
        except Exception as exc:  # a bad value must not kill the console
            self._ui.notify(
                one_line(f"render failed: {type(exc).__name__}: {exc}", 300),
                severity="error",
                markup=False,
            )
