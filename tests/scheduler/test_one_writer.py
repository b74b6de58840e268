"""The scheduler state has one writer (docs/architecture.md "Who owns which state"): a
run's worker task only posts what happened (workspace ready, hooks ran, session opened,
turns started and ended, the attempt's end) and the loop applies it; no change of the
state, and no event in its history, comes from the worker's own task."""

from __future__ import annotations

import asyncio

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


async def test_a_whole_attempt_changes_the_state_only_from_the_loop(make_harness, monkeypatch):
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
    h = make_harness([make_issue(1)], front=FRONT)
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying, timeout=60)  # ended: a continuation
    await h.orch.barrier()

    kinds = [e.kind.value for e in h.orch.events_since(0)]
    assert kinds.count("hook") >= 2 and kinds.count("turn_started") == 2  # all the way
    assert h.orch.retrying["id-1"].entry.attempt == 1
    assert "scheduler-loop" in changers
    assert [n for n in changers if n.startswith("worker-")] == []
    assert [n for n in appenders if n.startswith("worker-")] == []
