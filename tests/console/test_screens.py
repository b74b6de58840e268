"""Screens and panes: worker detail, approvals, recovered, log filter, sanitizing,
bounded log, diffing, alerts, NO_COLOR."""

from __future__ import annotations

from datetime import timedelta

from textual.coordinate import Coordinate

from symphony_tui.console.screens.approvals import ApprovalsScreen
from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.screens.modals import Choose
from symphony_tui.console.screens.worker import WorkerScreen
from symphony_tui.console.widgets.event_log import MAX_LINES, EventLogView
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.keyed_table import KeyedTable
from symphony_tui.console.widgets.workers import WorkersTable
from symphony_tui.domain import Approve, Deny, EventKind, IssueRow
from tests.console.helpers import SIZE, done, plain, settle
from tests.console.sample import NOW, ago, later


def strip_text(strip) -> str:
    return "".join(segment.text for segment in strip)


def log_lines(log) -> list[str]:
    if isinstance(log, EventLogView):
        return [line.rstrip() for line in log.plain_lines()]
    return [strip_text(line).rstrip() for line in log.lines]


async def test_enter_opens_worker_detail_with_transcript(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "enter")
        await settle(pilot)
        assert isinstance(app.screen, WorkerScreen)
        assert app.screen.issue_id == "demo-1"
        assert (0, 2000, "demo-1") in port.queries
        lines = "\n".join(log_lines(app.screen.query_one("#transcript")))
        assert "$ ls -la" in lines
        assert "✓ ls -la  exit 0" in lines
        assert "tests" in lines  # output tail
        assert "I will write the README now." in lines
        assert "± README.md" in lines
        assert "DEMO-3" not in lines
        header = plain(app.screen.query_one("#worker-header").render())
        assert "/ws/DEMO-1" in header and "thr-1" in header and "47,100" in header
        # live: a new event of this issue appears on the next tick
        port.add_event(
            EventKind.COMMAND_COMPLETED,
            "make",
            issue_id="demo-1",
            identifier="DEMO-1",
            at=NOW,
            command="make",
            exit_code=2,
            item_id="c9",
            output="\n".join(f"line {i}" for i in range(20)),
        )
        await settle(pilot)
        lines = "\n".join(log_lines(app.screen.query_one("#transcript")))
        assert "✗ make  exit 2" in lines
        assert "line 19" in lines and "line 3\n" not in lines
        # its own keys act on this worker
        await pilot.press("a")
        await done(pilot)
        assert port.sent == [Approve(approval_id="demo-1:7")]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_transcript_is_inert(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_worker("demo-3")
        await settle(pilot)
        lines = "\n".join(log_lines(app.screen.query_one("#transcript")))
        assert "Evil [bold]markup[/bold]" in lines
        assert "\x1b" not in lines


async def test_approvals_screen_oldest_first_and_keys(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        workers = app.screen.query_one(WorkersTable)
        assert "⚑ 2 pending" in str(workers.border_subtitle)
        assert "⚑ 2 approvals" in plain(app.screen.query_one("#status-line").render())
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        table = app.screen.query_one("#approvals", KeyedTable)
        assert table._order == ["demo-1:7", "demo-3:2"]  # 95 s old before 30 s old
        detail = plain(app.screen.query_one("#approval-detail").render())
        assert "pytest -q tests/" in detail and "needs network" in detail
        assert "28m25s" in detail  # time left before deadline_at
        await pilot.press("a")
        await done(pilot)
        await pilot.press("down")
        await pilot.pause()
        assert app.check_action("approve", ()) is False
        await pilot.press("d")
        await done(pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, Choose)
        await pilot.press("escape")
        await done(pilot)
        assert port.sent == [Approve(approval_id="demo-1:7"), Deny(approval_id="demo-3:2")]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_event_log_lines_and_filter(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        lines = log_lines(log)
        assert len(lines) == len(port.events)
        assert lines[0].startswith("09:47:26 DEMO-1   dispatch  dispatched")
        # filter by identifier: narrowed in the core
        await pilot.press("slash")
        await pilot.press(*"demo-3", "enter")
        await settle(pilot)
        assert port.queries[-1][2] == "demo-3"
        lines = log_lines(log)
        assert lines and all("DEMO-3" in line for line in lines)
        # words filter locally
        await pilot.press("slash")
        app.screen.query_one("#log-filter").value = "timeout"
        await pilot.press("enter")
        await settle(pilot)
        assert log_lines(log) == ["09:59:59 -        error     tracker timeout"]
        # new events that match keep arriving; others do not
        port.add_event(EventKind.ERROR, "second timeout", at=NOW)
        port.add_event(EventKind.MESSAGE, "unrelated", at=NOW)
        await settle(pilot)
        assert len(log_lines(log)) == 2
        # esc clears the filter
        await pilot.press("escape")
        await settle(pilot)
        assert len(log_lines(log)) == len(port.events)


async def test_filter_input_escape_keeps_old_filter(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zzz", "escape")
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert log.filter.text == ""
        assert len(log_lines(log)) == len(port.events)


async def test_agent_and_tracker_text_render_literally(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        issues = app.screen.query_one(IssuesTable)
        title = issues.get_cell("demo-3", "title")
        assert title.plain == "Add a cache layer [bold]red[/bold]"
        assert title.spans == []
        last = app.screen.query_one(WorkersTable).get_cell("demo-3", "last")
        assert "Looking at the cache [red]module[/red]" in last.plain
        lines = log_lines(app.screen.query_one(EventLogView))
        assert any("Evil [bold]markup[/bold]" in line for line in lines)
        svg = app.export_screenshot()
        assert "\x1b" not in svg and "ZXZpbA" not in svg


async def test_flood_is_bounded_and_coalesced(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for i in range(1500):
            port.add_event(EventKind.MESSAGE, f"chunk {i}", issue_id="demo-3", at=NOW)
        before = len(port.queries)
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert log.line_count <= MAX_LINES
        assert log_lines(log)[-1].endswith("chunk 1499")
        assert len(port.queries) - before <= 3  # a few ticks, not one query per event


async def test_tables_diff_by_key_and_keep_the_cursor(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("1")
        issues = app.screen.query_one(IssuesTable)
        issues.select_key("demo-4")
        calls, regions = [], []
        original, refresh_region = issues._set_cell, issues._refresh_region

        def spy(row_key, column_key, value, spans):
            calls.append((row_key, column_key))
            return original(row_key, column_key, value, spans)

        issues._set_cell = spy
        issues._refresh_region = lambda region: (regions.append(region), refresh_region(region))
        rows = list(port.current.issues)
        rows[4] = rows[4].model_copy(update={"title": "Tidy the changelog (v2)"})
        port.update(issues=tuple(rows), generated_at=NOW + timedelta(seconds=1))
        await settle(pilot)
        assert calls == [("demo-5", "title")]
        # only that cell's line is repainted: the region DataTable itself gives the cell
        cell = Coordinate(issues.get_row_index("demo-5"), issues.get_column_index("title"))
        assert regions == [issues._get_cell_region(cell)]
        assert issues.selected_key == "demo-4"
        # reordering / inserting keeps the cursor on the same issue
        new = IssueRow(issue_id="demo-0", identifier="DEMO-0", title="First", state="Todo")
        port.update(issues=(new, *reversed(rows)), generated_at=NOW + timedelta(seconds=2))
        await settle(pilot)
        assert issues._order[0] == "demo-0"
        assert issues.selected_key == "demo-4"
        # removal
        port.update(issues=(new,), generated_at=NOW + timedelta(seconds=3))
        await settle(pilot)
        assert issues._order == ["demo-0"] and issues.row_count == 1


async def test_unchanged_snapshot_skips_repaint(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        shown = []
        original = screen.show
        screen.show = lambda *a: (shown.append(1), original(*a))
        for _ in range(3):
            app.tick()
        assert shown == []
        port.update(generated_at=NOW + timedelta(seconds=1))
        app.tick()
        assert shown == [1]


async def test_alerts_and_paused_are_visible(port, make_app):
    port.update(
        config_error="workflow_parse_error: bad yaml\x1b[31m",
        tracker_error="linear 429 [bold]rate[/bold]",
        tracker_paused_until=later(90),
        dispatch_paused=True,
    )
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        alert = app.screen.query_one("#alert-line")
        assert alert.display
        text = plain(alert.render())
        assert "config error: workflow_parse_error: bad yaml" in text
        assert "tracker error: linear 429 [bold]rate[/bold]" in text
        assert "resumes in 1m30s" in text
        assert "DISPATCH PAUSED" in plain(app.screen.query_one("#status-line").render())
        port.update(config_error=None, tracker_error=None, tracker_paused_until=ago(1))
        await settle(pilot)
        assert not alert.display


async def test_no_color_is_honoured(port, make_app, monkeypatch):
    from textual.filter import Monochrome, NoColor

    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(port)
    assert app.no_color
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        filters = [f for f in app._filters if isinstance(f, Monochrome | NoColor)]
        assert filters
        lines = app.screen._compositor.render_strips()
        colours = set()
        for strip in lines:
            for segment in strip.apply_filter(filters[0], app.background_colors[0]):
                style = segment.style
                if style and style.color and style.color.triplet:
                    r, g, b = style.color.triplet
                    colours.add(r == g == b)
        assert colours == {True}
