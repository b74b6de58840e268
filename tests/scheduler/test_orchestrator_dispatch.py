"""Spec §17.4: orchestrator dispatch, reconciliation and retry (plus our extensions)."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import AgentEvent, BlockerRef, ClaimState, EventKind, RunStatus
from symphony_tui.domain.commands import Interrupt, Rerun, Stop
from symphony_tui.scheduler import policy
from symphony_tui_testing.scripted_backend import hang

from .conftest import make_issue


def test_dispatch_sort_order_is_priority_then_oldest_creation_time():
    issues = [
        make_issue(1, priority=None, created_minutes=0),
        make_issue(2, priority=2, created_minutes=50),
        make_issue(3, priority=1, created_minutes=90),
        make_issue(4, priority=2, created_minutes=10),
        make_issue(5, priority=0, created_minutes=5),
    ]
    order = [i.identifier for i in policy.sort_for_dispatch(issues)]
    assert order == ["ABC-3", "ABC-4", "ABC-2", "ABC-1", "ABC-5"]


def test_priorities_1_to_4_rank_first_then_oldest_with_null_created_last():
    issues = [
        make_issue(1, priority=None, created_minutes=0),
        make_issue(2, priority=7, created_minutes=1),  # outside 1..4: the null bucket
        make_issue(3, priority=4, created_minutes=9),
        make_issue(4, priority=-1, created_minutes=2),
        make_issue(5, priority=4).model_copy(update={"created_at": None}),
        make_issue(6, priority=None).model_copy(update={"created_at": None}),
    ]
    order = [i.identifier for i in policy.sort_for_dispatch(issues)]
    assert order == ["ABC-3", "ABC-5", "ABC-1", "ABC-2", "ABC-4", "ABC-6"]


async def test_dispatchable_false_issues_are_not_eligible(make_harness):
    # The adapter's verdict is final: the scheduler reads no blockers or assignees itself.
    blocked = make_issue(
        2,
        blocked_by=(BlockerRef(id="id-9", identifier="ABC-9", state="In Progress"),),
        dispatchable=False,
    )
    free = make_issue(3, blocked_by=(BlockerRef(id="id-9", identifier="ABC-9", state=None),))
    h = make_harness([blocked, free], script=hang)
    await h.start()
    assert list(h.orch.running) == ["id-3"]
    row = next(r for r in h.orch.snapshot().issues if r.issue_id == "id-2")
    assert row.blocked and row.claim is ClaimState.UNCLAIMED


async def test_global_concurrency_limit_is_respected(make_harness):
    h = make_harness(
        [make_issue(n) for n in range(1, 6)],
        script=hang,
        front="agent:\n  max_concurrent_agents: 2\n",
    )
    await h.start()
    assert sorted(h.orch.running) == ["id-1", "id-2"]


async def test_per_state_concurrency_limit_normalizes_state_names(make_harness):
    issues = [make_issue(1), make_issue(2), make_issue(3, state="In Progress")]
    h = make_harness(
        issues, script=hang, front="agent:\n  max_concurrent_agents_by_state:\n    TODO: 1\n"
    )
    await h.start()
    assert sorted(h.orch.running) == ["id-1", "id-3"]


async def test_active_state_issue_refresh_updates_running_entry_state(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    h.tracker.set_state("id-1", "In Progress")
    await h.orch.tick()
    assert h.orch.running["id-1"].issue.state == "In Progress"
    assert h.orch.snapshot().running[0].state == "In Progress"


async def test_non_active_state_stops_running_agent_without_workspace_cleanup(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    assert h.ws("ABC-1").is_dir()
    h.tracker.set_state("id-1", "Backlog")
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    assert h.backend.sessions[0].closed
    assert h.ws("ABC-1").is_dir()
    assert "id-1" not in h.orch.retrying


async def test_terminal_state_stops_running_agent_and_cleans_workspace(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    h.tracker.set_state("id-1", "Done")
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    assert not h.ws("ABC-1").exists()


async def test_issue_missing_from_tracker_is_stopped_not_left_running(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    h.tracker.delete("id-1")
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running and "id-1" not in h.orch.retrying
    assert h.backend.sessions[0].closed
    assert h.ws("ABC-1").is_dir()  # §8.5: no longer visible is not terminal


async def test_active_but_no_longer_routable_stops_the_run_and_keeps_the_workspace(make_harness):
    h = make_harness(
        [make_issue(1, labels=("agent",)), make_issue(2, labels=("agent",))],
        script=hang,
        front="tracker:\n  kind: local\n  path: issues.yaml\n  required_labels: [agent]\n",
    )
    await h.start()
    await h.settle()
    assert sorted(h.orch.running) == ["id-1", "id-2"]
    # Still active: issue 1 is reassigned (the adapter says not dispatchable), issue 2
    # loses its required label.
    h.tracker.put(h.tracker.issues["id-1"].model_copy(update={"dispatchable": False}))
    h.tracker.put(h.tracker.issues["id-2"].model_copy(update={"labels": ()}))
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    assert h.ws("ABC-1").is_dir() and h.ws("ABC-2").is_dir()
    assert all(s.closed for s in h.backend.sessions)


async def test_reconciliation_with_no_running_issues_is_a_noop(make_harness):
    h = make_harness([])
    await h.start()
    calls_before = list(h.tracker.calls)
    await h.orch.reconcile()
    assert h.tracker.calls == calls_before


async def test_reconcile_refresh_failure_keeps_workers(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    h.tracker.fail_next("linear_api_status", count=2)
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running
    assert h.orch.snapshot().tracker_error


async def test_normal_worker_exit_schedules_a_short_continuation_retry_attempt_1(make_harness):
    h = make_harness([make_issue(1)])
    await h.start()
    await h.settle()
    assert not h.orch.running
    retry = h.orch.retrying["id-1"]
    assert retry.entry.attempt == 1 and retry.entry.continuation
    assert (retry.entry.due_at - h.clock.now()).total_seconds() == 1.0
    assert h.orch.completed == ["ABC-1"]
    # The issue is still active: the continuation dispatches it again with attempt 1.
    await h.advance(1.0)
    await h.settle()
    assert len(h.backend.sessions) == 2


async def test_continuation_turns_run_on_the_same_session_up_to_max_turns(make_harness):
    h = make_harness([make_issue(1)], front="agent:\n  max_turns: 3\n")
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    assert session.turns == 3
    assert session.prompts[0] == "Work on ABC-1"
    assert "Continue working on ABC-1" in session.prompts[1]


async def test_worker_stops_turning_when_the_issue_leaves_active_states(make_harness):
    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish)
    await h.start()
    await h.settle()
    assert h.backend.sessions[0].turns == 1
    assert h.tracker.issues["id-1"].state == "Done"
    # The worker saw Done after the turn: the claim is released without a continuation.
    assert "id-1" not in h.orch.retrying and not h.orch.running
    assert h.orch.completed == ["ABC-1"]
    await h.advance(1.0)
    await h.settle()
    assert len(h.backend.sessions) == 1


async def test_abnormal_worker_exit_increments_retries_with_10s_exponential_backoff(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="boom")

    h = make_harness([make_issue(1)], script=fail)
    await h.start()
    await h.settle()
    delays = []
    for expected_attempt in (1, 2, 3):
        retry = h.orch.retrying["id-1"]
        assert retry.entry.attempt == expected_attempt
        assert retry.entry.error == "boom"
        delay = (retry.entry.due_at - h.clock.now()).total_seconds()
        delays.append(delay)
        await h.advance(delay)
        await h.settle()
    assert delays == [10.0, 20.0, 40.0]


async def test_retry_backoff_cap_uses_configured_max_retry_backoff_ms(make_harness):
    assert policy.failure_backoff_ms(10, 300_000) == 300_000
    assert policy.failure_backoff_ms(2, 15_000) == 15_000
    assert policy.failure_backoff_ms(1, 300_000) == 10_000


async def test_retry_queue_entries_include_attempt_due_time_identifier_and_error(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="kaput")

    h = make_harness([make_issue(7)], script=fail)
    await h.start()
    await h.settle()
    row = h.orch.snapshot().retrying[0]
    assert (row.issue_identifier, row.attempt, row.error) == ("ABC-7", 1, "kaput")
    assert row.due_at > h.clock.now()


async def test_stall_detection_kills_stalled_sessions_and_schedules_retry(make_harness):
    h = make_harness([make_issue(1)], script=hang, front="codex:\n  stall_timeout_ms: 60000\n")
    await h.start()
    await h.settle()
    await h.advance(61)
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    assert h.backend.sessions[0].closed
    retry = h.orch.retrying["id-1"]
    assert retry.entry.error.startswith("stalled")


async def test_stall_counts_from_the_last_agent_event_not_the_start(make_harness):
    async def chatty(session, prompt, turn):
        for _ in range(5):
            await asyncio.sleep(0)
        return await session.wait_interrupt()

    h = make_harness([make_issue(1)], script=chatty, front="codex:\n  stall_timeout_ms: 60000\n")
    await h.start()
    await h.settle()
    await h.advance(50)
    session = h.backend.sessions[0]
    session.usage(10)  # an event at t=50 resets the stall clock
    await h.advance(30)
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running


async def test_a_model_the_backend_keeps_retrying_shows_and_still_stalls_out(make_harness):
    # codex reports "Reconnecting..." (error, willRetry) for ever while the model's port
    # refuses: the worker shows it, and those reports do not hold off stall detection.
    h = make_harness([make_issue(1)], script=hang, front="codex:\n  stall_timeout_ms: 60000\n")
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    for t in (20, 20, 20):
        await h.advance(t)
        session.host.emit(
            AgentEvent(
                kind=EventKind.ERROR,
                message="Reconnecting... waiting for network",
                data={"will_retry": True},
            )
        )
        await h.orch.barrier()  # the event is applied
        if "id-1" in h.orch.running:
            assert h.orch.snapshot().running[0].status is RunStatus.RETRYING_MODEL
    await h.advance(2)
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    error = h.orch.retrying["id-1"].entry.error
    assert error.startswith("stalled: the model was unreachable") and "Reconnecting" in error


async def test_progress_after_model_retries_is_streaming_again(make_harness):
    h = make_harness([make_issue(1)], script=hang, front="codex:\n  stall_timeout_ms: 60000\n")
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    retrying = AgentEvent(
        kind=EventKind.ERROR, message="Reconnecting...", data={"will_retry": True}
    )
    session.host.emit(retrying)
    await h.orch.barrier()
    assert h.orch.snapshot().running[0].status is RunStatus.RETRYING_MODEL
    await h.advance(50)
    session.usage(10)  # the model answered again: progress
    await h.orch.barrier()
    assert h.orch.snapshot().running[0].status is RunStatus.STREAMING_TURN
    await h.advance(30)
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running


async def test_slot_exhaustion_requeues_retries_with_explicit_error_reason(make_harness):
    async def fail_first(session, prompt, turn):
        if session.host.issue.id == "id-1":
            return TurnResult(TurnStatus.FAILED, error="first fails")
        return await session.wait_interrupt()

    h = make_harness(
        [make_issue(1)], script=fail_first, front="agent:\n  max_concurrent_agents: 1\n"
    )
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.retrying
    h.tracker.put(make_issue(2))
    await h.orch.tick()
    await h.settle()
    assert "id-2" in h.orch.running
    await h.advance(10)
    await h.settle()
    retry = h.orch.retrying["id-1"]
    assert retry.entry.error == "no available orchestrator slots"
    assert retry.entry.attempt == 2


async def test_stale_retry_timer_never_dispatches(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="x")

    h = make_harness([make_issue(1)], script=fail)
    await h.start()
    await h.settle()
    old = h.orch.retrying["id-1"]
    # Replace the entry (as a rerun would): the old timer's token is now stale.
    h.orch.retries.schedule(old.issue, 5, 100_000, error="newer")
    old_timer_fn_token = old.token
    await h.orch.retry_due("id-1", old_timer_fn_token)
    assert h.orch.retrying["id-1"].entry.attempt == 5
    assert len(h.backend.sessions) == 1


async def test_snapshot_returns_running_rows_retry_rows_token_totals_and_rate_limits(make_harness):
    h = make_harness([make_issue(1), make_issue(2)], script=hang)
    await h.start()
    await h.settle()
    h.backend.sessions[0].usage(500, output=50)
    await h.orch.barrier()
    snap = h.orch.snapshot()
    assert {r.issue_identifier for r in snap.running} == {"ABC-1", "ABC-2"}
    assert snap.totals.total_tokens == 500
    payload = snap.state_payload()
    assert payload["counts"] == {"running": 2, "retrying": 0}
    assert payload["codex_totals"]["total_tokens"] == 500
    assert "rate_limits" in payload


async def test_prompt_render_error_releases_claim_via_retry_not_blocking(make_harness):
    # renders for the load-time sample issue (which has a blocker), fails for this one
    h = make_harness([make_issue(1)], prompt="{{ issue.blocked_by[0].identifier }}")
    await h.start()
    await h.settle()
    assert not h.orch.running
    retry = h.orch.retrying["id-1"]
    assert "template_render_error" in retry.entry.error
    assert h.backend.sessions == []


async def test_launch_failure_is_retried_with_backoff(make_harness):
    h = make_harness([make_issue(1)])
    h.backend.fail_start = 1
    await h.start()
    await h.settle()
    assert "launch_failed" in h.orch.retrying["id-1"].entry.error
    await h.advance(10)
    await h.settle()
    assert len(h.backend.sessions) >= 1


async def test_before_run_hook_failure_aborts_the_attempt(make_harness):
    h = make_harness([make_issue(1)], front="hooks:\n  before_run: exit 3\n")
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying)
    assert h.backend.sessions == []
    assert "before_run" in h.orch.retrying["id-1"].entry.error


async def test_turn_timeout_fails_the_attempt(make_harness):
    h = make_harness([make_issue(1)], script=hang, front="codex:\n  turn_timeout_ms: 5000\n")
    await h.start()
    await h.settle()
    await h.advance(5)
    await h.settle()
    assert not h.orch.running
    assert "timed out" in h.orch.retrying["id-1"].entry.error


async def test_an_unanswered_interrupt_stops_the_worker_and_says_why(make_harness, monkeypatch):
    from symphony_tui.scheduler import commands

    monkeypatch.setattr(commands, "INTERRUPT_GRACE_S", 0.05)
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]

    async def never_answers() -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(session, "interrupt", never_answers)
    result = await h.orch.send(Interrupt(issue_id="id-1"))
    assert result.ok  # the turn ends either way: the worker is stopped
    assert result.message == "ABC-1: interrupt failed (no answer within 0.05 s); worker stopped"


async def test_interrupt_ends_the_run_as_cancelled_and_holds_the_issue(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    result = await h.orch.send(Interrupt(issue_id="id-1"))
    await h.settle()
    assert result.ok
    assert not h.orch.running
    assert "id-1" not in h.orch.retrying
    assert h.orch.snapshot().issues[0].note == "held by operator"
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running  # held: not re-dispatched
    await h.orch.send(Rerun(issue_id="id-1"))
    await h.settle()
    assert "id-1" in h.orch.running


async def test_stop_ends_the_worker_keeps_workspace_and_releases(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    assert (await h.orch.send(Stop(issue_id="id-1"))).ok
    await h.settle()
    assert not h.orch.running and h.backend.sessions[0].closed
    assert h.ws("ABC-1").is_dir()
    assert "id-1" not in h.orch.retrying


async def test_rerun_clears_backoff_and_dispatches_now(make_harness):
    async def fail_once(session, prompt, turn):
        if len(h.backend.sessions) == 1:
            return TurnResult(TurnStatus.FAILED, error="once")
        return await session.wait_interrupt()

    h = make_harness([make_issue(1)], script=fail_once)
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.retrying
    res = await h.orch.send(Rerun(issue_id="id-1"))
    await h.settle()
    assert res.ok and "id-1" in h.orch.running
    assert h.orch.running["id-1"].attempt == 1
    assert h.orch.running["id-1"].status is RunStatus.STREAMING_TURN


async def test_agent_moving_its_own_issue_is_not_killed_by_reconciliation(make_harness):
    gate = asyncio.Event()

    async def finish_slowly(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        await gate.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish_slowly)
    await h.start()
    await h.settle()
    await h.orch.tick()  # reconcile sees Done, set by the agent itself
    await h.settle()
    assert "id-1" in h.orch.running
    gate.set()
    await h.until(lambda: not h.orch.running)
    assert h.orch.completed == ["ABC-1"]
    assert h.ws("ABC-1").is_dir()


async def test_paused_dispatch_requeues_retries_without_using_up_attempts(make_harness):
    from symphony_tui.domain.commands import PauseDispatch

    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="boom")

    h = make_harness([make_issue(1)], script=fail)
    await h.start()
    await h.settle()
    assert h.orch.retrying["id-1"].entry.attempt == 1
    await h.orch.send(PauseDispatch(paused=True))
    await h.advance(10)
    await h.settle()
    retry = h.orch.retrying["id-1"]
    assert (retry.entry.attempt, retry.entry.error) == (1, "dispatch paused by operator")
    assert len(h.backend.sessions) == 1


async def test_agent_move_in_flight_is_not_mistaken_for_an_outside_move(make_harness):
    gate = asyncio.Event()

    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        await gate.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish)
    slow_move = asyncio.Event()
    real_move = h.tracker.move_issue

    async def move_after_reconcile(issue_id, state):
        h.tracker.set_state(issue_id, state)  # the tracker already shows it...
        await slow_move.wait()  # ...while the write is still being answered
        return await real_move(issue_id, state)

    h.tracker.move_issue = move_after_reconcile
    await h.start()
    await h.settle()
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running  # not cancelled by reconciliation
    slow_move.set()
    gate.set()
    await h.until(lambda: not h.orch.running)
    assert h.orch.completed == ["ABC-1"]


async def test_kill_agents_now_ends_agent_process_groups_without_the_event_loop(make_harness):
    import signal
    import subprocess
    from types import SimpleNamespace

    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    agent = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        h.orch.running["id-1"].session = SimpleNamespace(pid=agent.pid)
        assert h.orch.kill_agents_now() == 1
        assert agent.wait(timeout=5) == -signal.SIGKILL
    finally:
        if agent.poll() is None:
            agent.kill()


async def test_an_operator_hold_survives_a_restart(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    await h.orch.send(Interrupt(issue_id="id-1"))
    await h.settle()
    assert "id-1" in h.orch.held
    await h.orch.shutdown()
    # A new scheduler on the same workflow and workspaces (a console restart).
    again = make_harness([make_issue(1)], script=hang)
    await again.start()
    await again.settle()
    assert not again.orch.running and "id-1" in again.orch.held
    await again.orch.send(Rerun(issue_id="id-1"))
    await again.settle()
    assert "id-1" in again.orch.running
    await again.orch.shutdown()
    third = make_harness([make_issue(1)], script=hang)
    await third.start()
    await third.settle()
    assert "id-1" in third.orch.running  # the rerun cleared the recorded hold
    await third.orch.shutdown()


async def test_attempt_is_null_first_then_1_based_with_retry_kind(make_harness):
    # §12.3: the first run renders attempt null; a continuation after a normal exit is
    # attempt 1 of kind continuation; a failed run's retry counts on with kind failure.
    outcomes = iter(["complete", "fail", "hang"])

    async def script(session, prompt, turn):
        what = next(outcomes)
        if what == "complete":
            return TurnResult(TurnStatus.COMPLETED, session.turn_id)
        if what == "fail":
            return TurnResult(TurnStatus.FAILED, session.turn_id, "boom")
        return await session.wait_interrupt()

    h = make_harness(
        [make_issue(1)],
        script=script,
        front="agent:\n  max_turns: 1\n",
        prompt="attempt={{ attempt }} kind={{ retry_kind }}",
    )
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying)
    assert h.orch.retrying["id-1"].entry.retry_kind == "continuation"
    await h.advance(1)
    await h.until(lambda: "id-1" in h.orch.retrying and h.orch.retrying["id-1"].entry.attempt == 2)
    assert h.orch.retrying["id-1"].entry.retry_kind == "failure"
    retry_row = h.orch.snapshot().state_payload()["retrying"][0]
    assert (retry_row["attempt"], retry_row["retry_kind"]) == (2, "failure")
    await h.advance(20)
    await h.until(lambda: "id-1" in h.orch.running and h.backend.sessions[-1].turns == 1)
    prompts = [s.prompts[0] for s in h.backend.sessions]
    assert prompts == [
        "attempt= kind=",
        "attempt=1 kind=continuation",
        "attempt=2 kind=failure",
    ]
    running_row = h.orch.snapshot().state_payload()["running"][0]
    assert (running_row["attempt"], running_row["retry_kind"]) == (2, "failure")


async def test_a_due_retry_refreshes_its_issue_by_id_and_cleans_a_terminal_workspace(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, session.turn_id, "boom")

    h = make_harness([make_issue(1), make_issue(2)], script=fail)
    await h.start()
    await h.until(lambda: {"id-1", "id-2"} <= set(h.orch.retrying))
    assert h.ws("ABC-1").is_dir() and h.ws("ABC-2").is_dir()
    h.tracker.set_state("id-1", "Done")  # terminal while its retry waited
    h.tracker.set_state("id-2", "Backlog")  # neither active nor terminal
    h.tracker.calls.clear()
    await h.advance(10)
    # terminal: the workspace is cleaned and the claim released
    await h.until(lambda: not h.ws("ABC-1").exists() and not h.orch.retrying)
    await h.settle()
    # §8.4: each retry asks for its own issue by id, not for the whole candidate list.
    assert sorted(c for c in h.tracker.calls if c[0] == "by_ids") == [
        ("by_ids", ("id-1",)),
        ("by_ids", ("id-2",)),
    ]
    assert h.ws("ABC-2").is_dir()  # not active: released, workspace kept
    assert not h.orch.running


async def test_states_compare_trimmed_and_lowercased_on_both_sides(make_harness):
    # §4.2: the tracker's spelling is kept; configured and reported states meet trimmed
    # and lowercased.
    h = make_harness(
        [make_issue(1, state="  in PROGRESS "), make_issue(2, state="Todo")],
        script=hang,
        front=(
            "tracker:\n  kind: local\n  path: issues.yaml\n"
            "  active_states: [' In Progress ']\n  terminal_states: ['  DONE']\n"
        ),
    )
    await h.start()
    await h.settle()
    assert list(h.orch.running) == ["id-1"]
    assert h.orch.running["id-1"].issue.state == "  in PROGRESS "
    h.tracker.set_state("id-1", "done ")
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running and not h.ws("ABC-1").exists()  # terminal: cleaned


async def test_rerun_of_an_issue_in_a_terminal_state_says_why_it_is_not_eligible(make_harness):
    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish)
    await h.start()
    await h.settle()
    await h.orch.tick()
    await h.settle()
    res = await h.orch.send(Rerun(issue_id="id-1"))
    assert not res.ok and "id-1" not in h.orch.running
    assert res.message.startswith("ABC-1 not dispatched: its state 'Done' is terminal")


async def test_rerun_of_a_blocked_issue_names_its_open_blockers(make_harness):
    blocker = BlockerRef(id="id-9", identifier="ABC-9", state="In Progress")
    # The adapter marks a Todo issue with an open blocker not dispatchable (§8.2).
    issue = make_issue(2, blocked_by=(blocker,), dispatchable=False)
    h = make_harness([issue], script=hang)
    await h.start()
    res = await h.orch.send(Rerun(issue_id="id-2"))
    assert not res.ok
    assert res.message == "ABC-2 not dispatched: it is blocked by an issue not yet done (ABC-9)"


async def ran_to_done(make_harness, path):
    """A scheduler keeping its history in ``path`` that ran ABC-1, whose agent moved it to
    Done (still running: shut it down to start another on the same history)."""
    from symphony_tui.scheduler.history.eventlog import EventHistory

    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish, event_log=EventHistory(jsonl_path=path))
    await h.start()
    await h.settle()
    await h.orch.tick()
    await h.settle()
    return h


async def test_after_a_restart_the_earlier_events_and_the_done_count_are_back(
    make_harness, tmp_path
):
    from symphony_tui.scheduler.history.eventlog import EventHistory

    path = tmp_path / "state" / "events.jsonl"
    h = await ran_to_done(make_harness, path)
    assert h.orch.snapshot().completed == ("ABC-1",)
    before = [(e.seq, e.kind, e.message) for e in h.orch.events_since(0)]
    assert any(kind is EventKind.RUN_ENDED for _, kind, _ in before)
    await h.orch.shutdown()
    h.orch.events.close()
    # A new scheduler of the same project (same history file): nothing to dispatch now.
    again = make_harness([], script=hang, event_log=EventHistory(jsonl_path=path))
    await again.start()
    await again.settle()
    after = [(e.seq, e.kind, e.message) for e in again.orch.events_since(0)]
    assert after[: len(before)] == before
    assert again.orch.snapshot().completed == ("ABC-1",)
    await again.orch.shutdown()


async def test_after_a_restart_the_issues_done_before_are_listed_again_as_they_were(
    make_harness, tmp_path
):
    """The issues pane of a restarted scheduler: an issue whose run ended normally in its
    earlier life and that is in a terminal state now is listed as before the restart
    (its row, ``completed``); a terminal issue it never ran is not listed, as before."""
    from symphony_tui.scheduler.history.eventlog import EventHistory

    path = tmp_path / "state" / "events.jsonl"
    h = await ran_to_done(make_harness, path)
    rows = [(r.identifier, r.state, r.claim, r.note) for r in h.orch.snapshot().issues]
    assert rows == [("ABC-1", "Done", ClaimState.UNCLAIMED, "completed")]
    await h.orch.shutdown()
    h.orch.events.close()
    # the same project started again: the tracker has ABC-1 done, and another done issue
    done = [make_issue(1, state="Done"), make_issue(2, state="Done")]
    again = make_harness(done, script=hang, event_log=EventHistory(jsonl_path=path))
    await again.start()
    await again.settle()
    await again.orch.tick()
    await again.settle()
    assert [(r.identifier, r.state, r.claim, r.note) for r in again.orch.snapshot().issues] == rows
    await again.orch.shutdown()


async def test_a_retry_waiting_for_a_slot_takes_it_ahead_of_a_lower_priority_new_issue(
    make_harness,
):
    gate = asyncio.Event()

    async def script(session, prompt, turn):
        if "ABC-1" in prompt and len(h.backend.sessions) == 1:
            return TurnResult(TurnStatus.FAILED, error="first attempt fails")
        if "ABC-2" in prompt:
            await gate.wait()
            await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
            return TurnResult(TurnStatus.COMPLETED)
        return await session.wait_interrupt()

    h = make_harness(
        [make_issue(1, priority=1), make_issue(2, priority=2)],
        script=script,
        front="agent:\n  max_concurrent_agents: 1\n",
    )
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.retrying  # failed: backoff
    await h.orch.tick()
    await h.settle()
    assert list(h.orch.running) == ["id-2"]  # ABC-1 was not due yet
    await h.advance(10)  # ABC-1's retry fires: no slot, queued again
    await h.settle()
    assert h.orch.retrying["id-1"].entry.error == policy.NO_SLOTS_ERROR
    h.tracker.put(make_issue(3, priority=3))  # a new, less urgent issue
    gate.set()
    await h.settle()
    assert not h.orch.running  # ABC-2 is done: its slot is free
    await h.orch.tick()
    await h.settle()
    assert list(h.orch.running) == ["id-1"]  # the waiting retry, not the new ABC-3
    assert h.orch.running["id-1"].attempt == 2
    assert "id-1" not in h.orch.retrying


async def test_a_shutdown_keeps_what_ran_as_it_began_in_the_snapshot(make_harness):
    """A shutdown ends the runs before the scheduler says it has stopped: its snapshot
    keeps what ran and waited as the shutdown began (``stopping_with``), for the front ends
    that say what a stopped scheduler had."""
    h = make_harness([make_issue(1), make_issue(2)], script=hang)
    await h.start()
    await h.settle()
    assert len(h.orch.running) == 2 and h.orch.snapshot().stopping_with is None
    await h.orch.shutdown("stopped by SIGTERM")
    after = h.orch.snapshot()
    assert after.running == () and after.stopping_with == (2, 0, 0)
