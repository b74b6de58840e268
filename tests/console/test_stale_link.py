"""An attached console whose link to the scheduler is lost never shows stale data as live:
rows whose status is live read ``? unknown`` (dimmed) ``as of <age> ago``, the header and the alert line
name the lost link (never a tracker error)."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import re
from datetime import timedelta

import pytest

from symphony_tui.api.client import LinkStatus
from symphony_tui.console.starting import ATTACHED, Started
from tests.console.helpers import SIZE, notifications, settle
from tests.console.sample import NOW


class LinkedPort:
    """The sample port, attached: ``link()`` as :class:`RemotePort` has it."""

    detach_only = True

    def __init__(self, port, link: LinkStatus) -> None:
        self._port = port
        self.current_link = link

    def link(self) -> LinkStatus:
        return self.current_link

    def __getattr__(self, name):
        return getattr(self._port, name)


def screen_text(app) -> str:
    """The screen's text, from its SVG screenshot (one ``<text>`` element per styled run)."""
    svg = app.export_screenshot()
    svg = re.sub(r"<style.*?</style>", "", svg, flags=re.S)
    runs = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return "".join(html.unescape(run) for run in runs).replace("\xa0", " ")


@pytest.mark.parametrize("state", ["stale", "reconnecting"])
async def test_a_lost_link_shows_no_row_as_working(port, make_app, state):
    running = port.snapshot().running
    assert any(r.status == "streaming_turn" for r in running)  # the sample has live rows
    lost = LinkStatus(state, 19.0, "stream", "connection refused")
    linked = LinkedPort(port, lost)
    app = make_app(linked)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "working" not in text and "waiting" not in text
        assert text.count("? unknown") == len(running)
        assert text.count("as of 19s ago") == len(running)
        assert "scheduler link lost" in text
        assert "connection refused · last update 19s ago" in text
        assert "tracker error" not in text
        linked.current_link = LinkStatus("live", 0.2, "stream")  # back: live rows again
        await settle(pilot)
        await settle(pilot)
        text = screen_text(app)
        assert "working" in text and "unknown" not in text
        assert "scheduler link lost" not in text


def test_a_failed_row_keeps_its_status_while_the_link_is_lost(port):
    from symphony_tui.console.tones import Tones
    from symphony_tui.console.widgets.workers import worker_rows

    snap = port.snapshot()
    ended = snap.running[0].model_copy(update={"status": "failed"})
    snap = snap.model_copy(update={"running": (ended, *snap.running[1:])})
    rows = worker_rows(snap, snap.generated_at, Tones(), unknown_s=19.0)
    cells = [" ".join(c.plain for c in row) for _, row in rows]
    assert "✗ failed" in cells[0]
    assert all("? unknown" in c and "as of 19s ago" in c for c in cells[1:])
    assert "as of" not in cells[0]


def until_stopped(linked):
    """A runner as :meth:`RemotePort.run`: it returns once the scheduler stopped."""

    async def runner() -> None:
        while not linked.stopped:
            await asyncio.sleep(0.02)

    return runner


async def until_notified(pilot, app) -> None:
    for _ in range(50):
        await settle(pilot)
        if app._notifications:
            return


class StoppingPort(LinkedPort):
    """An attached port whose scheduler stops: as :class:`RemotePort` once its stream's
    ``stopping`` frame arrived (no live rows, ``stopped``, ``wait_stopped``)."""

    carries_stop = True

    def __init__(self, port, link: LinkStatus) -> None:
        super().__init__(port, link)
        self.sent: list = []
        self.reply = None  # a CommandResult, or None: accepted and the scheduler stops

    @property
    def stopped(self) -> bool:
        return self.current_link.state == "stopped"

    def stop_now(self, reason: str = "its console stopped it") -> None:
        at = NOW - timedelta(seconds=8)
        self.current_link = LinkStatus("stopped", 8.0, "stream", reason, stopped_at=at)

    def snapshot(self):
        snap = self._port.snapshot()
        if self.stopped:
            return snap.model_copy(update={"running": (), "retrying": (), "approvals": ()})
        return snap

    async def send(self, command, **kwargs):
        from symphony_tui.scheduler.port import CommandResult

        self.sent.append(command)
        if self.reply is not None:
            return self.reply
        self.stop_now("stopped by you@here")
        return CommandResult(True, "stopping the scheduler: 3 agent(s) end")

    async def wait_stopped(self) -> bool:
        return self.stopped


async def test_a_stopped_scheduler_is_one_line_no_live_row_and_q_just_quits(port, make_app, capsys):
    linked = StoppingPort(port, LinkStatus("live", 0.2, "stream"))
    shutdown_calls = []

    async def shutdown() -> None:
        shutdown_calls.append(1)

    app = make_app(linked, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "working" in screen_text(app)
        linked.stop_now()
        await settle(pilot)
        text = screen_text(app)
        assert "■ scheduler stopped at 09:59:52 (8s ago): its console stopped it" in text
        assert text.count("scheduler stopped at") == 1
        assert "working" not in text and "unknown" not in text and "STALE" not in text
        assert "link lost" not in text
        await pilot.press("q")  # no dialog: nothing runs there any more
        await pilot.pause()
        await app.workers.wait_for_complete()
    assert app.return_code == 0 and shutdown_calls == [1]
    err = capsys.readouterr().err
    assert "the scheduler had stopped" in err
    assert "keep" not in err and "running" not in err


async def test_a_stale_scheduler_still_asks_before_detaching(port, make_app):
    """Stale (a SIGSTOPped scheduler) is not stopped: its agents may run, ``q`` asks."""
    from symphony_tui.console.screens.modals import StopOrDetach

    linked = StoppingPort(port, LinkStatus("stale", 40.0, "stream", "read timeout"))
    app = make_app(linked, shutdown=_noop)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "scheduler stopped" not in screen_text(app)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, StopOrDetach)
        await pilot.press("escape")


async def _noop() -> None:
    return None


@pytest.mark.parametrize("accepted", [True, False])
async def test_q_in_an_attached_console_can_stop_the_agents(port, make_app, capsys, accepted):
    from symphony_tui.console.screens.modals import StopOrDetach
    from symphony_tui.domain.commands import StopScheduler
    from symphony_tui.scheduler.port import CommandResult

    linked = StoppingPort(port, LinkStatus("live", 0.2, "stream"))
    if not accepted:
        linked.reply = CommandResult(False, "control_token_required: no control token")
    app = make_app(linked, shutdown=_noop)
    running = len(port.snapshot().running)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, StopOrDetach)
        buttons = [str(b.label) for b in app.screen.query("Button")]
        assert buttons[0] == f"Stop {running} agents (s)" and buttons[1] == "Detach (d)"
        await pilot.press("s")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert linked.sent == [StopScheduler()]
        if not accepted:  # one line, and the console stays attached
            assert app.is_running
            assert any("stop refused: control_token_required" in m for m, _ in notifications(app))
            await pilot.press("q")
            await pilot.press("d")
            await pilot.pause()
            await app.workers.wait_for_complete()
    assert app.return_code == 0
    err = capsys.readouterr().err
    if accepted:
        assert "the scheduler stopped; its agents have ended" in err
    else:
        assert "detached; the scheduler keeps running" in err


async def test_a_scheduler_that_stops_while_the_approvals_are_open_says_so_there(port, make_app):
    """The approvals screen has no alert line: the stop and its reason are said on it, so
    an emptied list does not read as answered approvals."""
    linked = StoppingPort(port, LinkStatus("live", 0.2, "stream"))

    app = make_app(linked, runner=until_stopped(linked))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert "Pending approvals" in screen_text(app)
        linked.stop_now("stopped by you@here")
        await until_notified(pilot, app)
        assert [n.message for n in app._notifications] == [
            "the scheduler stopped: stopped by you@here"
        ]
        assert "Pending approvals" in screen_text(app)  # shown over the screen that is open


async def test_a_stopped_scheduler_says_how_to_attach_again_on_one_line(port, make_app):
    linked = StoppingPort(port, LinkStatus("live", 0.2, "stream"))
    app = make_app(linked)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        again = "attach again: symphony-tui /home/op/billing/WORKFLOW.md"
        at = NOW - timedelta(seconds=8)
        why = "stopped by SIGTERM from another terminal of this user, while three agents ran"
        linked.current_link = LinkStatus("stopped", 8.0, "stream", why, stopped_at=at, hint=again)
        await settle(pilot)
        text = screen_text(app)
        # the command first, the why after it: a line too wide for the terminal cuts the why
        assert f"■ scheduler stopped at 09:59:52 (8s ago) · {again} · stopped by SIG" in text
        assert "while three agents ran" not in text and "nothing runs there now" not in text
        assert app.screen.query_one("#alert-line").size.height == 1  # one line, not wrapped


async def test_the_header_says_the_console_followed_its_restarted_scheduler(port, make_app):
    moved = "re-attached: pid 4242 (http://127.0.0.1:38211)"
    linked = LinkedPort(port, LinkStatus("live", 0.2, "stream", moved=moved))
    app = make_app(linked)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert f"● live · ↻ {moved} │" in screen_text(app)


async def test_a_re_attach_replaces_the_toast_that_named_the_earlier_scheduler(port, make_app):
    linked = LinkedPort(port, LinkStatus("live", 0.2, "stream"))

    async def start() -> Started:
        return Started(
            linked,  # type: ignore[arg-type]  # a port by its attributes
            messages=[
                (ATTACHED, "this project's scheduler already runs (pid 100): attached to it."),
                ("HTTP API", "token shown once"),
            ],
        )

    def toasts() -> list[tuple[str, str]]:  # what the toasts show (not in test screenshots)
        return [(n.title, n.message) for n in app._notifications]

    app = make_app(None, start=start)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):  # the start runs after the first frame
            if app.state.port is linked:
                break
            await pilot.pause()
        await settle(pilot)
        said = [m for t, m in toasts() if t == ATTACHED]
        assert len(said) == 1 and "pid 100" in said[0]
        for pid in (200, 300):  # started again, twice: the newest toast names the newest
            linked.current_link = LinkStatus("stopped", 1.0, "stream", "stopped by SIGTERM")
            await settle(pilot)
            moved = f"re-attached: pid {pid} (http://127.0.0.1:{pid})"
            linked.current_link = LinkStatus("live", 0.2, "stream", moved=moved)
            await settle(pilot)
            await settle(pilot)
            said = [m for t, m in toasts() if t == ATTACHED]
            assert len(said) == 1 and moved in said[0], toasts()
        assert ("HTTP API", "token shown once") in toasts()  # other toasts stay
        assert "↻ re-attached: pid 300 (http://127.0.0.1:300)" in screen_text(app)


async def test_a_stopped_schedulers_hint_is_shown_whole_at_80x24(port, make_app):
    """At 80 cells the stopped line, the why and the hint (the command that attaches again)
    do not fit one line: the hint takes the rows under it instead of being cut."""
    linked = StoppingPort(port, LinkStatus("live", 0.2, "stream"))
    command = "symphony-tui /home/operator/projects/payments-service/WORKFLOW.md"
    hint = (
        "watching http://127.0.0.1:8765 for it to start there again; "
        f"elsewhere, attach again: {command}"
    )
    app = make_app(linked)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        linked.stop_now("stopped by you@laptop (SIGTERM)")
        linked.current_link = dataclasses.replace(linked.current_link, hint=hint)
        await settle(pilot)
        text = screen_text(app)
        assert "■ scheduler stopped at 09:59:52 (8s ago): stopped by you@laptop (SIGTERM)" in text
        assert "watching http://127.0.0.1:8765 for it to start there again;" in text
        assert command in text
        assert "…" not in text.split("■ scheduler stopped")[1].split("\n")[0]


class GonePort(StoppingPort):
    """An attached port whose scheduler's process ended without a ``stopping`` frame (kill
    -9): as ``FollowingPort`` then, its last rows kept and its approvals dropped."""

    def stop_now(self, reason: str = "its process no longer serves") -> None:
        at = NOW - timedelta(seconds=8)
        self.current_link = LinkStatus("stopped", 8.0, "stream", reason, stopped_at=at, gone=True)

    def snapshot(self):
        snap = self._port.snapshot()
        if self.stopped:
            return snap.model_copy(update={"approvals": (), "next_poll_at": None})
        return snap


async def test_a_scheduler_gone_without_a_word_keeps_its_runs_as_unknown(port, make_app, capsys):
    """kill -9: no stopping frame, so its agents may still run (detached ones are taken back
    when it starts again): its rows read unknown, not ended, and nothing says none runs."""
    linked = GonePort(port, LinkStatus("live", 0.2, "stream"))

    app = make_app(linked, runner=until_stopped(linked))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        linked.stop_now()
        await until_notified(pilot, app)
        text = screen_text(app)
        # what may still run first; why it is gone (the notification says it) is what is cut
        assert (
            "■ scheduler gone at 09:59:52 (8s ago) · its agents may still run; started again,"
            " it takes them back · its process"
        ) in text
        assert "nothing runs there now" not in text and "scheduler stopped" not in text
        assert "? unknown" in text and "working" not in text
        assert [n.message for n in app._notifications] == [
            "the scheduler is gone; its agents may still run: its process no longer serves"
        ]
        await pilot.press("q")  # nothing here to stop or detach from: it just leaves
        await pilot.pause()
        await app.workers.wait_for_complete()
    assert app.return_code == 0
    err = capsys.readouterr().err
    assert "the scheduler was gone; its agents may still run" in err
