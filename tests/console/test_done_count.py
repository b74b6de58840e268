"""The header's done count: completed issues that are not running or retrying again."""

from __future__ import annotations

from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.status import status_text
from symphony_tui.domain import Snapshot
from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.fleet.merge import merge, parts_of
from tests.console.helpers import SIZE, plain, settle
from tests.console.sample import NOW


def _again(snap: Snapshot) -> Snapshot:
    """The sample with DEMO-1 (running) and DEMO-2 (retrying) completed once before."""
    return snap.model_copy(update={"completed": ("DEMO-0", "DEMO-1", "DEMO-2")})


def test_an_issue_running_or_retrying_again_is_not_counted_done(port):
    snap = _again(port.snapshot())
    assert [r.issue_identifier for r in snap.running] == ["DEMO-1", "DEMO-3"]
    assert [r.issue_identifier for r in snap.retrying] == ["DEMO-2"]
    assert "✓ 1 done" in status_text(snap, NOW, Tones()).plain


def test_a_fleet_counts_by_project_an_identifier_running_elsewhere_stays_done(port):
    running = _again(port.snapshot())
    idle = running.model_copy(update={"running": (), "retrying": ()})
    projects = (ProjectRow(name="api", target="a"), ProjectRow(name="web", target="w"))
    fleet = merge([parts_of("api", running), parts_of("web", idle)], projects)
    assert "api/DEMO-1" in fleet.completed and "web/DEMO-1" in fleet.completed
    # api: DEMO-0 only; web: all three (its DEMO-1 and DEMO-2 do not run)
    assert "✓ 4 done" in status_text(fleet, NOW, Tones()).plain


async def test_the_header_counts_a_rerun_issue_once_it_is_done_again(port, make_app):
    port.current = _again(port.current)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "✓ 1 done" in plain(app.screen.query_one("#status-line").render())
        port.current = port.current.model_copy(update={"running": (), "retrying": ()})
        await settle(pilot)
        assert "✓ 3 done" in plain(app.screen.query_one("#status-line").render())
