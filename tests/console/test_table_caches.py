"""DataTable render caches under churn: rows of ended workers and every cell
update leave rendered rows, lines and cells behind; the keyed tables keep only a few
screens' worth. Counts only, never time."""

from __future__ import annotations

from symphony_tui.console.widgets.keyed_table import KeyedTable, cache_bounds
from tests.console.helpers import SIZE, settle
from tests.console.test_footer_churn import churn

STEPS = 40


async def test_churning_rows_keep_table_render_caches_bounded(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for step in range(STEPS):
            churn(port, step)
            await settle(pilot)
            await pilot.press("down" if step % 2 else "up")
            await settle(pilot)
        tables = list(app.screen.query(KeyedTable))
        assert len(tables) >= 2
        for table in tables:
            lines, cells = cache_bounds(table.size.height, len(table.columns))
            assert table.row_count > 0
            assert len(table._line_cache) <= lines
            assert len(table._row_render_cache) <= lines
            assert len(table._row_renderable_cache) <= lines
            assert len(table._cell_render_cache) <= cells
            assert 0 < lines * len(table.columns) == cells < 10000  # below DataTable's own


def test_cache_bounds_follow_the_height():
    assert cache_bounds(10, 8) == (90, 720)
    assert cache_bounds(0, 8) == (50, 400)
    assert cache_bounds(20, 3)[1] == 3 * cache_bounds(20, 3)[0]
