"""Usage a backend did not report is "not reported", never zero as if measured: the run,
the issue and project totals, the usage ledger across a restart, ``/api/v1/state``,
``/metrics`` and the token budgets (scheduler/usage/tokens.py)."""

from __future__ import annotations

import asyncio
import json

import httpx
from prometheus_client.parser import text_string_to_metric_families

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.metrics import render
from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import hold_usage
from symphony_tui.domain import AgentEvent, EventKind, RunningRow, Snapshot, TokenUsage
from symphony_tui.domain.payloads import TokenReport
from symphony_tui.scheduler.usage.book import IssueUsage, RunUsage, UsageBook, decode, encode_issue
from symphony_tui.scheduler.usage.ledger import UsageLedger
from symphony_tui.workspaces.manifest import read_manifest
from symphony_tui.workspaces.recovery import recovered_from

from .conftest import T0, make_issue

ONE_TURN = "agent:\n  max_turns: 1\n"


def _by_identifier(snapshot: Snapshot) -> dict[str, RunningRow]:
    return {r.issue_identifier: r for r in snapshot.running}


def _report(session, usage: TokenUsage, *, attached: bool = False) -> None:
    session.host.emit(
        AgentEvent(kind=EventKind.TOKEN_USAGE, payload=TokenReport(usage=usage, attached=attached))
    )


async def test_a_live_run_without_a_report_reads_not_reported_and_its_tokens_null(make_harness):
    forever = asyncio.Event()

    async def script(session, prompt, turn):
        if "ABC-1" in prompt:
            session.usage(500, output=100)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1), make_issue(2)], script=script)
    await h.start()
    await h.settle()
    snap = h.orch.snapshot()
    rows = _by_identifier(snap)
    assert rows["ABC-1"].usage_reported and rows["ABC-1"].tokens.total_tokens == 500
    assert not rows["ABC-2"].usage_reported
    state = {r["issue_identifier"]: r for r in snap.state_payload()["running"]}
    assert state["ABC-1"]["tokens"] == {
        "input_tokens": 400,
        "output_tokens": 100,
        "total_tokens": 500,
    }
    assert state["ABC-2"]["tokens"] is None  # not {"total_tokens": 0, ...}
    assert snap.state_payload()["codex_totals"]["runs_not_reported"] == 0

    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url) as client:
            body = (await client.get("/api/v1/state")).json()
    finally:
        await api.stop()
    served = {r["issue_identifier"]: r["tokens"] for r in body["running"]}
    assert served["ABC-2"] is None and served["ABC-1"]["total_tokens"] == 500
    await h.orch.shutdown()


async def test_finished_runs_without_a_report_are_counted_per_issue_and_project(make_harness):
    async def script(session, prompt, turn):
        if "ABC-1" in prompt:
            session.usage(700, output=200)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1), make_issue(2)], script=script, front=ONE_TURN)
    await h.start()
    await h.settle()
    assert not h.orch.running
    snap = h.orch.snapshot()
    assert snap.totals.total_tokens == 700
    assert snap.runs_not_reported == 1
    assert h.orch.ledger.unreported_by_issue == {"id-2": 1}
    assert snap.state_payload()["codex_totals"]["runs_not_reported"] == 1
    await h.orch.shutdown()
    # The run manifest says so too: a recovered workspace does not show 0 as measured.
    for identifier, reported in (("ABC-1", True), ("ABC-2", False)):
        manifest = read_manifest(h.ws(identifier))
        assert manifest["run"]["usage_reported"] is reported
        recovered = recovered_from(h.ws(identifier), manifest)
        assert recovered is not None and recovered.usage_reported is reported


async def test_zero_totals_and_a_reattached_baseline_are_not_a_report(make_harness):
    """A report of all zeros (an OpenHands server whose metrics hold no counts) and the
    totals of a re-attached session (a baseline) measure nothing for this run; the first
    report with growth does."""
    go_on = asyncio.Event()

    async def script(session, prompt, turn):
        if "ABC-1" in prompt:
            _report(session, TokenUsage(cost_usd=0.0))
        else:
            _report(session, TokenUsage(input_tokens=90, total_tokens=90), attached=True)
            await go_on.wait()
            session.usage(150, input_tokens=120, output=30)
        return await session.wait_interrupt()

    h = make_harness([make_issue(1), make_issue(2)], script=script)
    await h.start()
    await h.settle()
    rows = _by_identifier(h.orch.snapshot())
    assert not rows["ABC-1"].usage_reported and not rows["ABC-2"].usage_reported
    go_on.set()
    await h.settle()
    rows = _by_identifier(h.orch.snapshot())
    assert not rows["ABC-1"].usage_reported
    assert rows["ABC-2"].usage_reported and rows["ABC-2"].tokens.total_tokens == 60
    await h.orch.shutdown()


async def test_a_run_ended_before_any_usage_event_stays_not_reported_after_a_crash(
    make_harness, tmp_path
):
    """Abandoned mid-turn (as after ``kill -9``) before its backend reported usage: the
    restarted scheduler counts it as a run not reported, per issue and per project."""
    path = tmp_path / "state" / "usage.jsonl"
    forever = asyncio.Event()

    async def silent(session, prompt, turn):
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=silent, usage=UsageLedger(path))
    await first.start()
    await first.advance(3.0)  # checkpointed, then abandoned
    assert first.orch.usage.wait_written()
    marks = [json.loads(line) for line in path.read_text().splitlines()]
    assert marks and all(m["reported"] is False for m in marks if m["kind"] == "run")

    async def measured(session, prompt, turn):
        session.usage(300, output=50)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    second = make_harness([make_issue(1)], script=measured, usage=UsageLedger(path))
    await second.start()
    await second.settle()
    snap = second.orch.snapshot()
    assert snap.runs_not_reported == 1 and snap.totals.total_tokens == 300
    (row,) = snap.running
    assert row.usage_reported
    assert row.issue_total_tokens == 300 and row.issue_runs_not_reported == 1
    first.orch.usage.close()
    await second.orch.shutdown()
    third = UsageLedger(path)
    loaded = third.open()  # compacted: the count lives on in the issue record
    third.close()
    assert loaded.unreported == {"id-1": 1} and loaded.tokens.total_tokens == 300


def test_the_ledger_records_keep_the_runs_not_reported_through_compaction():
    book = UsageBook()
    zero = TokenUsage()
    book.apply(RunUsage("r1", "id-1", "ABC-1", zero, 4.0, True, reported=False))
    priced = TokenUsage(total_tokens=9, cost_usd=0.5)
    book.apply(RunUsage("r2", "id-1", "ABC-1", priced, 2.0, True))
    book.apply(RunUsage("r3", "id-1", "ABC-1", zero, 1.0, False, reported=False))
    assert book.per_issue()["id-1"].unreported == 2
    lines = book.compact(live={"r3"})
    assert decode(lines[0]) == IssueUsage("id-1", "ABC-1", priced, 6.0, 2, {}, 1)
    assert book.per_issue()["id-1"].unreported == 2
    # a count above the runs is clamped; an older record without it reads 0
    base = IssueUsage("id-2", "ABC-2", zero, 1.0, 1, {}, 1)
    assert decode(encode_issue(base)) == base
    raw = b'{"kind":"issue","issue_id":"i","issue_identifier":"A","seconds":1,"tokens":{},'
    assert decode(raw + b'"runs":2,"unreported":5}').unreported == 2
    assert decode(raw + b'"runs":2}').unreported == 0


async def test_budgets_cannot_trip_on_usage_that_was_not_reported(make_harness):
    budget = "agent:\n  max_tokens_per_attempt: 1\n  max_tokens_per_issue: 1\n"
    forever = asyncio.Event()

    async def silent(session, prompt, turn):
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=silent, front=budget)
    await h.start()
    await h.settle()
    run = h.orch.running["id-1"]
    assert run.usage_unreported
    assert h.orch.state.budgets.over(run, h.orch.state.settings.agent) is None
    assert h.orch.state.budgets.needed(run, h.orch.state.settings.agent).none
    (row,) = h.orch.snapshot().running
    assert row.budget_reached is None and not row.usage_reported
    await h.orch.shutdown()


# ---------------------------------------------------------------------------- /metrics


def _samples(snapshot: Snapshot) -> dict[tuple[str, tuple], float]:
    text = render(lambda: snapshot).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _row(identifier: str, *, reported: bool, total: int = 0) -> RunningRow:
    return RunningRow(
        issue_id=identifier.lower(),
        issue_identifier=identifier,
        state="Todo",
        tokens=TokenUsage(input_tokens=total, total_tokens=total),
        usage_reported=reported,
    )


def test_metrics_count_runs_without_usage_instead_of_emitting_zeros():
    nothing_measured = Snapshot(
        generated_at=T0, running=(_row("ABC-1", reported=False),), runs_not_reported=2
    )
    got = _samples(nothing_measured)
    assert not [k for k in got if k[0] == "symphony_tokens_total"]
    assert got[("symphony_runs_usage_not_reported_total", ())] == 2
    assert got[("symphony_running_workers_usage_not_reported", ())] == 1

    mixed = Snapshot(
        generated_at=T0,
        running=(_row("ABC-1", reported=False), _row("ABC-2", reported=True, total=40)),
        totals=TokenUsage(input_tokens=40, total_tokens=40),
        runs_not_reported=1,
    )
    got = _samples(mixed)
    assert got[("symphony_tokens_total", (("kind", "total"),))] == 40
    assert got[("symphony_runs_usage_not_reported_total", ())] == 1
    assert got[("symphony_running_workers_usage_not_reported", ())] == 1

    idle = _samples(Snapshot(generated_at=T0))  # nothing ran: zero is a measured zero
    assert idle[("symphony_tokens_total", (("kind", "total"),))] == 0
    assert idle[("symphony_runs_usage_not_reported_total", ())] == 0


def test_the_stream_holds_a_rows_report_flag_with_its_tokens():
    """Counts are published at most once a second (api/stream.py): the flag goes with
    them, so a held row never shows its old zeros as measured."""
    before = Snapshot(generated_at=T0, running=(_row("ABC-1", reported=False),))
    after = Snapshot(generated_at=T0, running=(_row("ABC-1", reported=True, total=50),))
    doc = json.loads(after.model_dump_json())
    assert hold_usage(json.loads(before.model_dump_json()), doc)
    (row,) = doc["running"]
    assert row["usage_reported"] is False and row["tokens"]["total_tokens"] == 0
