"""The console's footer: the keys that apply now, built without leaking watchers.

Textual 8's ``Footer`` recomposes on every ``refresh_bindings`` and binds each new
``FooterKey`` to its ``compact`` with ``data_bind``. That stores a watcher *on the footer*
which is only pruned when ``compact`` changes, which in a console never happens, so every
key ever shown stays alive (Textual issue #6666): with workers starting and ending, the
selection's keys change several times a second and memory grows without bound.

This footer yields the same widgets (same classes, same CSS) without ``data_bind``: keys
take ``compact`` when built and the footer recomposes when it changes. It also skips the
recompose when the keys to show are the ones already shown (most binding refreshes), so
nothing is rebuilt or repainted for nothing. The palette hint is dropped on narrow
terminals so the keys fit (80 columns).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

PALETTE_MIN_WIDTH = 100

# (key, key display, description, action, enabled, tooltip, classes) of one FooterKey
_KeySpec = tuple[str, str, str, str, bool, str, str]


class ConsoleFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)
        self._shown: tuple | None = None

    def on_resize(self, event: Resize) -> None:
        wanted = event.size.width >= PALETTE_MIN_WIDTH
        if self.show_command_palette != wanted:
            self.show_command_palette = wanted
            self._recompose_if_changed()

    def watch_compact(self) -> None:
        self._recompose_if_changed()

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    def _recompose_if_changed(self) -> None:
        if not self.is_attached or not self._bindings_ready:
            return
        if self._layout() != self._shown:
            self.call_next(self.recompose)

    def _layout(self) -> tuple:
        """What :meth:`compose` would show now: ``(groups, palette key, compact)``, each
        group ``(description or None, key specs)``; equal layouts render the same."""
        active = self.screen.active_bindings
        by_action: defaultdict[str, list[tuple[Binding, bool, str]]] = defaultdict(list)
        for _, binding, enabled, tooltip in active.values():
            if binding.show:
                by_action[binding.action].append((binding, enabled, tooltip))
        groups: list[tuple[str | None, tuple[_KeySpec, ...]]] = []
        for group, members in groupby(by_action.values(), lambda m: m[0][0].group):
            firsts = [m[0] for m in members]
            grouped = group is not None and len(firsts) > 1
            specs = tuple(
                self._spec(b, enabled, (tooltip or b.description) if grouped else tooltip, grouped)
                for b, enabled, tooltip in firsts
            )
            if grouped:
                groups.append((group.description, specs))
            else:
                groups.extend((None, (spec,)) for spec in specs)
        palette = None
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            entry = active.get(self.app.COMMAND_PALETTE_BINDING)
            if entry is not None:
                _, binding, enabled, _ = entry
                palette = self._spec(binding, enabled, binding.tooltip or binding.description)
        compact_groups = tuple(
            g.compact for _, b, _, _ in active.values() if (g := b.group) is not None
        )
        return (tuple(groups), palette, self.compact, compact_groups)

    def _spec(self, b: Binding, enabled: bool, tooltip: str, grouped: bool = False) -> _KeySpec:
        return (
            b.key,
            self.app.get_key_display(b),
            "" if grouped else b.description,
            b.action,
            enabled,
            tooltip,
            "-grouped" if grouped else "",
        )

    def _key(self, spec: _KeySpec, extra: str = "") -> FooterKey:
        key, display, description, action, enabled, tooltip, classes = spec
        classes = f"{classes} {extra}".strip()
        widget = FooterKey(
            key,
            display,
            description,
            action,
            disabled=not enabled,
            tooltip=tooltip,
            classes=f"{classes} -compact" if self.compact else classes,
        )
        widget.set_reactive(FooterKey.compact, self.compact)
        return widget

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        layout = self._layout()
        self._shown = layout
        groups, palette, _, _ = layout
        self.styles.grid_size_columns = sum(len(specs) for _, specs in groups)
        group_of = {
            b.group.description: b.group
            for _, b, _, _ in self.screen.active_bindings.values()
            if b.group is not None
        }
        for description, specs in groups:
            if description is None:
                yield self._key(specs[0])
                continue
            group = group_of.get(description)
            with KeyGroup(classes="-compact" if group is not None and group.compact else ""):
                for spec in specs:
                    yield self._key(spec)
            yield FooterLabel(description)
        if palette is not None:
            yield self._key(palette, "-command-palette")
