"""The inbox serves control before agent traffic, so control is never starved: a command
or an approval answer sent while agent events are queued is applied before them; agent
events keep their order among themselves. No timing is measured: the order is read from
the event history's sequence numbers."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import AgentEvent, ApprovalKind, ApprovalRequest, EventKind
from symphony_tui.domain.commands import Approve, PauseDispatch
from symphony_tui.scheduler.inbox import Barrier, Inbox, Reload, Tick
from symphony_tui_testing.scripted_backend import hang

from .conftest import make_issue

FLOOD = 1_500


async def ask_then_hang(session, prompt, turn):
    request = ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="ls")
    await session.host.request_approval(request)
    return await session.wait_interrupt()


def _flood(session, n: int = FLOOD) -> None:
    for i in range(n):
        session.host.emit(AgentEvent(kind=EventKind.MESSAGE, message=f"line {i}"))


def _seqs(h, before: int):
    events = h.orch.events_since(before, limit=100_000, issue_id="id-1")
    flood = [e for e in events if e.kind is EventKind.MESSAGE]
    ops = [e for e in events if e.kind is EventKind.OPERATOR]
    return flood, ops


def test_the_inbox_serves_its_control_lane_first_and_keeps_each_lane_in_order():
    inbox = Inbox()
    a, b, c = Tick(), Reload(), Barrier()
    inbox.post(a)
    inbox.post(b)
    inbox.post_control(c)
    assert [inbox.take(), inbox.take(), inbox.take(), inbox.take()] == [c, a, b, None]


async def test_readers_wait_for_room_past_the_high_water_mark_and_control_does_not():
    inbox = Inbox(high_water=10, low_water=4)
    for _ in range(9):
        inbox.post(Tick())
    await inbox.room()  # under the mark: one yield, no wait
    inbox.post(Tick())
    waiting = asyncio.ensure_future(inbox.room())
    await asyncio.sleep(0)
    assert not waiting.done()
    inbox.post_control(Barrier())  # control has no bound
    assert isinstance(inbox.take(), Barrier)
    for _ in range(5):  # 10 -> 5 queued: still above the low-water mark
        inbox.take()
        await asyncio.sleep(0)
    assert not waiting.done()
    inbox.take()  # 4 queued
    await asyncio.sleep(0)
    assert waiting.done()
    late = asyncio.ensure_future(inbox.room())  # room again: no wait
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert late.done()


async def test_a_command_sent_during_a_flood_is_applied_before_the_queued_agent_events(
    make_harness,
):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    before = h.orch.events.last_seq
    _flood(session)
    await asyncio.sleep(0)  # the loop starts on the flood (one batch), then the command
    result = await h.orch.send(PauseDispatch(paused=True))
    assert result.ok
    await h.orch.barrier()
    flood, _ = _seqs(h, before)
    assert [e.message for e in flood] == [f"line {i}" for i in range(FLOOD)]  # nothing lost
    # Not global: the PauseDispatch event has no issue. Find it in the ring instead.
    op = next(
        e
        for e in h.orch.events_since(before, limit=100_000)
        if e.kind is EventKind.OPERATOR and "pause dispatch" in e.message
    )
    applied_before = sum(1 for e in flood if e.seq < op.seq)
    # it jumped the queue: most of the flood, queued before it, was applied after it
    assert applied_before < FLOOD // 2
    assert flood[-1].seq > op.seq
    assert h.orch.snapshot().dispatch_paused


async def test_an_approval_answer_is_applied_before_agent_events_queued_earlier(make_harness):
    h = make_harness([make_issue(1)], script=ask_then_hang)
    await h.start()
    await h.settle()
    [approval] = h.orch.snapshot().approvals
    session = h.backend.sessions[0]
    before = h.orch.events.last_seq
    _flood(session)
    result = await h.orch.send(Approve(approval_id=approval.id))
    assert result.ok
    await h.orch.barrier()
    flood, ops = _seqs(h, before)
    [approve] = [e for e in ops if e.message == "operator: approve"]
    resolved = next(
        e
        for e in h.orch.events_since(before, limit=100_000, issue_id="id-1")
        if e.kind is EventKind.APPROVAL_RESOLVED
    )
    assert len(flood) == FLOOD
    # the answer precedes the whole flood; the session took it (its note of the answer)
    # while most of the flood was still queued
    assert approve.seq < flood[0].seq
    assert resolved.seq < flood[FLOOD // 2].seq
    assert not h.orch.snapshot().approvals


async def test_a_turn_that_ends_is_applied_after_the_events_of_that_turn(make_harness):
    # The worker waits for its session's queued events before it acts on the turn's end,
    # so token usage reported at the very end of a turn is counted and saved.
    async def burst_then_complete(session, prompt, turn):
        _flood(session, 200)
        session.usage(700, output=70)
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    h = make_harness([make_issue(1)], script=burst_then_complete, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    await h.until(lambda: not h.orch.running)
    await h.orch.barrier()
    snap = h.orch.snapshot()
    assert snap.totals.total_tokens == 700
    ended = [e for e in h.orch.events_since(0, limit=100_000, issue_id="id-1")]
    kinds = [e.kind for e in ended]
    assert kinds.index(EventKind.RUN_ENDED) > max(
        i for i, k in enumerate(kinds) if k is EventKind.MESSAGE
    )


async def test_runs_that_end_together_cost_one_workspace_rescan_not_one_each(make_harness):
    # The rescan reads every workspace's manifests; once per ended run it would hold the
    # loop for seconds when fifty runs end together.
    from symphony_tui.domain import RunOutcome, RunStatus
    from symphony_tui.scheduler.inbox import WorkerEnded
    from symphony_tui.scheduler.run import Ending, Run

    h = make_harness([])
    await h.start()
    await h.settle()
    scans = []
    real = h.orch.workspaces.recover
    h.orch.workspaces.recover = lambda *hosts: scans.append(1) or real(*hosts)
    for n in range(5):
        run = Run(
            issue=make_issue(n, state="In Progress"),
            attempt=None,
            backend="codex",
            started_at=h.clock.now(),
            started_mono=0.0,
            last_event_mono=0.0,
        )
        h.orch._inbox.post(WorkerEnded(run, Ending(RunOutcome.FAILED, RunStatus.FAILED, "x")))
    await h.orch.barrier()
    await h.until(lambda: h.orch._scans.task is None and scans)
    assert len(scans) == 1
    assert len(h.orch.retrying) == 5  # each ended run was still applied


def test_a_runs_queued_inputs_are_taken_out_in_order_and_the_others_keep_theirs():
    from symphony_tui.scheduler.inbox import AgentTraffic, SessionFacts
    from symphony_tui.scheduler.run import Run

    def run_of(n: int) -> Run:
        return Run(
            issue=make_issue(n, state="In Progress"),
            attempt=None,
            backend="codex",
            started_at=None,
            started_mono=0.0,
            last_event_mono=0.0,
        )

    mine, other = run_of(1), run_of(2)
    inbox = Inbox(busy_mark=4)
    queued = []
    for i in range(6):
        queued.append(AgentTraffic(other, AgentEvent(kind=EventKind.MESSAGE, message=f"o{i}")))
        queued.append(AgentTraffic(mine, AgentEvent(kind=EventKind.MESSAGE, message=f"m{i}")))
    queued.append(SessionFacts(mine, {"thread_id": "th"}))
    tick = Tick()
    for item in [*queued, tick]:
        inbox.post(item)
    assert inbox.busy
    assert inbox.take_of(mine) == [i for i in queued if i.run is mine]  # in their order
    assert inbox.take_of(mine) == []
    rest = [inbox.take() for _ in range(7)]
    assert inbox.take() is None
    assert rest == [*(i for i in queued if i.run is other), tick]  # in theirs
    assert not inbox.busy


async def test_an_approval_behind_a_flood_goes_after_its_sessions_events_and_before_the_flood(
    make_harness,
):
    # Two sessions: the second floods the main lane; the first reports a few events, then
    # asks for an approval. The approval is applied after the first session's own events
    # (nothing of a session overtakes what it reported before asking) and before the
    # flood queued ahead of them. Order from sequence numbers, no timing.
    h = make_harness([make_issue(1), make_issue(2)], script=hang)
    await h.start()
    await h.settle()
    by_issue = {s.host.issue.id: s for s in h.backend.sessions}
    asking, flooding = by_issue["id-1"], by_issue["id-2"]
    before = h.orch.events.last_seq
    for i in range(FLOOD):
        flooding.host.emit(AgentEvent(kind=EventKind.MESSAGE, message=f"flood {i}"))
    for i in range(5):
        asking.host.emit(AgentEvent(kind=EventKind.MESSAGE, message=f"mine {i}"))
    request = ApprovalRequest(id="ap-9", issue_id="", kind=ApprovalKind.COMMAND, command="ls")
    answer = asyncio.ensure_future(asking.host.request_approval(request))
    await h.until(lambda: h.orch.snapshot().approvals)
    await h.orch.barrier()
    events = h.orch.events_since(before, limit=100_000)
    mine = [e for e in events if e.issue_id == "id-1" and e.kind is EventKind.MESSAGE]
    flood = [e for e in events if e.issue_id == "id-2" and e.kind is EventKind.MESSAGE]
    [asked] = [e for e in events if e.kind is EventKind.APPROVAL_REQUESTED]
    assert [e.message for e in mine] == [f"mine {i}" for i in range(5)]
    assert [e.message for e in flood] == [f"flood {i}" for i in range(FLOOD)]  # nothing lost
    assert mine[-1].seq < asked.seq  # after what its session reported before asking
    assert sum(1 for e in flood if e.seq < asked.seq) < FLOOD // 2  # ahead of the flood
    [approval] = h.orch.snapshot().approvals
    assert (await h.orch.send(Approve(approval_id=approval.id))).ok
    assert (await answer).decision.value == "accept"
