"""Command palette entries from the registry, limited to what applies right now."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from symphony_tui.console.registry import COMMANDS, ConsoleCommand, display_key


class ConsoleCommands(Provider):
    """Context-sensitive: app commands pass ``check_action``; screen commands only show
    on their own screen (posting-style)."""

    def _applicable(self) -> list[tuple[ConsoleCommand, object]]:
        app = self.app
        screen = self.screen  # the screen the palette was opened from
        found: list[tuple[ConsoleCommand, object]] = []
        scope = getattr(screen, "CONSOLE_SCOPE", None)
        for cmd in COMMANDS:
            if not cmd.palette:
                continue
            if cmd.scope == "app":
                target: object = app
            elif cmd.scope == scope:
                target = screen
            else:
                continue
            if target.check_action(cmd.action_name, ()):  # type: ignore[attr-defined]  # app or screen
                found.append((cmd, target))
        return found

    def _run(self, cmd: ConsoleCommand, target: object) -> None:
        self.app.call_later(self.app.run_action, cmd.action, target)

    def _title(self, cmd: ConsoleCommand) -> str:
        key_for = getattr(self.app, "key_for", None)
        key = key_for(cmd) if key_for else display_key(cmd.key)
        return f"{cmd.label} ({key})"

    def _help(self, cmd: ConsoleCommand) -> str:
        return cmd.help_in(bool(getattr(self.app, "fleet", False)))

    async def discover(self) -> Hits:
        for cmd, target in self._applicable():
            run = partial(self._run, cmd, target)
            yield DiscoveryHit(self._title(cmd), run, help=self._help(cmd))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for cmd, target in self._applicable():
            title = self._title(cmd)
            help_line = self._help(cmd)
            score = max(matcher.match(title), matcher.match(help_line))
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(title),
                    partial(self._run, cmd, target),
                    help=help_line,
                )
