"""The workers table builds only the rows on screen and a screen either side: a busy
console with many workers pays for what can be seen, and rows scrolled into view show
the newest snapshot at once. Counts and cells only, never time."""

from __future__ import annotations

from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.keyed_table import RowCache
from symphony_tui.console.widgets.workers import WorkersTable, worker_rows
from symphony_tui.domain import RunningRow, RunStatus
from tests.console.helpers import SIZE, settle
from tests.console.sample import NOW, ago, later, sample_snapshot

LAST_EVENT = 8  # the last-event cell of a row without a project or host column


def workers(n: int, message: str) -> tuple[RunningRow, ...]:
    return tuple(
        RunningRow(
            issue_id=f"w-{i}",
            issue_identifier=f"W-{i}",
            state="In Progress",
            status=RunStatus.STREAMING_TURN,
            started_at=ago(100),
            last_event="message",
            last_message=f"{message} {i}",
        )
        for i in range(n)
    )


def test_rows_away_from_the_view_keep_their_cells_until_near_it():
    tones, cache = Tones(), RowCache()
    snap = sample_snapshot().model_copy(update={"running": workers(6, "first")})
    built = dict(worker_rows(snap, NOW, tones, cache))
    newer = snap.model_copy(update={"running": workers(7, "second")})
    rows = dict(worker_rows(newer, later(5), tones, cache, near=range(0, 2)))
    assert "second 0" in rows["w-0"][LAST_EVENT].plain  # near: built from the snapshot
    assert rows["w-1"][LAST_EVENT].plain.endswith("second 1")
    assert all(rows[f"w-{i}"] is built[f"w-{i}"] for i in range(2, 6))  # away: as before
    assert "second 6" in rows["w-6"][LAST_EVENT].plain  # never built: built wherever it is
    again = dict(worker_rows(newer, later(5), tones, cache, near=range(2, 7)))
    assert all("second" in again[f"w-{i}"][LAST_EVENT].plain for i in range(7))


async def test_rows_scrolled_into_view_show_the_newest_snapshot(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        port.update(running=workers(300, "first"))
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        assert table.row_count == 300
        assert table.near_view().stop < 300  # the test needs rows far from the view
        port.update(running=workers(300, "second"), generated_at=ago(-5))
        await settle(pilot)
        last_cell = len(table.columns) - 1
        top = table.get_row_at(0)[last_cell].plain
        bottom = table.get_row_at(299)[last_cell].plain
        assert top.endswith("second 0")
        assert bottom.endswith("first 299")  # far from the view: not built this tick
        table.focus()
        await pilot.press("end")
        await pilot.pause()
        assert table.near_view().stop >= 300
        assert table.get_row_at(299)[last_cell].plain.endswith("second 299")


async def test_a_resize_with_the_workers_scrolled_down_keeps_the_console(port, make_app):
    """New column widths clear the table, which scrolls it to the top, where the rows
    kept their cells while far from the view: the rows built for that scroll must not be
    written into the table being cleared (a resize once ended the console, and with it a
    scheduler the console runs)."""
    app = make_app(port)
    async with app.run_test(size=(100, 26)) as pilot:
        port.update(running=workers(60, "first"))
        await settle(pilot)
        await pilot.press("2", "end")
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        assert table.scroll_y > 0 and table.near_view().start > 0  # the top is far away
        port.update(running=workers(60, "second"), generated_at=ago(-5))
        await settle(pilot)  # the rows at the top keep their "first" cells
        for width in (90, 110, 80, 120):
            await pilot.resize_terminal(width, 26)
            await settle(pilot)
        assert app.is_running and app.return_code is None
        assert table.row_count == 60
        assert table.selected_key == "w-59"  # the row under the cursor is still selected
