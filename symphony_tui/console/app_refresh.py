"""The console's steady refresh: read the port's snapshot, repaint what is visible.

One timer drives rendering (``REFRESH_HZ`` in ``console.app``), not events; each screen
remembers the render key it last showed so unchanged input skips the repaint (unless the
screen is ``holding`` something back for a while, see ``console.widgets.workers``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from textual import events
from textual.css.query import NoMatches
from textual.screen import Screen

from symphony_tui.console.registry import (
    APP_BY_ACTION,
)
from symphony_tui.console.sanitize import one_line
from symphony_tui.console.screens.too_small import TooSmallScreen, too_small
from symphony_tui.console.tones import Tones

if TYPE_CHECKING:
    from symphony_tui.domain import (
        Snapshot,
    )


class RefreshMixin:
    """Snapshot refresh, render-key bookkeeping, binding refresh and the too-small screen.

    A mixin of :class:`~symphony_tui.console.app.SymphonyApp` (it uses the App's API and
    the attributes set in ``SymphonyApp.__init__``); it never imports the app."""

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit_screen)

    def _fit_screen(self) -> None:
        """Swap :class:`TooSmallScreen` in while the terminal is below 80x24 and out
        again once it is large enough (the screens under it are kept as they were)."""
        if self._exit or not self.is_running:
            return
        width, height = self.size
        shown = next((s for s in self.screen_stack if isinstance(s, TooSmallScreen)), None)
        if too_small(width, height):
            if shown is None:
                self.push_screen(TooSmallScreen())
                self.call_after_refresh(self._fit_screen)  # fill in the size once mounted
            elif shown.is_mounted:
                shown.show_size(width, height)
        elif shown is not None and shown is self.screen:
            # a dialog opened on top of it (q asks first) is left to close by itself
            self.pop_screen()
            self.call_after_refresh(self.tick)

    @property
    def tones(self) -> Tones:
        if self._tones is None or self._tones[0] != self.theme:
            self._tones = (self.theme, Tones.from_variables(self.get_css_variables()))
        return self._tones[1]

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot shown last (``None`` before the first tick)."""
        return self._snapshot

    def tick(self) -> None:
        """Read the port and repaint what is visible: the top screen and, through modal
        dialogs, the screens under them. Unchanged input skips the repaint.

        Once quitting (the workers stop, ``_stopping``) nothing is repainted: the screen
        holds its last frame under the "stopping workers…" notice, and the loop's time goes
        to the shutdown instead of re-laying out tables whose rows all end at once (with 50
        workers that repaint is a large share of the quit's loop time)."""
        if self._exit or not self.is_running or self._stopping:
            return
        self._fit_screen()
        if self.starting:
            return  # nothing to show before the scheduler is built (console.starting)
        try:
            snapshot = self.port.snapshot()
        except Exception as exc:
            text = one_line(f"{type(exc).__name__}: {exc}", 300)
            if text != self._port_error:
                self._port_error = text
                self.notify(text, title="snapshot failed", severity="error", markup=False)
            return
        self._port_error = None
        self._snapshot = snapshot
        self.attention.on_snapshot(snapshot)
        now = self.clock()
        tones = self.tones
        link_of = getattr(self.port, "link", None)  # attached: a lost link repaints at once
        link = link_of().state if link_of is not None else None
        key = (id(snapshot), snapshot.generated_at, int(now.timestamp()), self.theme, link)
        for screen in reversed(self.screen_stack):
            self._paint(screen, snapshot, now, tones, key)
            if not screen.is_modal:
                break
        self._refresh_bindings_if_changed()

    def _paint(self, screen: Screen, snapshot: Snapshot, now: datetime, tones: Tones, key) -> None:
        show = getattr(screen, "show", None)
        if show is None or not screen.is_mounted:
            return  # a screen still composing is painted by the next tick
        try:
            if self._render_keys.get(screen) != key or getattr(screen, "holding", False):
                show(snapshot, now, tones)
                self._render_keys[screen] = key
            elif (pull := getattr(screen, "pull", None)) is not None:
                pull(tones)
        except NoMatches:
            pass  # widgets come and go while a screen is built or torn down
        except Exception as exc:  # a bad value must not kill the console
            self.notify(
                one_line(f"render failed: {type(exc).__name__}: {exc}", 300),
                severity="error",
                markup=False,
            )

    def _refresh_bindings_if_changed(self) -> None:
        signature = tuple(self.check_action(name, ()) for name in APP_BY_ACTION)
        if signature != self._enabled_signature:
            self._enabled_signature = signature
            self.refresh_bindings()
