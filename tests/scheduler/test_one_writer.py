"""The scheduler state has one writer (docs/architecture.md "Who owns which state"): a
run's worker task only posts what happened (workspace ready, hooks ran, session opened,
turns started and ended, the agent's move of its issue, the attempt's end) and the loop
applies it; no change of the state, and no event in its history, comes from the worker's
own task (the scripted session runs its turns, tool calls included, in that task). The
same holds for an approval's round trip (asked by the session, answered by the operator or
by its deadline) and for the worker-host probes, which run in their own tasks."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import ApprovalDecision, ApprovalKind, ApprovalRequest
from symphony_tui.domain.commands import Approve, ProbeHost
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.state import SchedulerState

from .conftest import make_issue

FRONT = """\
agent:
  max_turns: 2
hooks:
  before_run: 'true'
  after_run: 'true'
"""


def _task_name() -> str:
    task = asyncio.current_task()
    return task.get_name() if task is not None else "(no task)"


def _spy(monkeypatch) -> tuple[list[str], list[str]]:
    """The names of the tasks that change the state, and that append to its history."""
    changers: list[str] = []
    appenders: list[str] = []
    changed, append = SchedulerState.changed, EventHistory.append

    def spy_changed(self):
        changers.append(_task_name())
        return changed(self)

    def spy_append(self, event, **stamp):
        appenders.append(_task_name())
        return append(self, event, **stamp)

    monkeypatch.setattr(SchedulerState, "changed", spy_changed)
    monkeypatch.setattr(EventHistory, "append", spy_append)
    return changers, appenders


async def test_a_whole_attempt_changes_the_state_only_from_the_loop(make_harness, monkeypatch):
    changers, appenders = _spy(monkeypatch)
    h = make_harness([make_issue(1)], front=FRONT)
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying, timeout=60)  # ended: a continuation
    await h.orch.barrier()

    kinds = [e.kind.value for e in h.orch.events_since(0)]
    assert kinds.count("hook") >= 2 and kinds.count("turn_started") == 2  # all the way
    assert h.orch.retrying["id-1"].entry.attempt == 1
    # Besides the loop, only this test's task (the start-up, before the first dispatch).
    assert set(changers) == {"scheduler-loop", _task_name()}
    assert set(appenders) <= {"scheduler-loop", _task_name()}


async def test_the_agents_move_of_its_issue_is_applied_by_the_loop(make_harness, monkeypatch):
    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    changers, appenders = _spy(monkeypatch)
    h = make_harness([make_issue(1)], script=finish)
    await h.start()
    await h.settle()
    assert h.tracker.issues["id-1"].state == "Done" and h.orch.completed == ["ABC-1"]
    # Besides the loop, only this test's task (the start-up, before the first dispatch).
    assert set(changers) == {"scheduler-loop", _task_name()}
    assert set(appenders) <= {"scheduler-loop", _task_name()}


async def test_an_approvals_round_trip_is_applied_by_the_loop(make_harness, monkeypatch):
    answers: list = []

    async def ask(session, prompt, turn):
        request = ApprovalRequest(
            id=f"ap-{turn}", issue_id="", kind=ApprovalKind.COMMAND, command="make"
        )
        answers.append(await session.host.request_approval(request))
        return TurnResult(TurnStatus.COMPLETED)

    changers, appenders = _spy(monkeypatch)
    front = "agent:\n  max_turns: 2\n  approval_timeout_ms: 30000\n"
    h = make_harness([make_issue(1)], script=ask, front=front)
    await h.start()
    await h.settle()
    assert [a.id for a in h.orch.snapshot().approvals] == ["ap-1"]
    assert (await h.orch.send(Approve(approval_id="ap-1"))).ok  # the operator answers
    await h.settle()
    assert [a.id for a in h.orch.snapshot().approvals] == ["ap-2"]
    await h.advance(30)  # the deadline answers
    await h.settle()
    assert [a.decision for a in answers] == [ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE]
    assert answers[1].timed_out and not h.orch.snapshot().approvals
    # Besides the loop, only this test's task (the start-up, and the operator's command
    # it hands the loop, which it applies between two of the loop's inputs).
    assert set(changers) == {"scheduler-loop", _task_name()}
    assert set(appenders) <= {"scheduler-loop", _task_name()}


HOSTS = "worker:\n  ssh_hosts: ['127.0.0.1:9']\n  connect_timeout_ms: 2000\n"


async def test_worker_host_probes_are_applied_by_the_loop(make_harness, monkeypatch):
    # A loopback port nothing listens on: its first contact, and the operator's probe of
    # the host once it is down, fail at once.
    changers, appenders = _spy(monkeypatch)
    h = make_harness([], front=HOSTS)
    await h.start()
    await h.until(lambda: not h.orch.snapshot().hosts[0].up, timeout=30)
    assert (await h.orch.send(ProbeHost(host="127.0.0.1:9"))).ok
    await h.until(lambda: not h.orch.state.hosts.get("127.0.0.1:9").probing, timeout=30)
    await h.orch.barrier()
    row = h.orch.snapshot().hosts[0]
    assert not row.up and row.last_error
    down = [e.message for e in h.orch.events_since(0) if "is down" in e.message]
    assert len(down) == 1 and down[0].startswith("worker host 127.0.0.1:9 is down: ")
    assert set(changers) == {"scheduler-loop", _task_name()}
    assert set(appenders) <= {"scheduler-loop", _task_name()}
