"""Operator approvals through the scheduler, and token accounting (spec §13.5)."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import (
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    EventKind,
    Question,
    QuestionOption,
    RunStatus,
)
from symphony_tui.domain.commands import Answer, Approve, Deny, MoveIssue
from symphony_tui.workspaces.manifest import read_manifest

from .conftest import make_issue


def command_request(n: int = 1) -> ApprovalRequest:
    return ApprovalRequest(
        id=f"ap-{n}", issue_id="", kind=ApprovalKind.COMMAND, command="rm -rf build"
    )


def make_asking_script(answers: list):
    async def script(session, prompt, turn):
        answer = await session.host.request_approval(command_request(turn))
        answers.append(answer)
        return TurnResult(TurnStatus.COMPLETED)

    return script


async def test_operator_approval_waits_and_is_answered_by_approve(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)], script=make_asking_script(answers), front="agent:\n  max_turns: 1\n"
    )
    await h.start()
    await h.settle()
    snap = h.orch.snapshot()
    assert len(snap.approvals) == 1
    approval = snap.approvals[0]
    assert approval.issue_identifier == "ABC-1" and approval.deadline_at is not None
    assert snap.running[0].status is RunStatus.WAITING_FOR_OPERATOR
    assert snap.running[0].pending_approvals == 1
    res = await h.orch.send(Approve(approval_id=approval.id, for_session=True))
    await h.settle()
    assert res.ok
    assert answers[0].decision is ApprovalDecision.ACCEPT_FOR_SESSION
    kinds = [e.kind for e in h.orch.events_since(0)]
    assert EventKind.APPROVAL_REQUESTED in kinds and EventKind.APPROVAL_RESOLVED in kinds


async def test_deny_with_message_and_cancel(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)], script=make_asking_script(answers), front="agent:\n  max_turns: 2\n"
    )
    await h.start()
    await h.settle()
    aid = h.orch.snapshot().approvals[0].id
    await h.orch.send(Deny(approval_id=aid, message="not that"))
    await h.settle()
    aid2 = h.orch.snapshot().approvals[0].id
    await h.orch.send(Deny(approval_id=aid2, cancel=True))
    await h.settle()
    assert [a.decision for a in answers] == [ApprovalDecision.DECLINE, ApprovalDecision.CANCEL]
    assert answers[0].message == "not that"


async def test_waiting_for_operator_is_never_stalled_out(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)],
        script=make_asking_script(answers),
        front="codex:\n  stall_timeout_ms: 10000\n",
    )
    await h.start()
    await h.settle()
    await h.advance(120)
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running
    assert h.orch.snapshot().running[0].status is RunStatus.WAITING_FOR_OPERATOR


async def test_unanswered_approval_is_declined_after_timeout_and_attempt_fails(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)],
        script=make_asking_script(answers),
        front="agent:\n  approval_timeout_ms: 30000\n",
    )
    await h.start()
    await h.settle()
    await h.advance(30)
    await h.settle()
    assert answers[0].decision is ApprovalDecision.DECLINE and answers[0].timed_out
    retry = h.orch.retrying["id-1"]
    assert "unanswered for 30s" in retry.entry.error


async def test_auto_policy_accepts_without_operator(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)],
        script=make_asking_script(answers),
        front="agent:\n  approvals: auto\n  max_turns: 1\n",
    )
    await h.start()
    await h.settle()
    assert answers[0].decision is ApprovalDecision.ACCEPT and answers[0].by == "auto"
    assert h.orch.snapshot().approvals == ()


async def test_deny_policy_declines_without_operator(make_harness):
    answers: list = []
    h = make_harness(
        [make_issue(1)],
        script=make_asking_script(answers),
        front="agent:\n  approvals: deny\n  max_turns: 1\n",
    )
    await h.start()
    await h.settle()
    assert answers[0].decision is ApprovalDecision.DECLINE


async def test_question_needs_an_answer_not_a_bare_approve(make_harness):
    answers: list = []

    async def ask(session, prompt, turn):
        req = ApprovalRequest(
            id="q-1",
            issue_id="",
            kind=ApprovalKind.USER_INPUT,
            questions=(
                Question(id="color", question="Which?", options=(QuestionOption(label="red"),)),
            ),
        )
        answers.append(await session.host.request_approval(req))
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=ask, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    assert not (await h.orch.send(Approve(approval_id="q-1"))).ok
    assert (await h.orch.send(Answer(approval_id="q-1", answers={"color": ("red",)}))).ok
    await h.settle()
    assert answers[0].answers == {"color": ("red",)}


async def test_unknown_tool_fails_cleanly(make_harness):
    results = []

    async def script(session, prompt, turn):
        results.append(await session.host.call_tool("no_such_tool", {}))
        results.append(await session.host.call_tool("symphony_set_issue_state", {"state": 3}))
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=script, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    assert [r.success for r in results] == [False, False]
    assert "unsupported tool" in results[0].text


async def test_token_totals_add_only_growth_across_turns_and_retries(make_harness):
    async def script(session, prompt, turn):
        # absolute thread totals, reported twice per turn (repeats must not double count)
        session.usage(100 * turn)
        session.usage(100 * turn)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=script, front="agent:\n  max_turns: 3\n")
    await h.start()
    await h.settle()
    assert h.orch.snapshot().totals.total_tokens == 300
    # Continuation retry: a new session (thread-2) starts counting from zero.
    await h.advance(1.0)
    await h.settle()
    assert h.orch.snapshot().totals.total_tokens == 600


async def test_resumed_thread_does_not_double_count_recorded_tokens(make_harness):
    async def script(session, prompt, turn):
        session.usage(1000 + 100 * len(h.backend.sessions))
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=script, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    first_total = h.orch.snapshot().totals.total_tokens
    assert first_total == 1100
    # the manifest recorded thread-1 and its totals; the next session resumes thread-1
    await h.advance(1.0)
    await h.settle()
    assert h.backend.sessions[1].thread_id == "thread-1"
    assert h.orch.snapshot().totals.total_tokens == 1200


async def test_a_thread_id_reported_by_two_issues_keeps_separate_totals(make_harness):
    from symphony_tui.domain import AgentEvent

    first_reported = asyncio.Event()

    async def script(session, prompt, turn):
        # Both issues' sessions name the same thread (a copied or reused thread id).
        session.host.emit(AgentEvent(kind=EventKind.SESSION_STARTED, data={"thread_id": "same"}))
        if "ABC-2" in prompt:
            await first_reported.wait()
            session.usage(1200)
        else:
            session.usage(1000)
            first_reported.set()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness(
        [make_issue(1), make_issue(2)],
        script=script,
        front="agent:\n  max_turns: 1\n  max_concurrent_agents: 2\n",
    )
    await h.start()
    await h.settle()
    # Issue 2's 1200 are its own: not growth over issue 1's 1000.
    assert h.orch.snapshot().totals.total_tokens == 2200
    runs = {n: read_manifest(h.ws(n))["run"]["tokens"]["total_tokens"] for n in ("ABC-1", "ABC-2")}
    assert runs == {"ABC-1": 1000, "ABC-2": 1200}


async def test_events_are_bounded_and_seq_ordered(make_harness):
    async def noisy(session, prompt, turn):
        for i in range(50):
            session.host.emit(
                __import__("symphony_tui.domain", fromlist=["AgentEvent"]).AgentEvent(
                    kind=EventKind.MESSAGE, message=f"m{i}"
                )
            )
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=noisy, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    events = h.orch.events_since(0)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)
    tail = h.orch.events_since(events[-5].seq)
    assert len(tail) == 4
    per_issue = h.orch.events_since(0, issue_id="id-1")
    assert all(e.issue_id == "id-1" for e in per_issue)
    await asyncio.sleep(0)


async def test_reattached_session_totals_are_a_baseline_not_new_usage(make_harness):
    from symphony_tui.domain import AgentEvent, TokenUsage

    async def script(session, prompt, turn):
        attached = TokenUsage(input_tokens=900, output_tokens=100, total_tokens=1000)
        session.host.emit(
            AgentEvent(
                kind=EventKind.TOKEN_USAGE,
                data={"usage": attached.model_dump(), "attached": True},
            )
        )
        session.usage(1250, output=150)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=script, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    assert h.orch.snapshot().totals.total_tokens == 250


async def test_config_error_shows_blocking_validation_and_the_rejected_reload(make_harness):
    h = make_harness([make_issue(1)], script=make_asking_script([]))
    await h.start()
    path = h.root / "WORKFLOW.md"
    path.write_text(path.read_text().replace("kind: local", "kind: jira"))
    await h.orch.tick()
    assert "jira" in h.orch.snapshot().config_error
    path.write_text(
        path.read_text()
        .replace("kind: jira", "kind: local")
        .replace("interval_ms: 30000", "interval_ms: soon")
    )
    await h.orch.tick()
    error = h.orch.snapshot().config_error
    assert "jira" in error and "interval_ms" in error


async def test_operator_commands_are_logged_against_their_issue(make_harness):
    h = make_harness([make_issue(1)], script=make_asking_script([]))
    await h.start()
    await h.settle()
    aid = h.orch.snapshot().approvals[0].id
    approved = await h.orch.send(Approve(approval_id=aid))
    assert approved.message == "ABC-1: approved"  # the decision in words, not its value
    ops = [e for e in h.orch.events_since(0) if e.kind is EventKind.OPERATOR]
    assert ops[-1].issue_identifier == "ABC-1" and ops[-1].message == "operator: approve"
    assert h.orch.snapshot().tracker_states[:2] == ("Todo", "In Progress")
    assert "Done" in h.orch.snapshot().tracker_states
    # what was asked, in words; a refusal is recorded too (events and the log file)
    again = await h.orch.send(Approve(approval_id=aid, for_session=True))
    assert not again.ok
    await h.orch.send(MoveIssue(issue_id="ABC-1", state="Done"))
    said = [e.message for e in h.orch.events_since(0) if e.kind is EventKind.OPERATOR][-3:]
    assert said == [
        "operator: approve for this session",
        "operator: approve for this session refused: that approval was already answered",
        "operator: move issue to Done",
    ]


def test_events_since_pages_oldest_first_without_gaps():
    from symphony_tui.domain import AgentEvent
    from symphony_tui.scheduler.history.eventlog import EventHistory

    log = EventHistory(ring_size=100)
    for i in range(30):
        log.append(AgentEvent(kind=EventKind.MESSAGE, message=f"m{i}"))
    seen, cursor = [], 0
    while page := log.since(cursor, limit=7):
        seen.extend(e.message for e in page)
        cursor = page[-1].seq
    assert seen == [f"m{i}" for i in range(30)]
