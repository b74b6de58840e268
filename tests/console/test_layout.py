"""The main screen's height split (``layout``) and moving the table cursor with home/end."""

from __future__ import annotations

import pytest

from symphony_tui.console.layout import MIN_BOTTOM, MIN_TABLE, table_heights, tables_height
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.workers import WorkersTable
from symphony_tui.domain import IssueRow
from tests.console.helpers import settle


@pytest.mark.parametrize(
    ("total", "rows"),
    [
        ((17, 6, 3), (11, 6)),  # the workers fit in half: exactly what they need
        ((17, 6, 30), (9, 8)),  # the issues fit in half instead
        ((17, 30, 30), (9, 8)),  # neither fits: an even split
        ((13, 6, 3), (7, 6)),
    ],
)
def test_max_min_fair_table_heights(total, rows):
    assert table_heights(*total) == rows


@pytest.mark.parametrize("total", range(0, 40))
@pytest.mark.parametrize(("a", "b"), [(0, 0), (6, 3), (3, 200), (200, 3), (200, 200)])
def test_table_heights_always_add_up_and_keep_a_row_each(total, a, b):
    top, bottom = table_heights(total, a, b)
    assert top + bottom == total and top >= 0 and bottom >= 0
    if total >= 2 * MIN_TABLE:
        assert top >= MIN_TABLE and bottom >= MIN_TABLE


def test_tables_take_what_they_need_up_to_a_share():
    assert tables_height(34, 5, 2) == 2 * 3 + 5 + 2  # few rows: the log gets the rest
    assert tables_height(34, 60, 3) == 20  # many: 60 % of the height
    assert tables_height(14, 60, 60) == 14 - MIN_BOTTOM
    assert tables_height(3, 1, 1) == 0


def _many_issues(port, n: int) -> None:
    rows = tuple(
        IssueRow(issue_id=f"x-{i}", identifier=f"X-{i}", title=f"issue {i}", state="Todo")
        for i in range(n)
    )
    port.update(issues=port.current.issues + rows)


# the issues showed 5 and 2 rows with the even split
@pytest.mark.parametrize(("size", "shown"), [((120, 36), 12), ((80, 24), 5)])
async def test_many_issues_get_the_larger_share(port, make_app, size, shown):
    _many_issues(port, 40)
    app = make_app(port)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await settle(pilot)
        issues = app.screen.query_one(IssuesTable)
        workers = app.screen.query_one(WorkersTable)
        assert issues.scrollable_content_region.height - 1 >= shown  # minus the header
        assert workers.outer_size.height == 3 + len(port.current.running)


async def test_home_and_end_move_the_cursor(port, make_app):
    _many_issues(port, 40)
    app = make_app(port)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("1", "end")
        table = app.screen.query_one(IssuesTable)
        assert table.selected_key == "x-39"
        assert app.screen.selected_issue_id() == "x-39"  # what m / r act on
        await pilot.press("home")
        assert table.selected_key == port.current.issues[0].issue_id
