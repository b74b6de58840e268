"""Footer that drops the palette hint on narrow terminals so the keys fit (80 columns)."""

from __future__ import annotations

from textual.events import Resize
from textual.widgets import Footer

PALETTE_MIN_WIDTH = 100


class ConsoleFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)

    def on_resize(self, event: Resize) -> None:
        wanted = event.size.width >= PALETTE_MIN_WIDTH
        if self.show_command_palette != wanted:
            self.show_command_palette = wanted
