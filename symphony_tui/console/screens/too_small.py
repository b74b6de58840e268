"""Shown instead of the panes while the terminal is smaller than the console needs.

Below 80x24 the four panes collapse into slivers (at 40x12 the workers pane vanishes and
the log is eight columns wide). One clear line beats a broken layout; the app swaps this
screen in and out as the terminal is resized, and ``q`` still quits.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

MIN_WIDTH, MIN_HEIGHT = 80, 24


def too_small(width: int, height: int) -> bool:
    """Whether a ``width`` x ``height`` terminal (cells) is below ``MIN_WIDTH`` x
    ``MIN_HEIGHT``."""
    return width < MIN_WIDTH or height < MIN_HEIGHT


def too_small_text(width: int, height: int) -> Text:
    text = Text(end="")
    text.append(f"terminal too small ({width}x{height})", style="bold")
    text.append(f"\nneed {MIN_WIDTH}x{MIN_HEIGHT}: enlarge the window")
    text.append("\nthe workers keep running · q quits", style="dim")
    return text


class TooSmallScreen(Screen[None]):
    """The message, centred; :meth:`show_size` updates it as the terminal changes."""

    def __init__(self) -> None:
        super().__init__(id="too-small")

    def compose(self) -> ComposeResult:
        yield Static(id="too-small-text")

    def show_size(self, width: int, height: int) -> None:
        self.query_one("#too-small-text", Static).update(too_small_text(width, height))
