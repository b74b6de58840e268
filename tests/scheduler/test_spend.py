"""Spend in money: the pricing table (config/pricing.py), a run's cost as its tokens are
counted (scheduler/usage/tokens.py), runs "not reported" and of an "unknown model", the
money budgets (scheduler/usage/budgets.py) and a crash that must not pay twice."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.pricing import ModelPrice, default_table, lookup
from symphony_tui.config.workflow import load_workflow
from symphony_tui.domain import EventKind, TokenUsage
from symphony_tui.domain.commands import ExtendBudget
from symphony_tui.scheduler.usage.ledger import UsageLedger

from .conftest import make_issue, write_workflow

# gpt-5.1-codex in the shipped table: $1.25 input, $0.125 cached input, $10 output
MILLION = 1_000_000


def test_a_price_counts_cached_input_and_reasoning_at_their_own_rates():
    price = ModelPrice(input=2, cached_input=0.5, output=8, reasoning=16)
    used = TokenUsage(
        input_tokens=MILLION, cached_input_tokens=MILLION // 4, output_tokens=MILLION // 2,
        reasoning_tokens=MILLION // 4, total_tokens=MILLION * 3 // 2,
    )  # fmt: skip
    # 750k x $2 + 250k x $0.5 + 250k x $8 + 250k x $16
    assert used and price.cost(used) == pytest.approx(1.5 + 0.125 + 2 + 4)
    plain = ModelPrice(input=2, output=8)  # cached defaults to input, reasoning to output
    assert plain.cost(used) == pytest.approx(2 + 4)


def test_lookup_takes_the_operators_table_first_then_the_shipped_one():
    table = default_table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.as_of)
    assert table.models["gpt-5.1-codex"].input == 1.25
    mine = {"gpt-5.1-codex": ModelPrice(input=1, output=2)}
    assert lookup(mine, "GPT-5.1-codex").input == 1  # the operator's entry wins
    assert lookup({}, "openai/gpt-5.1-codex").input == 1.25  # provider prefix dropped
    assert lookup(mine, "mystery-model") is None
    assert lookup(mine, None) is None


def test_a_backends_own_cost_counts_unless_the_table_prices_the_model_or_it_is_zero():
    from symphony_tui.scheduler.usage.tokens import TokenLedger

    ledger = TokenLedger()
    reported = TokenUsage(input_tokens=MILLION, total_tokens=MILLION, cost_usd=0.3)
    assert ledger.report("s1", reported, 0.0).cost_usd == 0.3  # OpenCode, OpenHands
    price = ModelPrice(input=2, output=8)
    assert ledger.report("s2", reported, 0.0, price=price).cost_usd == 2.0  # the table wins
    free = reported.model_copy(update={"cost_usd": 0.0})
    assert ledger.report("s3", free, 0.0).cost_usd is None  # no price, not free
    assert ledger.totals.cost_usd == pytest.approx(2.3)


@pytest.mark.parametrize(
    ("front", "said"),
    [
        ("pricing:\n  gpt-x: {input: -1, output: 2}\n", "pricing.gpt-x.input"),
        ("pricing:\n  gpt-x: {input: 1}\n", "pricing.gpt-x.output"),
        ("pricing:\n  gpt-x: {input: 1, output: 2, inptu: 3}\n", "pricing.gpt-x.inptu"),
        ("pricing:\n  gpt-x: {input: 1, output: 2, currency: EUR}\n", "pricing.gpt-x.currency"),
        ("pricing:\n  gpt-x: {input: true, output: 2}\n", "pricing.gpt-x.input"),
        ("pricing: [1, 2]\n", "pricing"),
        ("pricing:\n  gpt-x: {input: 1e300, output: 2}\n", "pricing.gpt-x.input"),
        (
            "pricing:\n  GPT-X: {input: 1, output: 2}\n  gpt-x: {input: 2, output: 4}\n",
            "'GPT-X' and 'gpt-x'",
        ),
        ("pricing:\n  ' ': {input: 1, output: 2}\n", "a model name is empty"),
        ("agent:\n  max_spend_per_issue_usd: 0\n", "agent.max_spend_per_issue_usd"),
        ("agent:\n  max_spend_per_attempt_usd: true\n", "agent.max_spend_per_attempt_usd"),
    ],
)
def test_bad_pricing_and_money_budgets_are_one_line_errors(tmp_path: Path, front, said):
    path = write_workflow(tmp_path, front)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    assert said in caught.value.message and "\n" not in caught.value.message


def test_a_written_price_loads(tmp_path: Path):
    path = write_workflow(tmp_path, "pricing:\n  My-Model: {input: 3, output: 15, currency: USD}\n")
    settings = load_workflow(path).settings
    assert settings.pricing["my-model"].cached_input == 3


def _report(session, input_tokens, output, cached=0):
    session.usage(input_tokens + output, input_tokens=input_tokens, output=output, cached=cached)


async def test_a_priced_run_shows_its_spend_per_turn_run_issue_and_project(make_harness):
    forever = asyncio.Event()

    async def script(session, prompt, turn):
        _report(session, MILLION * turn, 100_000 * turn, cached=MILLION // 2 * turn)
        if turn == 2:
            await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=script, front="agent:\n  max_turns: 3\n")
    h.backend.model = "gpt-5.1-codex"
    await h.start()
    await h.settle()
    # per turn: 500k x 1.25 + 500k x 0.125 + 100k x 10 = 0.625 + 0.0625 + 1.0
    (row,) = h.orch.snapshot().running
    assert row.model == "gpt-5.1-codex" and row.spend == "priced"
    assert row.spend_usd == pytest.approx(2 * 1.6875)
    assert row.turn_spend_usd == pytest.approx(1.6875)
    assert row.issue_spend_usd == pytest.approx(2 * 1.6875)
    body = h.orch.snapshot().state_payload()
    assert body["running"][0]["spend"]["usd"] == pytest.approx(3.375)
    assert body["codex_totals"]["spend_usd"] == pytest.approx(3.375)
    assert body["codex_totals"]["runs_unpriced"] == 0


async def test_an_unknown_model_is_unknown_never_zero(make_harness):
    async def script(session, prompt, turn):
        _report(session, 1000, 100)
        return TurnResult(TurnStatus.COMPLETED)

    front = "agent:\n  max_turns: 1\n  max_spend_per_attempt_usd: 0.5\n"
    h = make_harness([make_issue(1)], script=script, front=front)
    h.backend.model = "mystery-model"
    await h.start()
    await h.settle()
    snap = h.orch.snapshot()
    assert not snap.running  # the money budget could not hold it
    assert snap.totals.total_tokens == 1100 and snap.totals.cost_usd is None
    assert snap.runs_unpriced == 1
    assert snap.state_payload()["codex_totals"]["spend_usd"] is None
    warned = [e.message for e in h.orch.events_since(0) if e.kind is EventKind.WARNING]
    assert any("mystery-model has no price" in m for m in warned)
    (ended,) = [e.payload for e in h.orch.events_since(0) if e.kind is EventKind.RUN_ENDED]
    assert ended.spend == "unknown model" and ended.spend_usd is None
    assert ended.model == "mystery-model" and ended.tokens.total_tokens == 1100


async def test_a_run_without_a_usage_report_is_not_reported_not_free(make_harness):
    forever = asyncio.Event()

    async def silent(session, prompt, turn):
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    front = "agent:\n  max_spend_per_attempt_usd: 0.01\n"
    h = make_harness([make_issue(1)], script=silent, front=front)
    h.backend.model = "gpt-5.1-codex"
    await h.start()
    await h.settle()
    (row,) = h.orch.snapshot().running
    assert row.spend == "not reported" and row.spend_usd is None and row.turn_spend_usd is None
    assert row.budget_reached is None
    assert h.orch.snapshot().state_payload()["running"][0]["spend"]["status"] == "not reported"


async def test_a_money_budget_holds_the_run_and_an_extension_in_dollars_lets_it_go_on(
    make_harness,
):
    async def spend(session, prompt, turn):
        _report(session, MILLION * turn, 0)  # $1.25 a turn
        if turn == 1:
            return await session.wait_interrupt()
        return TurnResult(TurnStatus.COMPLETED)

    front = "agent:\n  max_turns: 2\n  max_spend_per_issue_usd: 1\ncodex:\n  model: gpt-5.1-codex\n"
    h = make_harness([make_issue(1)], script=spend, front=front)
    await h.start()
    await h.settle()
    run = h.orch.running["id-1"]
    assert run.budget_reached == "$1.25 of $1.00 per issue"
    await h.settle()
    row = h.orch.snapshot().state_payload()["running"][0]  # what a headless operator polls
    assert row["budget_reached"] == "$1.25 of $1.00 per issue"
    assert h.backend.sessions[0].interrupted.is_set()
    short = await h.orch.send(ExtendBudget(issue_id="ABC-1", tokens=5000))
    assert not short.ok and "at least $0.26 more" in short.message
    enough = await h.orch.send(ExtendBudget(issue_id="ABC-1", usd=5))
    assert enough.ok and "$5.00" in enough.message
    await h.settle()
    assert h.backend.sessions[0].turns == 2
    manifest = json.loads((h.ws("ABC-1") / ".symphony" / "run.json").read_text())
    assert manifest["budget_extra_usd"] == 5
    await h.settle()
    ended = [e.payload for e in h.orch.events_since(0) if e.kind is EventKind.RUN_ENDED]
    assert ended[-1].spend == "priced" and ended[-1].spend_usd == pytest.approx(2.5)


def test_an_extension_names_tokens_or_dollars():
    with pytest.raises(ValueError, match="tokens or usd"):
        ExtendBudget(issue_id="x")
    assert ExtendBudget(issue_id="x", usd=1.5).tokens == 0
    for amount in ({"usd": True}, {"tokens": True}):  # never $1 or 1 token
        with pytest.raises(ValueError, match="not true/false"):
            ExtendBudget.model_validate({"issue_id": "x", **amount})


async def test_a_resumed_thread_is_priced_once_across_a_crash(make_harness, tmp_path):
    """The thread read 1M input tokens when the scheduler died and 1.5M once resumed: the
    spend is that of 1.5M ($1.875), in the snapshot and in the ledger file."""
    path = tmp_path / "state" / "usage.jsonl"
    forever = asyncio.Event()
    front = "codex:\n  model: gpt-5.1-codex\n"

    async def first_turn(session, prompt, turn):
        _report(session, MILLION, 0)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=first_turn, usage=UsageLedger(path), front=front)
    await first.start()
    await first.advance(3.0)  # checkpointed, then abandoned: no shutdown
    assert first.orch.snapshot().totals.cost_usd == pytest.approx(1.25)
    assert first.orch.usage.wait_written()

    async def resumed(session, prompt, turn):
        _report(session, MILLION * 3 // 2, 0)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    second = make_harness([make_issue(1)], script=resumed, usage=UsageLedger(path), front=front)
    await second.start()
    await second.settle()
    await second.advance(2.0)
    assert second.orch.snapshot().totals.cost_usd == pytest.approx(1.875)
    assert second.orch.ledger.by_issue["id-1"].cost_usd == pytest.approx(1.875)
    assert second.orch.usage.wait_written()
    again = UsageLedger(path)
    loaded = again.open()
    again.close()
    assert loaded.tokens.cost_usd == pytest.approx(1.875)
    first.orch.usage.close()
    await second.orch.shutdown()


def test_metrics_carry_the_priced_spend_and_count_the_unpriced_runs():
    from prometheus_client.parser import text_string_to_metric_families

    from symphony_tui.api.metrics import render
    from symphony_tui.domain import RunningRow, Snapshot

    from .conftest import T0

    def samples(snapshot: Snapshot) -> dict[tuple[str, tuple], float]:
        text = render(lambda: snapshot).decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    priced = RunningRow(issue_id="a", issue_identifier="ABC-1", state="Todo", spend_usd=0.75)
    unknown = RunningRow(
        issue_id="b", issue_identifier="ABC-2", state="Todo", spend="unknown model"
    )
    got = samples(
        Snapshot(
            generated_at=T0,
            running=(priced, unknown),
            totals=TokenUsage(total_tokens=9, cost_usd=1.5),
            runs_unpriced=2,
        )
    )
    assert got[("symphony_spend_usd_total", ())] == 1.5
    assert got[("symphony_runs_unpriced_total", ())] == 2
    spend = {k[1]: v for k, v in got.items() if k[0] == "symphony_run_spend_usd"}
    assert [dict(k)["issue"] for k in spend] == ["ABC-1"] and list(spend.values()) == [0.75]
    nothing_priced = samples(Snapshot(generated_at=T0, totals=TokenUsage(total_tokens=9)))
    assert not [k for k in nothing_priced if k[0] == "symphony_spend_usd_total"]
