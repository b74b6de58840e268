"""Recovered workspaces: re-attach / rerun (honest about which, and why not), remove
(asks first, refused while claimed), copy the path."""

from __future__ import annotations

from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.screens.recovered import RecoveredScreen, rerun_plan
from symphony_tui.console.widgets.keyed_table import KeyedTable
from symphony_tui.domain import RemoveWorkspace, Rerun
from tests.console.helpers import SIZE, done, footer_keys, notifications, plain, settle
from tests.console.sample import sample_snapshot


async def open_recovered(pilot, key: str) -> RecoveredScreen:
    await pilot.press("w")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, RecoveredScreen)
    assert screen.query_one("#recovered", KeyedTable).select_key(key)
    await settle(pilot)
    return screen


def test_rerun_plan_modes():
    s = sample_snapshot()
    by_key = {w.key: w for w in s.recovered}
    assert rerun_plan(by_key["DEMO-2"], s).mode == "reattach"
    assert "thr-2" in rerun_plan(by_key["DEMO-2"], s).why
    assert rerun_plan(by_key["DEMO-5"], s).mode == "rerun"
    unknown = rerun_plan(by_key["DEMO-9"], s)
    assert unknown.mode == "unknown" and not unknown.allowed
    other_backend = s.model_copy(update={"backend": "openhands"})
    assert rerun_plan(by_key["DEMO-2"], other_backend).mode == "rerun"
    running = by_key["DEMO-2"].model_copy(update={"issue_id": "demo-1"})
    assert rerun_plan(running, s).mode == "running"
    blocked = by_key["DEMO-5"].model_copy(update={"issue_id": "demo-4"})
    assert rerun_plan(blocked, s).mode == "blocked"
    finished = s.model_copy(update={"completed": ("demo-5",)})
    done = rerun_plan(by_key["DEMO-5"], finished)
    assert done.mode == "done" and not done.allowed and "move it" in done.why


async def test_reattach_when_a_thread_is_recorded_and_the_issue_is_known(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_recovered(pilot, "DEMO-2")
        assert footer_keys(app)["r"] == ("Re-attach", True)
        detail = plain(screen.query_one("#recovered-detail").render())
        # labels share one column, at least a space wider than "hook after_create"
        column = detail.splitlines()[0].index("/ws/DEMO-2")
        for line in detail.splitlines():
            assert line[column - 1] == " " and line[column] != " ", line
        assert "hook after_create ok" in " ".join(detail.split())
        assert "r: rerun resumes thread thr-2" in detail
        await pilot.press("r")
        await done(pilot)
        assert port.sent == [Rerun(issue_id="demo-2")]


async def test_rerun_without_a_recorded_session(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_recovered(pilot, "DEMO-5")
        assert footer_keys(app)["r"] == ("Rerun", True)
        await pilot.press("r")
        await done(pilot)
        assert port.sent == [Rerun(issue_id="demo-5")]


async def test_unknown_issue_explains_why_no_rerun(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_recovered(pilot, "DEMO-9")
        assert "r" not in footer_keys(app)  # hidden; the detail says why
        detail = plain(screen.query_one("#recovered-detail").render())
        assert "unavailable: DEMO-9 is not among the tracker's active issues" in detail
        assert "process_exited" in detail and "/ws/DEMO-9" in detail
        await pilot.press("r")
        await done(pilot)
        assert port.sent == []


async def test_running_only_keys_are_hidden_here(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_recovered(pilot, "DEMO-9")
        keys = footer_keys(app)
        assert "i" not in keys and "s" not in keys
        assert keys["x"] == ("Remove", True) and keys["y"] == ("Copy path", True)


async def test_remove_asks_first_then_sends(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_recovered(pilot, "DEMO-9")
        await pilot.press("x")
        assert isinstance(app.screen, Confirm)
        assert "before_remove" in plain(app.screen.query_one("#dialog-body").render())
        await pilot.press("n")
        await done(pilot)
        assert port.sent == []
        await pilot.press("x")
        await pilot.press("y")
        await done(pilot)
        assert port.sent == [RemoveWorkspace(issue_identifier="DEMO-9")]
        assert ("remove_workspace accepted", "information") in notifications(app)


async def test_remove_disabled_while_the_issue_is_claimed(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_recovered(pilot, "DEMO-2")  # retrying
        assert screen.check_action("remove_workspace", ()) is False
        await pilot.press("x")
        await done(pilot)
        assert not isinstance(app.screen, Confirm)
        assert port.sent == []


async def test_copy_path(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_recovered(pilot, "DEMO-9")
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == "/ws/DEMO-9"
        assert any("copied /ws/DEMO-9" in m for m, _ in notifications(app))
        assert port.sent == []


async def test_the_last_run_column_shows_every_status_word_whole_at_80x24(port, make_app):
    workspaces = tuple(
        w.model_copy(update={"status": status})
        for w, status in zip(
            port.current.recovered, ("interrupted", "timed_out", "succeeded"), strict=True
        )
    )
    port.update(recovered=workspaces)
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_recovered(pilot, "DEMO-9")
        table = screen.query_one("#recovered", KeyedTable)
        strips = table.render_lines(table.region.reset_offset)
        lines = ["".join(segment.text for segment in strip) for strip in strips]
        for word in ("✗ interrupted", "✗ timed out", "✓ succeeded"):
            assert any(word in line for line in lines), (word, lines)
