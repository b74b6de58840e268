"""Quit, shutdown, the scheduler runner and the stop signals (SIGHUP, SIGTERM, SIGINT)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

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


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
async def test_stop_signals_stop_workers_and_exit_zero(port, make_app, sig):
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        os.kill(os.getpid(), sig)
        for _ in range(50):
            await pilot.pause()
            if shutdown.calls:
                break
        await done(pilot)
    assert shutdown.calls == 1
    assert app.return_code == 0
    # what the scheduler's stopping frame and log name (cli._console_stop_reason)
    cause = {signal.SIGHUP: "terminal lost: hangup"}.get(sig, sig.name)
    assert app.stop_cause == cause


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


class FakeTerminal:
    """A TerminalWatch double: a tty until ``drop()``."""

    def __init__(self) -> None:
        self.alive = True

    def drop(self) -> None:
        self.alive = False


def fake_watch(term: FakeTerminal):
    from symphony_tui.console.terminal_watch import TerminalWatch

    return TerminalWatch(
        (0, 1), isatty=lambda fd: term.alive, getppid=lambda: 4242, hung_up=lambda fd: False
    )


async def test_lost_terminal_takes_the_hangup_path(port, make_app, capsys):
    shutdown = Recorder()
    term = FakeTerminal()
    app = make_app(port, shutdown=shutdown, terminal_watch=fake_watch(term))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.check_terminal()
        await pilot.pause()
        assert shutdown.calls == 0 and app.is_running
        term.drop()
        app.check_terminal()
        await done(pilot)
    assert shutdown.calls == 1
    assert app.return_code == 0
    assert "terminal lost (fd 0 is no longer a terminal): workers stopped" in (
        capsys.readouterr().err
    )


async def test_terminal_watch_runs_on_a_timer(port, make_app):
    term = FakeTerminal()
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown, terminal_watch=fake_watch(term))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        term.drop()
        for _ in range(100):  # the 1 s check fires on its own
            await pilot.pause(0.05)
            if shutdown.calls:
                break
        await done(pilot)
    assert shutdown.calls == 1


async def test_attached_console_detaches_instead_of_stopping(port, make_app, capsys):
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown, detach_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, Confirm)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Detach" in app.screen.query_one("#dialog").border_title
        assert "keep running" in body and "stop" not in body.lower()
        await pilot.press("y")
        await done(pilot)
    assert shutdown.calls == 1 and app.return_code == 0
    assert "detached; the scheduler keeps running" in capsys.readouterr().err


async def test_remote_port_makes_the_console_detach_only(port, make_app):
    from symphony_tui.api.client import RemotePort

    remote = RemotePort("http://127.0.0.1:9")
    try:
        assert make_app(remote).detach_only
        assert not make_app(port).detach_only
        assert not make_app(remote, detach_only=False).detach_only
    finally:
        await remote.close()


def test_terminal_watch_on_a_real_pty():
    import pty
    import tty

    from symphony_tui.console.terminal_watch import TerminalWatch

    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        watch = TerminalWatch((slave,))
        assert watch.active and watch.lost() is None
        os.write(master, b"k")  # pending input is not a hang-up
        assert watch.lost() is None
        os.close(master)  # the SSH client went away
        assert watch.lost() is not None and "terminal lost" in watch.lost()
    finally:
        os.close(slave)


def test_terminal_watch_ignores_what_was_never_a_terminal():
    from symphony_tui.console.terminal_watch import TerminalWatch

    r, w = os.pipe()
    try:
        watch = TerminalWatch((r, w))
        assert not watch.active and watch.lost() is None
    finally:
        os.close(r)
        os.close(w)


def test_terminal_watch_notices_a_dead_parent():
    from symphony_tui.console.terminal_watch import TerminalWatch

    parents = iter([4242, 4242, 1])
    watch = TerminalWatch(
        (0,), isatty=lambda fd: True, getppid=lambda: next(parents), hung_up=lambda fd: False
    )
    assert watch.lost() is None
    assert "parent process 4242 exited" in watch.lost()


async def test_keys_pressed_while_detaching_run_nothing(port, make_app):
    """``q`` in an attached console with nothing running detaches at once; a key typed
    while the detach is under way (the operator's next shell command: ``/`` of a path) must
    not open the log filter on a screen that is going away (it crashed the console)."""
    port.update(running=())
    release = asyncio.Event()
    calls: list[str] = []

    async def slow_shutdown() -> None:
        calls.append("shutdown")
        await release.wait()

    app = make_app(port, shutdown=slow_shutdown, detach_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # the detach ``q`` starts, run beside the key handling (``q``'s own handler awaits
        # it, which would hold the keys below until it is done)
        app.run_worker(app.shutdown_and_exit(0, "detached"), group="lifecycle")
        await pilot.pause()
        assert app.stopping and calls == ["shutdown"]
        await pilot.press("slash", "p", "a")  # filter, pause, approve: none runs
        await pilot.pause()
        assert not app.screen.query_one("#log-filter").display
        assert port.sent == []
        release.set()
        await done(pilot)
    assert app.return_code == 0


# ------------------------------------------------------------- a scheduler that outlives us


async def test_a_lost_terminal_detaches_a_detachable_console_and_stops_nothing(port, make_app):
    shutdown = Recorder()
    term = FakeTerminal()
    app = make_app(port, shutdown=shutdown, terminal_watch=fake_watch(term), detachable=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        term.drop()
        app.check_terminal()
        await done(pilot)
    assert shutdown.calls == 0, "a lost terminal stopped the agents"
    assert app.detached == "terminal lost (fd 0 is no longer a terminal)"
    assert app.return_code == 0


async def test_sighup_detaches_a_detachable_console(port, make_app):
    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown, detachable=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(50):
            await pilot.pause()
            if app.detached:
                break
        await done(pilot)
    assert shutdown.calls == 0 and app.detached == "hangup"


@pytest.mark.parametrize(("key", "stops"), [("d", False), ("s", True)])
async def test_q_asks_stop_the_agents_or_leave_them_running_and_detach(port, make_app, key, stops):
    from symphony_tui.console.screens.modals import StopOrDetach

    shutdown = Recorder()
    app = make_app(port, shutdown=shutdown, detachable=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, StopOrDetach)
        body = str(app.screen.query_one("#dialog-body").render())
        running = len(port.snapshot().running)
        assert f"{running} agent" in body and "detach" in body
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and shutdown.calls == 0
        await pilot.press("q")
        await pilot.press(key)
        await done(pilot)
    assert shutdown.calls == (1 if stops else 0)
    assert app.detached == (None if stops else "q")
    assert app.stop_cause == ("q" if stops else None)  # escape first: no cause then
    assert app.return_code == 0


async def test_the_quit_dialog_follows_the_live_count_of_running_agents(port, make_app):
    """The stop-or-detach question counts what runs now, not what ran when it opened."""
    from textual.widgets import Button

    from symphony_tui.console.screens.modals import StopOrDetach

    running = port.snapshot().running
    assert len(running) >= 2
    app = make_app(port, shutdown=Recorder(), detachable=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        dialog = app.screen
        assert isinstance(dialog, StopOrDetach)
        port.update(running=running[:1])
        await settle(pilot)
        body = str(dialog.query_one("#dialog-body").render())
        assert body.startswith("1 agent running.")
        assert str(dialog.query_one("#stop", Button).label) == "Stop 1 agent (s)"
        port.update(running=())
        await settle(pilot)
        assert str(dialog.query_one("#stop", Button).label) == "Stop 0 agents (s)"
        await pilot.press("escape")
        await pilot.pause()


async def test_the_quit_and_stop_question_follows_the_live_count_too(port, make_app):
    running = port.snapshot().running
    app = make_app(port, shutdown=Recorder())  # a console that cannot detach
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, Confirm)
        port.update(running=running[:1])
        await settle(pilot)
        body = str(app.screen.query_one("#dialog-body").render())
        assert body == "1 worker(s) running. Quit and stop them?"
        await pilot.press("n")
        await pilot.pause()
