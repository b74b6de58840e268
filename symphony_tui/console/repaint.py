"""Set what a widget shows only when it changes: nothing written when nothing changed, and
only the changed cells when something did.

Textual repaints a widget's whole region on every ``Static.update`` and on every
assignment of ``border_title`` / ``border_subtitle``, equal value or not, and the terminal
then receives every line of that region again. The console's refresh runs several times a
second, so a pane set to what it already shows would be re-sent on every tick.

A partial update is written only over its dirty spans (:func:`cropped_update`): a widget
that marks one cell dirty (``KeyedTable``) gets that cell written, not its line from the
widget's left edge.
"""

from __future__ import annotations

from rich.cells import get_character_cell_size
from rich.console import Console, RenderableType
from rich.control import Control
from rich.text import Text
from textual._compositor import ChopsUpdate
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

_SHOWN = "_symphony_shown"


def same_text(a: object, b: object) -> bool:
    """Equal rich ``Text`` (plain, base style, spans, justification) or equal values.
    ``Text.__eq__`` ignores the base style, so a tone change would not count."""
    if a is b:
        return True
    if isinstance(a, Text) and isinstance(b, Text):
        return (
            a.plain == b.plain
            and a.style == b.style
            and a.spans == b.spans
            and a.justify == b.justify
            and a.overflow == b.overflow
            and a.no_wrap == b.no_wrap
            and a.end == b.end
        )
    if isinstance(a, Text) or isinstance(b, Text):
        return False
    return a == b


def _shown(widget: Widget) -> dict[str, object]:
    shown = getattr(widget, _SHOWN, None)
    if shown is None:
        shown = {}
        setattr(widget, _SHOWN, shown)
    return shown


def update_static(widget: Static, content: Text | str) -> bool:
    """``widget.update(content)`` unless it already shows ``content``. Returns True when it
    was updated."""
    shown = _shown(widget)
    if "content" in shown and same_text(shown["content"], content):
        return False
    widget.update(content)
    shown["content"] = content
    return True


_KEEP = object()


def set_border(widget: Widget, *, title: object = _KEEP, subtitle: object = _KEEP) -> bool:
    """Set ``border_title`` / ``border_subtitle`` (a ``Text``, ``str`` or ``None``; one not
    given is left as it is) unless already shown. Returns True when either changed."""
    shown = _shown(widget)
    changed = False
    for name, value in (("border_title", title), ("border_subtitle", subtitle)):
        if value is _KEEP:
            continue
        if name in shown and same_text(shown[name], value):
            continue
        setattr(widget, name, value)
        shown[name] = value
        changed = True
    return changed


def _cell_start(strip: Strip, offset: int) -> int:
    """``offset`` (cells into ``strip``), moved back to the start of the wide character it
    falls inside, if any: a crop there would write half a character as a space."""
    position = 0
    for character in strip.text:
        width = get_character_cell_size(character)
        if position + width > offset:
            return position
        position += width
    return offset


class CroppedChops(ChopsUpdate):
    """A partial update that writes each dirty span from where it starts.

    Textual's ``ChopsUpdate.render_segments`` (what the app writes to a real terminal)
    crops a chop (the part of a line between two widget edges) only on its right: a span
    inside a chop is written from the chop's left edge, so one changed table cell sends its
    line from the table's left border through the cell. Here a chop is cropped on both
    sides to the span ``(y, x1, x2)`` (cells, ``x2`` exclusive), so the terminal gets
    only the dirty cells.
    """

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
                if strip is None or x >= x2 or end <= x1:
                    continue
                if x >= x1 and end <= x2:
                    append(move_to(x, y).segment.text)
                    append(strip.render(console))
                    continue
                start = _cell_start(strip, x1 - x) if x1 > x else 0
                append(move_to(x + start, y).segment.text)
                append(strip.crop(start, min(end, x2) - x).render(console))
            if y != last_y:
                append("\n")
        return "".join(sequences)


def cropped_update(update: RenderableType | None) -> RenderableType | None:
    """``update`` as a :class:`CroppedChops` when it is a Textual partial update (a
    ``ChopsUpdate``), else as it is."""
    if type(update) is ChopsUpdate:
        return CroppedChops(update.chops, update.spans, update.chop_ends)
    return update
