"""Below 80x24 the console shows one clear message instead of broken panes."""

from __future__ import annotations

from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.screens.too_small import TooSmallScreen, too_small
from symphony_tui.console.screens.worker import WorkerScreen
from tests.console.helpers import done, settle


def _message(app) -> str:
    return str(app.screen.query_one("#too-small-text").render())


def test_the_threshold():
    assert too_small(79, 24) and too_small(80, 23) and too_small(40, 12)
    assert not too_small(80, 24) and not too_small(200, 60)


async def test_a_small_terminal_shows_the_message_and_a_larger_one_the_panes(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot)
        await settle(pilot)
        assert isinstance(app.screen, TooSmallScreen)
        assert "terminal too small (40x12)" in _message(app) and "need 80x24" in _message(app)
        await pilot.resize_terminal(79, 30)
        await settle(pilot)
        await settle(pilot)
        assert "terminal too small (79x30)" in _message(app)
        assert sum(isinstance(s, TooSmallScreen) for s in app.screen_stack) == 1
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_the_screen_underneath_is_kept(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("2", "enter")
        await settle(pilot)
        assert isinstance(app.screen, WorkerScreen)
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        await settle(pilot)
        assert isinstance(app.screen, TooSmallScreen)
        await pilot.resize_terminal(100, 30)
        await settle(pilot)
        await settle(pilot)
        assert isinstance(app.screen, WorkerScreen)


async def test_q_still_quits_when_small(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot)
        await settle(pilot)
        await pilot.press("q")  # workers run: it asks first, on top of the message
        await settle(pilot)
        assert isinstance(app.screen, Confirm)
        assert sum(isinstance(s, TooSmallScreen) for s in app.screen_stack) == 1
        await pilot.press("y")
        await done(pilot)
    assert app.return_code == 0
