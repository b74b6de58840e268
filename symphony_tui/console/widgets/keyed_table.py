"""A DataTable kept in sync with keyed rows by diffing (dolphie style).

Only changed cells are updated, and only their regions repainted (``update_cell``); columns
have fixed widths, so a long value never triggers a relayout on the hot path. Rows are
added and removed by key.
When the order of surviving rows changes the table is rebuilt once, keeping the cursor on
the same key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Row = tuple[Text, ...]

# DataTable keeps up to 1000 rendered rows / lines and 10000 rendered cells per table, keyed
# by row key and update count: with workers churning, entries of rows that ended (and of
# every cell update) pile up until those bounds, tens of MB per table. A table
# only needs what it shows, a few times over (cursor / hover variants, scrolling).
_LINES_PER_ROW_SHOWN = 4
_LINES_SPARE = 50


def cache_bounds(height: int, columns: int) -> tuple[int, int]:
    """``(lines, cells)``: how many rendered rows / lines and cells a table ``height``
    lines tall with ``columns`` columns keeps."""
    lines = _LINES_PER_ROW_SHOWN * max(height, 0) + _LINES_SPARE
    return lines, lines * max(columns, 1)


def _same(a: Text, b: Text) -> bool:
    # Text.__eq__ ignores the base style; a tone change must still repaint.
    return a is b or (a.plain == b.plain and a.style == b.style and a.spans == b.spans)


def _same_row(a: Row, b: Row) -> bool:
    return a is b or (len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True)))


class RowCache:
    """Reuse the ``Text`` of every cell whose input did not change since the last build.

    Building cells (cleaning agent text, styling) is most of a refresh's cost, and reused
    cells compare by identity in :meth:`KeyedTable.sync`, so a steady table costs a tuple
    comparison per row. ``epoch`` (e.g. the theme's tones) invalidates everything.
    """

    def __init__(self) -> None:
        self._rows: dict[str, tuple[tuple, Row]] = {}
        self._epoch: Hashable = None

    def row(
        self,
        key: str,
        inputs: tuple,
        makers: Sequence[Callable[[Any], Text]],
        epoch: Hashable = None,
    ) -> Row:
        """Cells for ``key``: ``makers[i](inputs[i])``, reusing unchanged ones."""
        if epoch != self._epoch:
            self._rows.clear()
            self._epoch = epoch
        old = self._rows.get(key)
        if old is not None and old[0] == inputs:
            return old[1]
        if old is None:
            cells = tuple(make(v) for make, v in zip(makers, inputs, strict=True))
        else:
            before, previous = old
            cells = tuple(
                previous[i] if before[i] == v else make(v)
                for i, (make, v) in enumerate(zip(makers, inputs, strict=True))
            )
        self._rows[key] = (inputs, cells)
        return cells

    def last(self, key: str) -> Row | None:
        """The cells last built for ``key``, or ``None``."""
        old = self._rows.get(key)
        return None if old is None else old[1]

    def retain(self, keys: Iterable[str]) -> None:
        """Forget rows not in ``keys`` (bounded by what is shown)."""
        keep = set(keys)
        for key in [k for k in self._rows if k not in keep]:
            del self._rows[key]


class KeyedTable(DataTable):
    """``columns``: (key, label, width) triples; ``flex`` names the one column that takes
    the width left over (at least its given width), recomputed only on resize. Feed it
    with :meth:`sync`. ``shrink`` maps columns to the least width they may give up to the
    flex column while it is narrower than its given width (in that order).

    ``home``/``end`` move the cursor to the first/last row (DataTable only scrolls
    sideways there), so a row key acts on the row the operator sees."""

    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False, id="table_first"),
        Binding("end", "scroll_bottom", "Last row", show=False, id="table_last"),
    ]

    def __init__(
        self,
        columns: Sequence[tuple[str, str, int]],
        *,
        flex: str | None = None,
        shrink: Mapping[str, int] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._column_spec = tuple(columns)
        self._flex = flex
        self._shrink = dict(shrink or {})
        self._widths: tuple[int, ...] = ()
        #: The table is being emptied: the scroll to the top that comes with it builds no
        #: rows (:meth:`scrolled`) into a table whose rows are gone.
        self._clearing = False
        self._rows: dict[str, Row] = {}
        self._order: list[str] = []
        self._bound_caches()

    def on_mount(self) -> None:
        self._set_columns(self._column_widths(0))

    def on_resize(self) -> None:
        self._bound_caches()
        self._fit_columns()

    def _bound_caches(self) -> None:
        """Size DataTable's render caches to this table's height (see
        :func:`cache_bounds`); the caches start over, as on any resize."""
        lines, cells = cache_bounds(self.size.height, len(self._column_spec))
        if self._line_cache.maxsize != lines:
            self._row_render_cache = LRUCache(lines)
            self._row_renderable_cache = LRUCache(lines)
            self._line_cache = LRUCache(lines)
            self._cell_render_cache = LRUCache(cells)

    def watch_show_vertical_scrollbar(self) -> None:
        # the scrollbar takes a column from the flex one without a Resize event
        self.call_after_refresh(self._fit_columns)

    def _fit_columns(self) -> None:
        if not self.is_mounted:
            return
        widths = self._column_widths(self.scrollable_content_region.width)
        if widths != self._widths:
            selected, cursor = self.selected_key, self.cursor_row
            self._set_columns(widths)
            rows = self.rows_for_widths() or [(k, self._rows[k]) for k in self._order]
            self._rebuild(rows, selected=selected, cursor=cursor)

    def set_column_spec(
        self, columns: Sequence[tuple[str, str, int]], shrink: Mapping[str, int] | None = None
    ) -> bool:
        """Show other columns (e.g. a host column once worker hosts are configured): the
        table starts over empty, the next :meth:`sync` fills it. False when unchanged."""
        columns = tuple(columns)
        if columns == self._column_spec:
            return False
        self._column_spec = columns
        self._shrink = dict(shrink or {})
        self._bound_caches()
        self._rows, self._order = {}, []
        if self.is_mounted:
            self._set_columns(self._column_widths(self.scrollable_content_region.width))
        return True

    def rows_for_widths(self) -> list[tuple[str, Row]] | None:
        """Rows rebuilt for new column widths, or ``None`` to keep the cells as they are
        (for tables whose cells do not depend on the widths)."""
        return None

    def _column_widths(self, available: int) -> tuple[int, ...]:
        widths = [w for _, _, w in self._column_spec]
        if self._flex is None or available <= 0:
            return tuple(widths)
        keys = [c[0] for c in self._column_spec]
        index = keys.index(self._flex)
        padding = 2 * self.cell_padding * len(widths)
        fixed = sum(w for i, w in enumerate(widths) if i != index)
        wanted = widths[index]
        widths[index] = available - fixed - padding - 1
        for key, least in self._shrink.items():
            give = min(wanted - widths[index], widths[keys.index(key)] - least)
            if give > 0:
                widths[keys.index(key)] -= give
                widths[index] += give
        widths[index] = max(widths[index], 8)
        return tuple(widths)

    def _set_columns(self, widths: tuple[int, ...]) -> None:
        self._widths = widths
        self._clear(columns=True)
        for (key, label, _), width in zip(self._column_spec, widths, strict=True):
            self.add_column(label, width=width, key=key)

    def column_width(self, key: str) -> int:
        """Cells of column ``key`` as laid out now (its given width before the first
        layout)."""
        keys = [c[0] for c in self._column_spec]
        widths = self._widths or tuple(w for _, _, w in self._column_spec)
        return widths[keys.index(key)]

    def near_view(self) -> range:
        """Row indices on screen and one screen above and below: the rows a refresh
        builds anew (see :meth:`watch_scroll_y`; the others keep their cells)."""
        height = max(self.scrollable_content_region.height, 1)
        top = int(self.scroll_y)
        return range(max(top - height, 0), top + 2 * height)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(new_value) != int(old_value) and not self._clearing:
            self.scrolled()

    def _clear(self, columns: bool = False) -> None:
        self._clearing = True
        try:
            self.clear(columns=columns)
        finally:
            self._clearing = False

    def scrolled(self) -> None:
        """The view moved: a table that builds only the rows near it
        (:meth:`near_view`) builds them now. Nothing here."""

    @property
    def selected_key(self) -> str | None:
        """Key of the row under the cursor, or ``None`` when empty."""
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    def select_key(self, key: str) -> bool:
        if key not in self._rows:
            return False
        self.move_cursor(row=self._order.index(key))
        return True

    def sync(self, rows: Sequence[tuple[str, Row]]) -> bool:
        """Make the table show ``rows`` (key, cells) in that order. Returns True when
        anything changed."""
        wanted = {k: cells for k, cells in rows}
        order = [k for k, _ in rows]
        if order == self._order and all(_same_row(self._rows[k], wanted[k]) for k in order):
            return False
        survivors = [k for k in self._order if k in wanted]
        new_keys = [k for k in order if k not in self._rows]
        if survivors != [k for k in order if k in self._rows] or (
            new_keys and order[len(survivors) :] != new_keys
        ):
            self._rebuild(rows)
            return True
        selected = self.selected_key
        for key in self._order:
            if key not in wanted:
                self.remove_row(key)
        col_keys = [c[0] for c in self._column_spec]
        spans = self._column_spans()
        for key in survivors:
            old, new = self._rows[key], wanted[key]
            for col, before, after in zip(col_keys, old, new, strict=True):
                if not _same(before, after):
                    self._set_cell(key, col, after, spans)
        for key in new_keys:
            self.add_row(*wanted[key], key=key)
        self._rows = dict(wanted)
        self._order = order
        if selected in wanted and self.selected_key != selected:
            self.move_cursor(row=order.index(selected), animate=False)
        return True

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Any,
        *,
        update_width: bool = False,
    ) -> None:
        """DataTable's ``update_cell``, repainting only the cell. DataTable's own refreshes
        the whole table, so the terminal would get every visible row again for one changed
        cell. ``_update_count`` still moves, which invalidates the render caches
        (they key their entries by it) as DataTable's does; only the cell's region is
        marked dirty, so only its line is rendered and sent. With ``update_width`` (a
        relayout) it is DataTable's own."""
        if update_width:
            super().update_cell(row_key, column_key, value, update_width=True)
            return
        row = RowKey(row_key) if isinstance(row_key, str) else row_key
        column = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        if row not in self._row_locations or column not in self._column_locations:
            super().update_cell(row, column, value)  # raises CellDoesNotExist
            return
        self._set_cell(row, column, value, self._column_spans())

    def _column_spans(self) -> list[tuple[int, int]]:
        """``(x, width)`` of each column on screen, in order (the row labels' width first)."""
        spans = []
        x = self._row_label_column_width
        for column in self.ordered_columns:
            width = column.get_render_width(self)
            spans.append((x, width))
            x += width
        return spans

    def _set_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Any,
        spans: list[tuple[int, int]],
    ) -> None:
        """Set an existing cell and mark only its line dirty. Every row of these tables is
        one line high, so the cell's region is found from its row index and ``spans``
        (:meth:`_column_spans`, taken once per sync). DataTable's own region lookup sums
        the heights of every row above and rebuilds its ordered rows after each update,
        so a tick changing many cells of a long table was quadratic in its rows."""
        row = RowKey(row_key) if isinstance(row_key, str) else row_key
        column = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        self._data[row][column] = value
        self._update_count += 1
        row_index = self._row_locations.get(row)
        column_index = self._column_locations.get(column)
        if row_index is None or column_index is None:
            return
        x, width = spans[column_index]
        y = row_index + (self.header_height if self.show_header else 0)
        self._refresh_region(Region(x, y, width, 1))

    def _rebuild(
        self,
        rows: Sequence[tuple[str, Row]],
        *,
        selected: str | None = None,
        cursor: int | None = None,
    ) -> None:
        """Show ``rows`` afresh, the cursor kept on the row it was on (``selected``,
        ``cursor``: where it was before the table was emptied, when it was already)."""
        if cursor is None:
            selected, cursor = self.selected_key, self.cursor_row
        self._clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        self._rows = {k: c for k, c in rows}
        self._order = [k for k, _ in rows]
        if selected in self._rows:
            self.move_cursor(row=self._order.index(selected), animate=False)
        elif self._order:
            self.move_cursor(row=min(cursor, len(self._order) - 1), animate=False)
