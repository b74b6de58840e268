"""The help screen, generated from the command registry (with the user's key remaps)."""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

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


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss_help", "Close", id="help_close"),
    ]

    def __init__(self, key_for: Callable[[ConsoleCommand], str], *, fleet: bool = False) -> None:
        super().__init__(classes="dialog")
        self._key_for = key_for
        self._fleet = fleet

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as box:
            box.border_title = "Keys"
            box.border_subtitle = "esc to close"
            yield Static(help_table(self._key_for, fleet=self._fleet), id="help-body")

    def on_screen_resume(self) -> None:
        # the screen is kept between openings (``SymphonyApp.action_help``): each opens at
        # the top, not where the last one was scrolled to
        self.query_one("#help", VerticalScroll).scroll_home(animate=False)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
