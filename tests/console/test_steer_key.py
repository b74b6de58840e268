"""The steer key (``n``): a message to the selected worker's agent, and how the transcript
shows it as the operator's."""

from __future__ import annotations

import pytest

from symphony_tui.console.screens.modals import AskText
from symphony_tui.console.tones import Tones
from symphony_tui.console.transcript import Transcript
from symphony_tui.domain import AgentEvent, EventKind, Steer
from symphony_tui.domain.payloads import NoteDelivered
from symphony_tui.scheduler.port import CommandResult
from tests.console.helpers import SIZE, done, notifications, settle
from tests.console.test_keys import select_issue, select_worker
from tests.console.test_snapshots import SIZES, shoot


async def test_steer_asks_for_the_message_then_sends_it(port, make_app):
    port.reply = lambda c: CommandResult(True, "DEMO-3: sent to the agent in the running turn")
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("n")
        assert isinstance(app.screen, AskText)
        await pilot.press(*"use the staging bucket")
        await pilot.press("enter")
        await done(pilot)
        assert port.sent == [Steer(issue_id="demo-3", text="use the staging bucket")]
        assert ("DEMO-3: sent to the agent in the running turn", "information") in (
            notifications(app)
        )


async def test_steer_escape_sends_nothing(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("n")
        await pilot.press(*"never mind", "escape")
        await done(pilot)
        assert port.sent == []


async def test_steer_too_long_is_refused_with_a_reason_and_the_console_keeps_running(
    port, make_app
):
    # a pasted 9,000-character message must not raise out of the dialog and end the console
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("n")
        dialog = app.screen
        assert isinstance(dialog, AskText)
        dialog.query_one("Input").value = "x" * 9000
        await pilot.press("enter")
        await done(pilot)
        assert port.sent == []
        assert app.is_running and not isinstance(app.screen, AskText)
        assert any(
            "message not sent (9,000 characters)" in text and severity == "error"
            for text, severity in notifications(app)
        )
        await pilot.press("n")  # and the key still works
        assert isinstance(app.screen, AskText)


async def test_steer_needs_a_running_worker(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        running = {r.issue_id for r in app.snapshot.running}
        idle = next(i.identifier for i in app.snapshot.issues if i.issue_id not in running)
        await select_issue(pilot, idle)
        assert app.check_action("steer", ()) is False
        await pilot.press("n")
        await done(pilot)
        assert not isinstance(app.screen, AskText)
        assert port.sent == []


def test_a_steered_message_reads_as_the_operators_turn():
    t = Transcript(Tones())
    now = AgentEvent(
        kind=EventKind.NOTIFICATION,
        message="sent to the agent: use \x1b[31mstaging[/b]\nand rerun the tests",
        payload=NoteDelivered(steered=True),
    )
    assert t.body(now).plain == "operator → agent\nuse staging[/b]\nand rerun the tests"
    queued = AgentEvent(
        kind=EventKind.NOTIFICATION,
        message="sent to the agent: later",
        payload=NoteDelivered(steered=True, queued=True),
    )
    assert t.body(queued).plain == "operator → agent (with the next turn)\nlater"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_steer_dialog(port, make_app, svg_snapshot, size):
    async def pick(pilot):
        await select_worker(pilot, "DEMO-3")

    assert await shoot(make_app(port), size, keys=("n",), before=pick) == svg_snapshot
