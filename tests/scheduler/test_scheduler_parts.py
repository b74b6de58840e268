"""The orchestrator's collaborators through their own interfaces, without an orchestrator:
snapshot building (pure), the approval desk, operator holds and the session tools."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from symphony_tui.config.settings import resolve_settings
from symphony_tui.domain import (
    AgentEvent,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    ClaimState,
    EventKind,
    Question,
    QuestionOption,
    RecoveredWorkspace,
    RetryEntry,
    RunStatus,
)
from symphony_tui.scheduler.agent_tools import SET_STATE_TOOL, AgentTools
from symphony_tui.scheduler.approvals import ApprovalDesk, policy_answer
from symphony_tui.scheduler.holds import Holds
from symphony_tui.scheduler.inbox import (
    AgentTraffic,
    ApprovalExpired,
    ApprovalWithdrawn,
    IssueMoved,
    MoveIntended,
)
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.snapshots import build_snapshot
from symphony_tui.scheduler.usage.tokens import TokenLedger
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.manifest import read_manifest, update_manifest
from symphony_tui.workspaces.recovery import recovered_from
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.memory_tracker import MemoryTracker
from tests.scheduler.conftest import T0, make_issue


def _settings(tmp_path: Path):
    raw = {"tracker": {"kind": "local", "path": "issues.yaml"}, "workspace": {"root": "ws"}}
    return resolve_settings(raw, tmp_path, env={})


def _run(n: int, *, started_mono: float = 0.0, state: str = "In Progress") -> Run:
    return Run(
        issue=make_issue(n, state=state),
        attempt=None,
        backend="codex",
        started_at=T0,
        started_mono=started_mono,
        last_event_mono=started_mono,
    )


def test_snapshot_is_built_from_the_state_given_and_changes_none_of_it(tmp_path):
    settings = _settings(tmp_path)
    running = {"id-2": _run(2, started_mono=10.0)}
    known = {i.id: i for i in (make_issue(1), make_issue(2), make_issue(3), make_issue(4))}
    retries = [RetryEntry(issue_id="id-3", identifier="ABC-3", attempt=2, due_at=T0, error="boom")]
    before = (dict(known), dict(running), list(retries))
    snap = build_snapshot(
        now=T0,
        now_mono=40.0,
        settings=settings,
        workflow_path=str(tmp_path / "WORKFLOW.md"),
        started_at=T0,
        known=known,
        running=running,
        retries=retries,
        held={"id-4"},
        completed=["ABC-1"],
        ledger=TokenLedger(),
        ended_seconds=5.0,
        rate_limits=None,
        recovered=(),
        dispatch_paused=True,
        config_error=None,
        tracker_error="down",
        tracker_paused_until=None,
        last_poll_at=T0,
        next_poll_at=None,
    )
    claims = {row.identifier: (row.claim, row.note) for row in snap.issues}
    assert claims == {
        "ABC-1": (ClaimState.UNCLAIMED, "completed"),
        "ABC-2": (ClaimState.RUNNING, ""),
        "ABC-3": (ClaimState.RETRY_QUEUED, ""),
        "ABC-4": (ClaimState.RELEASED, "held by operator"),
    }
    assert [r.issue_identifier for r in snap.running] == ["ABC-2"]
    assert [(r.issue_identifier, r.error) for r in snap.retrying] == [("ABC-3", "boom")]
    assert snap.seconds_running == 35.0  # 5 s of ended runs + 30 s of the live one
    assert snap.dispatch_paused and snap.tracker_error == "down"
    assert (dict(known), dict(running), list(retries)) == before


def test_policy_answers_without_an_operator():
    command = ApprovalRequest(id="a", issue_id="i", kind=ApprovalKind.COMMAND)
    pick = ApprovalRequest(
        id="q",
        issue_id="i",
        kind=ApprovalKind.USER_INPUT,
        questions=(Question(id="x", options=(QuestionOption(label="yes"),)),),
    )
    free_text = ApprovalRequest(
        id="t", issue_id="i", kind=ApprovalKind.USER_INPUT, questions=(Question(id="x"),)
    )
    assert policy_answer(command, "auto").decision is ApprovalDecision.ACCEPT
    assert policy_answer(pick, "auto").answers == {"x": ("yes",)}
    assert policy_answer(free_text, "auto").decision is ApprovalDecision.DECLINE
    denied = policy_answer(command, "deny")
    assert (denied.decision, denied.by) == (ApprovalDecision.DECLINE, "policy")


def _desk(tmp_path: Path, runs: list[Run], front: dict | None = None):
    settings = resolve_settings(
        {"tracker": {"kind": "local", "path": "x.yaml"}, "agent": front or {}}, tmp_path, env={}
    )
    clock = FakeClock(T0)
    emitted: list[AgentEvent] = []
    state = SimpleNamespace(
        settings=settings, clock=clock, running={r.issue.id: r for r in runs}, changed=lambda: None
    )

    class Loop:
        """The loop's part: the desk's events are kept, its deadlines applied at once."""

        def post(self, item, *, control: bool = False) -> None:
            match item:
                case AgentTraffic(event=event):
                    emitted.append(event)
                case ApprovalExpired(run=run, approval_id=aid, timeout_s=timeout_s):
                    desk.expired(run, aid, timeout_s)
                case ApprovalWithdrawn(run=run, approval_id=aid):
                    desk.withdrawn(run, aid)

    desk = ApprovalDesk(state, Loop())
    return desk, clock, emitted


def _ask(desk: ApprovalDesk, run: Run, request: ApprovalRequest) -> asyncio.Future:
    """What the loop does with a session's ``ApprovalAsked``: file it; the future answers."""
    answer = asyncio.get_running_loop().create_future()
    desk.file(run, request, answer)
    return answer


async def test_desk_refuses_what_it_cannot_answer_and_settles_the_rest(tmp_path):
    run = _run(1)
    desk, clock, emitted = _desk(tmp_path, [run])
    question = ApprovalRequest(
        id="q1", issue_id="", kind=ApprovalKind.USER_INPUT, questions=(Question(id="x"),)
    )
    waiting = _ask(desk, run, question)
    await clock.settle()
    assert run.status is RunStatus.WAITING_FOR_OPERATOR and desk.owner("q1") is run
    assert run.pending["q1"].request.deadline_at is not None
    assert not desk.answer("nope", ApprovalAnswer(decision=ApprovalDecision.ACCEPT)).ok
    bare = desk.answer("q1", ApprovalAnswer(decision=ApprovalDecision.ACCEPT))
    assert not bare.ok and "question" in bare.message
    assert desk.answer("q1", ApprovalAnswer(decision=ApprovalDecision.DECLINE)).ok
    assert (await waiting).decision is ApprovalDecision.DECLINE
    assert not run.pending and run.status is RunStatus.STREAMING_TURN
    assert desk.owner("q1") is None
    assert [e.kind for e in emitted] == [EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_RESOLVED]

    later = _ask(desk, run, ApprovalRequest(id="c1", issue_id="", kind=ApprovalKind.COMMAND))
    await clock.settle()
    desk.cancel(run)
    answer = await later
    assert (answer.decision, answer.by) == (ApprovalDecision.CANCEL, "shutdown")


async def test_desk_declines_at_the_deadline(tmp_path):
    run = _run(1)
    desk, clock, _ = _desk(tmp_path, [run], {"approval_timeout_ms": 2000})
    request = ApprovalRequest(id="c1", issue_id="", kind=ApprovalKind.COMMAND)
    waiting = _ask(desk, run, request)
    await clock.settle()
    assert run.pending["c1"].request.deadline_at == T0 + timedelta(seconds=2)
    await clock.advance(2.5)
    answer = await waiting
    assert answer.timed_out and answer.decision is ApprovalDecision.DECLINE
    assert run.approval_timed_out and "unanswered for 2s" in run.approval_timed_out


def test_holds_survive_a_restart_and_end_when_the_tracker_changes(tmp_path):
    settings = _settings(tmp_path)
    workspaces = WorkspaceManager(lambda: settings)
    issue = make_issue(1, updated=T0)
    path = workspaces.path_for(issue.identifier)
    path.mkdir(parents=True)
    holds = Holds(workspaces)
    holds.hold(issue, path)
    workspaces.manifests.flush_sync()  # the hold is written by the manifest writer
    assert issue.id in holds and read_manifest(path)["run"]["held"] is True

    def recovered() -> RecoveredWorkspace:
        # as a restarted scheduler's scan reads it (the issue section is the manager's)
        found = recovered_from(path, read_manifest(path))
        assert found is not None
        return found.model_copy(update={"issue_id": issue.id})

    restarted = Holds(workspaces)
    restarted.restore([recovered()])
    assert list(restarted) == [issue.id]
    restarted.release_stale({issue.id: issue}, {})
    assert issue.id in restarted  # unchanged in the tracker: still held
    changed = issue.model_copy(update={"updated_at": T0 + timedelta(minutes=1)})
    restarted.release_stale({issue.id: changed}, {})
    workspaces.manifests.flush_sync()
    assert issue.id not in restarted and read_manifest(path)["run"]["held"] is False

    update_manifest(path, "run", held=True, held_updated_at="not a time")
    again = Holds(workspaces)
    again.restore([recovered()])
    again.release_stale({}, {issue.id: issue})  # gone from the candidates: released
    assert len(again) == 0


class _Loop:
    """The loop's part for the session tools: ``emit`` gets their events, ``moved`` the
    agent's moves, ``intend`` answers the intents they ask."""

    def __init__(self, emit, moved, intend) -> None:
        self._emit, self._moved, self._intend = emit, moved, intend

    def post(self, item, *, control: bool = False) -> None:
        match item:
            case AgentTraffic(event=event):
                self._emit(event)
            case IssueMoved(issue=issue, run=run):
                self._moved(run, issue)

    async def ask(self, item, *, control: bool = False):
        assert isinstance(item, MoveIntended)
        return await self._intend(item.run, item.state)


async def test_session_tools_report_bad_calls_and_keep_the_intent_only_on_success(
    make_harness,
):
    tracker = MemoryTracker([make_issue(1, state="In Progress")])
    emitted: list[AgentEvent] = []
    moved: list[str] = []
    state = make_harness([]).orch.state

    async def intend(run, target):
        return state.run_move_intended(run, target)

    def apply_move(run, issue):
        state.run_moved_by_agent(run, issue)
        moved.append(issue.state)

    tools = AgentTools(tracker, _Loop(emitted.append, apply_move, intend))
    assert tools.specs() == (SET_STATE_TOOL,)
    run = _run(1)

    result = await tools.call(run, SET_STATE_TOOL.name, {"state": "  "})
    assert not result.success and "non-empty" in json.loads(result.text)["error"]
    tracker.fail_next()
    result = await tools.call(run, SET_STATE_TOOL.name, {"state": "Done"})
    assert not result.success and run.agent_moved_state is None and not moved
    result = await tools.call(run, "rm_rf", {})
    assert not result.success and "unsupported tool" in json.loads(result.text)["error"]

    result = await tools.call(run, SET_STATE_TOOL.name, {"state": "Done"})
    assert result.success and json.loads(result.text) == {"issue": "ABC-1", "state": "Done"}
    assert run.issue.state == "Done" and run.agent_moved_state == "Done" and moved == ["Done"]
    assert [e.kind for e in emitted] == [EventKind.TOOL_CALL] * 4


async def test_session_tools_offer_and_run_a_trackers_own_agent_tool():
    """A tracker with an ``agent_tool`` (Jira's ``jira_rest``, GitLab's ``gitlab_api``,
    Asana's ``asana_api``) has it offered to sessions and called with the run's issue; an
    exception inside it comes back as a failed result, never into the session."""
    from symphony_tui.agents.base import ToolResult, ToolSpec

    spec = ToolSpec(name="vendor_api", description="d", input_schema={"type": "object"})
    calls: list[tuple[str, object]] = []

    class WithTool(MemoryTracker):
        agent_tool = spec

        async def call_agent_tool(self, issue, arguments):
            calls.append((issue.identifier, arguments))
            if arguments == "boom":
                raise RuntimeError("vendor exploded")
            return ToolResult(True, '{"status": 200}')

    tools = AgentTools(
        WithTool([make_issue(1)]),
        _Loop(lambda event: None, lambda run, issue: None, _no_intent),
    )
    assert tools.specs() == (SET_STATE_TOOL, spec)
    run = _run(1)
    assert (await tools.call(run, "vendor_api", {"path": "/x"})).success
    failed = await tools.call(run, "vendor_api", "boom")
    assert not failed.success and "vendor_api failed: vendor exploded" in failed.text
    assert calls == [("ABC-1", {"path": "/x"}), ("ABC-1", "boom")]


async def _no_intent(run, target):
    return None
