"""The help screen, generated from the command registry (with the user's key remaps).

The key table is drawn by a line-API view (:class:`HelpBody`) that renders it once per
width. In a ``Static``, Textual rendered the Rich ``Table`` four times before help's first
frame (to count its lines and to draw them, before and after the scrollbar took its
width), measuring every cell each time."""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip

from symphony_tui.console.registry import COMMANDS, SCOPE_TITLES, ConsoleCommand


def help_table(key_for: Callable[[ConsoleCommand], str], *, fleet: bool = False) -> Table:
    """Every command grouped by scope: key, help line, and whether it asks first; the
    fleet console's commands only in a fleet console (``fleet``)."""
    commands = [c for c in COMMANDS if fleet or not c.fleet]
    table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column("key", style="bold", width=8, no_wrap=True)
    table.add_column("what")
    # one row a key of a scope: commands sharing it (drain / undrain on ``d``) are one
    # key whose selection decides which applies, each said on its own line after ``or``
    rows: dict[tuple[str, str], Text] = {}
    for cmd in commands:
        key = key_for(cmd)
        said = cmd.help_in(fleet)
        line = rows.get((cmd.scope, key))
        if line is None:
            line = rows[(cmd.scope, key)] = Text(said)
        else:
            line.append(f"\nor {said[:1].lower()}{said[1:]}")
        if cmd.confirm and cmd.id != "quit":
            line.append("  (asks first)", style="dim")
    seen_scope = None
    for (scope, key), line in rows.items():
        if scope != seen_scope:
            seen_scope = scope
            if table.row_count:
                table.add_row("", "")
            # the title spans into the wide column so it is never cut to the key's width
            table.add_row("", Text(SCOPE_TITLES[scope], style="bold underline"))
        table.add_row(key, line)
    table.add_row("", "")
    table.add_row("", Text("Anywhere", style="bold underline"))
    table.add_row("ctrl+p", "Command palette (only the commands that apply now)")
    table.add_row(
        "", Text('Remap keys in keymap.toml: binding_id = "key" (ids below)', style="dim")
    )
    table.add_row("", Text(", ".join(c.id for c in commands), style="dim"))
    return table


class HelpBody(ScrollView, can_focus=True):
    """``table`` as a scrollable view: rendered to plain strips once per content width
    (:meth:`lines`), the widget's own style (the theme's colours) laid over each line as it
    is drawn, so a theme change renders nothing again."""

    def __init__(self, table: Table, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._table = table
        self._lines: dict[int, list[Strip]] = {}  # content width -> the table's lines

    def lines(self, width: int) -> list[Strip]:
        """The table's lines at ``width`` cells (rendered on the first call for it)."""
        lines = self._lines.get(width)
        if lines is None:
            console = self.app.console
            options = console.options.update_width(width).update(highlight=False)
            lines = [Strip(line, width) for line in console.render_lines(self._table, options)]
            self._lines[width] = lines
        return lines

    def drawn_width(self) -> int:
        """The width the lines are drawn at: narrower by the vertical scrollbar when they
        do not fit the height (the usual case, so that width is tried first)."""
        region = self.content_region
        narrow = region.width - self.styles.scrollbar_size_vertical
        if narrow > 0 and len(self.lines(narrow)) > region.height:
            return narrow
        return max(region.width, 0)

    def on_resize(self) -> None:
        width = self.drawn_width()
        self.virtual_size = Size(0, len(self.lines(width)) if width else 0)

    def render_line(self, y: int) -> Strip:
        # drawn at :meth:`drawn_width` even before the first resize has shown the scrollbar
        width = self.drawn_width()
        style = self.rich_style
        index = self.scroll_offset.y + y
        lines = self.lines(width) if width else []
        if index >= len(lines):
            return Strip.blank(self.scrollable_content_region.width, style)
        return (
            lines[index]
            .crop_extend(0, self.scrollable_content_region.width, style)
            .apply_style(style)
        )


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss_help", "Close", id="help_close"),
    ]

    def __init__(self, key_for: Callable[[ConsoleCommand], str], *, fleet: bool = False) -> None:
        super().__init__(classes="dialog")
        self._key_for = key_for
        self._fleet = fleet

    def compose(self) -> ComposeResult:
        box = HelpBody(help_table(self._key_for, fleet=self._fleet), id="help")
        box.border_title = "Keys"
        box.border_subtitle = "esc to close"
        yield box

    def on_screen_resume(self) -> None:
        # the screen is kept between openings (``SymphonyApp.action_help``): each opens at
        # the top, not where the last one was scrolled to
        self.query_one("#help", HelpBody).scroll_home(animate=False)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
