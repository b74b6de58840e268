"""The budget key (``b``) on a run held by its token budget: extend by a choice or a typed
amount, or stop; the worker row shows the hold. Snapshots at 80x24 and 120x36."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from symphony_tui.console.actions import parse_tokens
from symphony_tui.console.screens.modals import Choose
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.workers import worker_rows
from symphony_tui.domain import ExtendBudget, Interrupt, RunStatus
from tests.console.helpers import SIZE, done, notifications, settle
from tests.console.sample import NOW
from tests.console.test_keys import select_worker
from tests.console.test_snapshots import SIZES, shoot

WHY = "61,200 of 50,000 tokens per issue"


def hold(port, identifier: str = "DEMO-3") -> None:
    rows = [
        r.model_copy(update={"budget_reached": WHY, "status": RunStatus.WAITING_FOR_OPERATOR})
        if r.issue_identifier == identifier
        else r
        for r in port.current.running
    ]
    port.update(running=tuple(rows))


async def test_extend_by_a_choice(port, make_app):
    hold(port)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("b")
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "enter")  # the second step: 200k
        await done(pilot)
        assert port.sent == [ExtendBudget(issue_id="demo-3", tokens=200_000)]


async def test_extend_by_a_typed_amount_and_a_bad_one(port, make_app):
    hold(port)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("b", "tab", *"1.5M", "enter")
        await done(pilot)
        assert port.sent == [ExtendBudget(issue_id="demo-3", tokens=1_500_000)]
        await pilot.press("b")
        await settle(pilot)
        app.screen.query_one(Input).focus()
        await pilot.press(*"lots", "enter")
        await done(pilot)
        assert len(port.sent) == 1
        assert ("not a number of tokens: lots", "error") in notifications(app)


async def test_stop_from_the_budget_dialog_interrupts(port, make_app):
    hold(port)
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("b", "down", "down", "down", "enter")
        await done(pilot)
        assert port.sent == [Interrupt(issue_id="demo-3")]


async def test_the_budget_key_needs_a_held_run(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        assert app.check_action("budget", ()) is False
        await pilot.press("b")
        await done(pilot)
        assert not isinstance(app.screen, Choose) and port.sent == []


def test_the_worker_row_shows_the_hold(port):
    hold(port)
    rows = dict(worker_rows(port.current, NOW, Tones()))
    cells = [c.plain for c in rows["demo-3"]]
    assert "$ budget" in cells
    assert cells[-1] == f"budget reached: {WHY}"


def test_token_amounts():
    assert parse_tokens("300k") == 300_000
    assert parse_tokens(" 250,000 ") == 250_000
    assert parse_tokens("1.5M") == 1_500_000
    for bad in ("", "k", "-5", "0", "lots", "inf", "nan", "2000000000"):
        assert parse_tokens(bad) is None, bad


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_budget_dialog(port, make_app, svg_snapshot, size):
    hold(port)

    async def pick(pilot):
        await select_worker(pilot, "DEMO-3")

    assert await shoot(make_app(port), size, keys=("b",), before=pick) == svg_snapshot


async def test_a_money_budget_offers_dollars_and_takes_a_typed_amount(port, make_app):
    from symphony_tui.console.actions import parse_usd

    rows = [
        r.model_copy(
            update={
                "budget_reached": "$2.31 of $2.00 per issue",
                "status": RunStatus.WAITING_FOR_OPERATOR,
            }
        )
        if r.issue_identifier == "DEMO-3"
        else r
        for r in port.current.running
    ]
    port.update(running=tuple(rows))
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_worker(pilot, "DEMO-3")
        await pilot.press("b")
        assert isinstance(app.screen, Choose)
        await pilot.press("down", "enter")  # the second step: $5
        await done(pilot)
        await pilot.press("b", "tab", *"$2.50", "enter")
        await done(pilot)
        assert port.sent == [
            ExtendBudget(issue_id="demo-3", usd=5.0),
            ExtendBudget(issue_id="demo-3", usd=2.5),
        ]
    assert parse_usd("$1,000") == 1000.0 and parse_usd("free") is None and parse_usd("$0") is None
