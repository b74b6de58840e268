"""The scheduler state has one writer (docs/architecture.md "Who owns which state"): a
run's worker task only posts what happened (workspace ready, hooks ran, session opened,
turns started and ended, the agent's move of its issue, the attempt's end) and the loop
applies it; no change of the state, and no event in its history, comes from the worker's
own task (the scripted session runs its turns, tool calls included, in that task)."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.scheduler.eventlog import EventHistory
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
