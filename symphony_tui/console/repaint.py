"""Set what a widget shows only when it changes: nothing written when nothing changed, and
only the changed cells when something did.

Textual repaints a widget's whole region on every ``Static.update`` and on every
assignment of ``border_title`` / ``border_subtitle``, equal value or not, and the terminal
then receives every line of that region again. The console's refresh runs several times a
second, so a pane set to what it already shows would be re-sent on every tick.

A partial update is written only over its dirty spans, and within them only where it
differs from what the terminal already shows (:func:`cropped_update`, :class:`ShownLines`):
a widget that marks one cell dirty (``KeyedTable``) gets that cell written, not its line
from the widget's left edge, and a region repainted as it was (a scrollbar whose thumb did
not move, a row re-rendered unchanged) is not written at all.
"""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console, RenderableType
from rich.control import Control
from rich.text import Text
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.screen import Screen
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


class ShownLines:
    """What the terminal shows, per screen line: each chop (the cells between two widget
    edges, keyed by its left edge) as last written, while the line's widget edges stay
    where they were. A line with no entry, or a chop missing from it, is unknown and is
    written in full. A full update (:class:`RecordedLayout`) records every line; nothing
    else writes to the screen between two updates (Textual repaints the whole screen after
    a resize, a suspend or a screen change)."""

    def __init__(self) -> None:
        #: line -> (its chop ends when recorded, left edge -> the chop's cells)
        self._lines: dict[int, tuple[list[int], dict[int, Strip]]] = {}

    def clear(self) -> None:
        self._lines.clear()

    def line(self, y: int, ends: list[int]) -> dict[int, Strip]:
        """The chops known on line ``y`` whose edges are ``ends`` (emptied when the edges
        moved since they were recorded), to read and update."""
        known = self._lines.get(y)
        if known is None or known[0] != ends:
            known = (list(ends), {})
            self._lines[y] = known
        return known[1]

    def record(self, y: int, ends: list[int], chops: dict[int, Strip]) -> None:
        self._lines[y] = (list(ends), dict(chops))


def changed_cells(old: Strip, new: Strip) -> tuple[int, int]:
    """``(start, end)``: the cells of ``new`` (``end`` exclusive) outside which its segments
    equal ``old``'s, compared from both ends; ``start == end`` when the two are equal. Both
    are segment boundaries of ``new``, so never inside a wide character."""
    a, b = list(old), list(new)
    n = min(len(a), len(b))
    i = start = 0
    while i < n and a[i] == b[i]:
        start += cell_len(b[i].text)
        i += 1
    if i == len(a) == len(b):
        return start, start
    j, end = 0, new.cell_length
    while j < n - i and a[-1 - j] == b[-1 - j]:
        end -= cell_len(b[-1 - j].text)
        j += 1
    return start, max(start, end)


class CroppedChops(ChopsUpdate):
    """A partial update that writes each dirty span from where it starts, and only the
    cells that differ from what ``shown`` says the terminal holds.

    Textual's ``ChopsUpdate.render_segments`` (what the app writes to a real terminal)
    crops a chop (the part of a line between two widget edges) only on its right: a span
    inside a chop is written from the chop's left edge, so one changed table cell sends its
    line from the table's left border through the cell. Here a chop is cropped on both
    sides to the span ``(y, x1, x2)`` (cells, ``x2`` exclusive), and further to the cells
    that changed since the chop was last written (:func:`changed_cells`).
    """

    def __init__(
        self,
        chops: list[dict[int, Strip | None]],
        spans: list[tuple[int, int, int]],
        chop_ends: list[list[int]],
        shown: ShownLines | None = None,
    ) -> None:
        super().__init__(chops, spans, chop_ends)
        self.shown = shown

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        chops = self.chops
        chop_ends = self.chop_ends
        shown = self.shown
        for y, x1, x2 in self.spans:
            known = shown.line(y, chop_ends[y]) if shown is not None else None
            for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
                if strip is None or x >= x2 or end <= x1:
                    continue
                width = end - x
                old = known.get(x) if known is not None else None
                if old is not None and old.cell_length == strip.cell_length:
                    lo, hi = changed_cells(old, strip)
                else:
                    lo, hi = 0, width
                lo, hi = max(lo, x1 - x), min(hi, x2 - x)
                if lo >= hi:
                    continue  # the terminal already shows these cells
                lo = _cell_start(strip, lo)
                append(move_to(x + lo, y).segment.text)
                append((strip if lo == 0 and hi >= width else strip.crop(lo, hi)).render(console))
                if known is None:
                    continue
                if lo == 0 and hi >= width:
                    known[x] = strip
                elif old is not None and old.cell_length == strip.cell_length:
                    known[x] = Strip.join(
                        [old.crop(0, lo), strip.crop(lo, hi), old.crop(hi, width)]
                    )
                else:
                    known.pop(x, None)  # partly written over an unknown chop
        # every write is positioned, so no line feed between lines (Textual's ends each
        # line with one)
        return "".join(sequences)


class RecordedLayout(LayoutUpdate):
    """A full update that records each line's chops in ``shown`` as it is written."""

    def __init__(self, update: LayoutUpdate, shown: ShownLines, chop_ends: list[list[int]]) -> None:
        super().__init__(update.strips, update.region)
        self.shown = shown
        self.chop_ends = chop_ends

    def render_segments(self, console: Console) -> str:
        self.shown.clear()
        for y, line in enumerate(self.strips, self.region.y):
            chops = getattr(line, "mapping", None)  # the compositor's chop dict, by left edge
            if isinstance(chops, dict) and y < len(self.chop_ends):
                self.shown.record(y, self.chop_ends[y], chops)
        return super().render_segments(console)


def cropped_update(
    update: RenderableType | None, shown: ShownLines | None = None, screen: Screen | None = None
) -> RenderableType | None:
    """``update`` as a :class:`CroppedChops` when it is a Textual partial update (a
    ``ChopsUpdate``), written against ``shown``; a full one (``LayoutUpdate``) of
    ``screen`` as a :class:`RecordedLayout` that records it in ``shown``; else as it is."""
    if type(update) is ChopsUpdate:
        return CroppedChops(update.chops, update.spans, update.chop_ends, shown)
    if type(update) is LayoutUpdate and shown is not None:
        if screen is None:
            shown.clear()
            return update
        # the chops of a full update end where the compositor's cuts do
        chop_ends = [cuts[1:] for cuts in screen._compositor.cuts]
        return RecordedLayout(update, shown, chop_ends)
    if update is not None and shown is not None:
        shown.clear()  # written some other way: what it shows is not known
    return update
