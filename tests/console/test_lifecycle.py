"""Quit, shutdown, the scheduler runner and SIGHUP."""

from __future__ import annotations

import asyncio
import os
import signal

from symphony_tui.console.screens.modals import Confirm
from tests.console.helpers import SIZE, done, notifications, settle


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    async def __call__(self) -> None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("workers would not stop")


async def test_quit_with_running_workers_asks_then_awaits_shutdown(port, make_app):
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, Confirm)
        await pilot.press("n")
        await pilot.pause()
        assert app.is_running and shutdown.calls == 0
        await pilot.press("q")
        await pilot.press("y")
        await done(pilot)
    assert shutdown.calls == 1
    assert app.return_code == 0


async def test_quit_without_workers_does_not_ask(port, make_app):
    port.update(running=())
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await done(pilot)
    assert shutdown.calls == 1
    assert app.return_code == 0


async def test_failing_shutdown_exits_non_zero(port, make_app):
    port.update(running=())
    app = make_app(port, shutdown=Recorder(fail=True))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await done(pilot)
    assert app.return_code == 1


async def test_runner_failure_shows_error_and_exits_one(port, make_app, capsys):
    shutdown = Recorder()

    async def runner() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad workflow")

    app = make_app(port, runner=runner, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert app.return_code == 1
    assert "scheduler failed: ValueError: bad workflow" in capsys.readouterr().err
    assert shutdown.calls == 1


async def test_runner_runs_in_scheduler_group_and_its_end_is_reported(port, make_app):
    started = asyncio.Event()

    async def runner() -> None:
        started.set()

    app = make_app(port, runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await started.wait()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.scheduler_stopped
        assert any("scheduler stopped" in m for m, _ in notifications(app))
        assert app.is_running


async def test_sighup_stops_workers_and_exits(port, make_app):
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(50):
            await pilot.pause()
            if shutdown.calls:
                break
        await done(pilot)
    assert shutdown.calls == 1
    assert app.return_code == 0


async def test_snapshot_failure_is_a_notification_not_a_crash(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        port.snapshot_error = OSError("lost \x1b]52;c;eA==\x07state")
        await settle(pilot)
        await settle(pilot)
        errors = [m for m, s in notifications(app) if s == "error"]
        assert len(errors) == 1 and "lost state" in errors[0]
        port.snapshot_error = None
        await settle(pilot)
        assert app.is_running
