"""Token budgets (``agent.max_tokens_per_attempt`` / ``max_tokens_per_issue``): crossing one
interrupts the turn and holds the run until the operator extends or stops it
(scheduler/usage/budgets.py)."""

from __future__ import annotations

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import EventKind, RunStatus
from symphony_tui.domain.commands import ExtendBudget, Interrupt, Rerun
from symphony_tui_testing.scripted_backend import hang

from .conftest import make_issue


async def spend(session, prompt, turn):
    """Each turn reports 1,500 more tokens, then waits to be interrupted (turn 1) or ends."""
    session.usage(1500 * turn, output=100)
    if turn == 1:
        return await session.wait_interrupt()
    return TurnResult(TurnStatus.COMPLETED)


BUDGET = "agent:\n  max_turns: 2\n  max_tokens_per_attempt: 1000\n"


async def test_crossing_the_budget_interrupts_and_holds_the_run(make_harness):
    h = make_harness([make_issue(1)], script=spend, front=BUDGET)
    await h.start()
    await h.settle()

    run = h.orch.running["id-1"]
    session = h.backend.sessions[0]
    assert session.interrupted.is_set()  # the turn was interrupted, the run is kept
    assert run.budget_reached == "1,500 of 1,000 tokens per attempt"
    assert run.status is RunStatus.WAITING_FOR_OPERATOR
    (row,) = h.orch.snapshot().running
    assert row.budget_reached == "1,500 of 1,000 tokens per attempt"
    warned = [e for e in h.orch.events_since(0) if e.kind is EventKind.WARNING]
    assert any(e.message.startswith("budget reached: 1,500 of 1,000") for e in warned)
    # a held run is waiting for the operator: never stalled out
    await h.advance(400)
    await h.settle()
    assert "id-1" in h.orch.running and session.turns == 1


async def test_an_extension_lets_the_run_go_on_and_too_little_is_refused(make_harness):
    h = make_harness([make_issue(1)], script=spend, front=BUDGET)
    await h.start()
    await h.settle()

    short = await h.orch.send(ExtendBudget(issue_id="ABC-1", tokens=100))
    assert not short.ok and "at least 501 more" in short.message
    result = await h.orch.send(ExtendBudget(issue_id="ABC-1", tokens=5000))
    assert result.ok, result.message
    await h.settle()
    session = h.backend.sessions[0]
    assert session.turns == 2
    assert "Continue working on ABC-1" in session.prompts[1]
    assert not h.orch.running  # the second turn was the last (max_turns 2)


async def test_stopping_a_held_run_holds_the_issue_as_budget_reached(make_harness):
    h = make_harness([make_issue(1)], script=spend, front=BUDGET)
    await h.start()
    await h.settle()

    result = await h.orch.send(Interrupt(issue_id="id-1"))
    assert result.ok
    await h.settle()
    assert not h.orch.running and "id-1" in h.orch.state.held
    assert h.backend.sessions[0].turns == 1
    ended = [e for e in h.orch.events_since(0) if e.kind is EventKind.WARNING]
    assert ended
    stopped = [e.message for e in h.orch.events_since(0) if "stopped by operator" in e.message]
    assert stopped and "budget reached" in stopped[0]


async def test_no_continuation_turn_after_the_issue_left_the_active_states(make_harness):
    h = make_harness([make_issue(1)], script=spend, front=BUDGET)
    await h.start()
    await h.settle()

    h.tracker.set_state("id-1", "Done")  # moved while the run waited for the operator
    result = await h.orch.send(ExtendBudget(issue_id="id-1", tokens=5000))
    assert result.ok
    await h.settle()
    assert h.backend.sessions[0].turns == 1
    assert not h.orch.running and h.orch.completed == ["ABC-1"]


async def test_an_issue_over_its_budget_is_held_before_its_next_attempts_first_turn(make_harness):
    front = "agent:\n  max_turns: 1\n  max_tokens_per_issue: 1000\n"

    async def spend_once(session, prompt, turn):
        session.usage(1500, output=100)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=spend_once, front=front)
    await h.start()
    await h.settle()
    # the turn ended as the budget was crossed: held after it, not ended
    run = h.orch.running["id-1"]
    assert run.budget_reached == "1,500 of 1,000 tokens per issue"
    assert h.backend.sessions[0].turns == 1
    await h.orch.send(Interrupt(issue_id="id-1"))
    await h.settle()
    assert not h.orch.running
    await h.orch.send(Rerun(issue_id="id-1"))
    await h.settle()
    # a new attempt: the issue's tokens are still over, so no turn starts
    again = h.orch.running["id-1"]
    assert again.budget_reached == "1,500 of 1,000 tokens per issue"
    assert h.backend.sessions[-1].turns == 0


async def test_extend_is_refused_for_a_run_not_held_by_a_budget(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    result = await h.orch.send(ExtendBudget(issue_id="id-1", tokens=1000))
    assert not result.ok and "not held by a budget" in result.message


async def test_a_budget_crossed_by_the_turn_that_finished_the_issue_holds_nothing(make_harness):
    # the agent moved its issue to Done and crossed the budget in the same turn: holding it
    # would keep a worker slot forever (reconcile leaves an agent's own move to the worker)
    async def finish_over_budget(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        session.usage(1500, output=100)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish_over_budget, front=BUDGET)
    await h.start()
    await h.settle()
    assert h.backend.sessions[0].turns == 1
    assert not h.orch.running and h.orch.completed == ["ABC-1"]


async def test_an_extension_survives_a_restart(make_harness, tmp_path):
    """The ledger keeps the issue's tokens across a restart; the operator's extension is
    kept too (the workspace's run manifest), so the next process does not hold the issue
    again at once for tokens the operator already allowed."""
    from symphony_tui.scheduler.usage.ledger import UsageLedger

    front = "agent:\n  max_turns: 1\n  max_tokens_per_issue: 1000\n"
    path = tmp_path / "state" / "usage.jsonl"

    async def spend_once(session, prompt, turn):
        session.usage(1500, output=100)
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=spend_once, front=front, usage=UsageLedger(path))
    await first.start()
    await first.settle()
    assert first.orch.running["id-1"].budget_reached == "1,500 of 1,000 tokens per issue"
    assert (await first.orch.send(ExtendBudget(issue_id="ABC-1", tokens=5000))).ok
    await first.settle()
    assert not first.orch.running
    await first.orch.shutdown()

    async def spend_more(session, prompt, turn):
        session.usage(100, output=10)
        return await session.wait_interrupt()

    second = make_harness([make_issue(1)], script=spend_more, front=front, usage=UsageLedger(path))
    await second.start()
    await second.settle()
    assert second.orch.ledger.by_issue["id-1"].total_tokens == 1600  # 1,500 kept + 100 now
    run = second.orch.running["id-1"]
    assert run.budget_reached is None and second.backend.sessions[0].turns == 1
    await second.orch.shutdown()
