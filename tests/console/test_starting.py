"""The console's first frame comes before its scheduler is built (console.starting):
the order of paint and build, keys pressed while it builds, a build that fails, a quit while
it builds. No timing asserts: each test orders events with an ``asyncio.Event`` it holds."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from symphony_tui.console.starting import (
    STARTING_MESSAGE,
    STARTING_STATUS,
    Started,
    StartFailed,
)
from symphony_tui.domain import Refresh
from tests.console.helpers import SIZE, done, notifications, settle


class Start:
    """A ``start`` the test releases: it records when it was called and what the screen
    showed then, then waits for ``release`` (or fails with ``fail``)."""

    def __init__(self, app_port, *, fail: str | None = None) -> None:
        self.port = app_port
        self.fail = fail
        self.release = asyncio.Event()
        self.events: list[str] = []
        self.app = None
        self.status_at_start: str | None = None
        self.runs = 0
        self.shutdowns = 0

    async def __call__(self) -> Started:
        self.events.append("start")
        status = self.app.screen.query_one("#status-line", Static)
        self.status_at_start = str(status.render())
        await self.release.wait()
        if self.fail is not None:
            raise StartFailed(self.fail)
        return Started(
            self.port,
            runner=self.run,
            shutdown=self.shutdown,
            notices=["unread setting: foo"],
            messages=[("HTTP API", "token shown once")],
        )

    async def run(self) -> None:
        self.runs += 1  # and returns: the tests' workers all finish (``done``)

    async def shutdown(self) -> None:
        self.shutdowns += 1


def _recording_paints(app, events: list[str]) -> None:
    real = app._display

    def display(screen, renderable) -> None:
        if renderable is not None and "paint" not in events:
            events.append("paint")
        real(screen, renderable)

    app._display = display


def _status(app) -> str:
    return str(app.screen.query_one("#status-line", Static).render())


async def test_the_first_frame_is_painted_before_the_scheduler_is_built(port, make_app):
    start = Start(port)
    app = make_app(None, start=start)
    start.app = app
    _recording_paints(app, start.events)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        while "start" not in start.events:
            await pilot.pause()
        assert start.events[:2] == ["paint", "start"]
        assert start.status_at_start == STARTING_STATUS
        assert app.starting and app.snapshot is None
        app.tick()  # nothing to show yet: the refresh skips, no "snapshot failed"
        assert not [m for m, _ in notifications(app) if "snapshot" in m]
        start.release.set()
        await done(pilot)
        await settle(pilot)
        assert not app.starting and app.port is port
        assert app.snapshot is port.current
        assert _status(app) != STARTING_STATUS and "running" in _status(app)
        assert start.runs == 1
        shown = [m for m, _ in notifications(app)]
        assert "unread setting: foo" in shown and "token shown once" in shown


async def test_keys_pressed_while_starting_are_refused_with_a_message(port, make_app):
    start = Start(port)
    app = make_app(None, start=start)
    start.app = app
    async with app.run_test(size=SIZE) as pilot:
        while "start" not in start.events:
            await pilot.pause()
        for key in ("R", "p", "r", "2", "j", "enter", "i", "a", "d", "v", "escape", "?", "escape"):
            await pilot.press(key)
        await pilot.pause()
        assert app.is_running
        # R (refresh) and p (pause dispatch) are refused with a message (Textual shows
        # identical toasts once); the keys that need a selection have none to act on
        assert (STARTING_MESSAGE, "error") in notifications(app) or (
            STARTING_MESSAGE,
            "warning",
        ) in notifications(app)
        assert port.sent == []  # nothing reached a scheduler, nothing was queued for later
        start.release.set()
        await done(pilot)
        await settle(pilot)
        await pilot.press("R")  # once started, the same key reaches the scheduler
        await done(pilot)
        assert port.sent == [Refresh()]


async def test_a_failed_build_closes_the_console_with_its_one_line_reason(port, make_app):
    reason = "workflow_parse_error: WORKFLOW.md front matter: mapping values are not allowed"
    start = Start(port, fail=reason)
    app = make_app(None, start=start)
    start.app = app
    async with app.run_test(size=SIZE) as pilot:
        while "start" not in start.events:
            await pilot.pause()
        start.release.set()
        await done(pilot)
        await pilot.pause()
    assert app.start_error == reason
    assert app.return_code == 1
    assert start.runs == 0 and start.shutdowns == 0


async def test_quit_while_starting_waits_for_the_build_then_shuts_it_down(port, make_app):
    start = Start(port)
    app = make_app(None, start=start)
    start.app = app
    async with app.run_test(size=SIZE) as pilot:
        while "start" not in start.events:
            await pilot.pause()
        await pilot.press("q")  # nothing is running yet: no question, it stops
        await pilot.pause()
        assert app.is_running and start.shutdowns == 0  # the build is still going
        start.release.set()
        await done(pilot)
        await pilot.pause()
    assert start.shutdowns == 1  # what was built is shut down, never left running
    assert start.runs == 0  # and the scheduler never started
    assert app.return_code == 0
