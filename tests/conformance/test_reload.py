"""Spec §17.1 reload bullets at the scheduler level, with a real file edit while an
Orchestrator runs (§6.2), and the re-check before each dispatch (watch events may be missed).

Time is a FakeClock; only the filesystem watcher runs in real time, and the tests wait for
its effect (an event in the scheduler's log), never for a fixed delay.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import EventKind
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend, hang
from tests.helpers import until
from tests.scheduler.conftest import T0, make_issue, write_workflow


def config_events(orch: Orchestrator) -> list[str]:
    return [e.message for e in orch.events_since(0) if e.kind is EventKind.CONFIG]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


async def watched_orchestrator(tmp_path: Path, issues, front: str, script=hang):
    path = write_workflow(tmp_path, front, prompt="first prompt {{ issue.identifier }}")
    store = WorkflowStore(path)
    store.load_initial()
    backend = ScriptedBackend(script)
    clock = FakeClock(T0)
    orch = Orchestrator(
        store,
        MemoryTracker(issues),
        WorkspaceManager(lambda: store.current.settings),
        lambda name: backend,
        clock=clock,
        watch_workflow=True,
    )
    await orch.start()
    await asyncio.wait_for(orch.watch_ready.wait(), timeout=10)
    await clock.settle()
    return orch, backend, clock, path


async def test_workflow_file_changes_are_detected_and_reapplied_without_restart(tmp_path):
    front = "agent:\n  max_concurrent_agents: 1\n"
    issues = [make_issue(n) for n in (1, 2, 3)]
    orch, backend, clock, path = await watched_orchestrator(tmp_path, issues, front)
    try:
        assert sorted(orch.running) == ["id-1"]
        assert (orch.next_poll_at - clock.now()).total_seconds() == 30.0
        edit(path, "max_concurrent_agents: 1", "max_concurrent_agents: 3")
        edit(path, "interval_ms: 30000", "interval_ms: 5000")
        edit(path, "first prompt", "second prompt")
        await until(lambda: "WORKFLOW.md reloaded" in config_events(orch))
        assert orch.settings.agent.max_concurrent_agents == 3
        # The new poll interval is applied to the next tick without a restart.
        assert (orch.next_poll_at - clock.now()).total_seconds() == 5.0
        await clock.advance(5)
        await clock.settle()
        assert sorted(orch.running) == ["id-1", "id-2", "id-3"]
        # The new prompt applies to future runs; the live one keeps its first prompt.
        prompts = {s.host.issue.id: s.prompts[0] for s in backend.sessions}
        assert prompts["id-1"] == "first prompt ABC-1"
        assert prompts["id-2"] == "second prompt ABC-2"
    finally:
        await orch.shutdown()


async def test_invalid_workflow_reload_keeps_last_known_good_and_emits_an_operator_visible_error(
    tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    front = "agent:\n  max_concurrent_agents: 1\n"
    issues = [make_issue(1), make_issue(2)]
    orch, _backend, clock, path = await watched_orchestrator(tmp_path, issues, front)
    try:
        good = orch.settings
        # Valid YAML, invalid settings: the scheduler keeps going on the last good ones.
        edit(path, "interval_ms: 30000", "interval_ms: soon")
        edit(path, "max_concurrent_agents: 1", "max_concurrent_agents: 2")
        await until(lambda: orch.snapshot().config_error is not None)
        error = orch.snapshot().config_error
        assert "polling.interval_ms" in error
        assert any("reload failed, keeping last good" in m for m in config_events(orch))
        assert any(
            r.getMessage() == "workflow reload failed; keeping last good" for r in caplog.records
        )
        assert orch.settings == good
        await orch.tick()  # reconcile and dispatch still run, with the last good settings
        await clock.settle()
        assert sorted(orch.running) == ["id-1"]
        assert (orch.next_poll_at - clock.now()).total_seconds() == 30.0
        assert orch.snapshot().config_error == error  # still shown until fixed
        # Fixing the file clears the error and applies the new settings.
        edit(path, "interval_ms: soon", "interval_ms: 30000")
        await until(lambda: orch.snapshot().config_error is None)
        await orch.tick()
        await clock.settle()
        assert sorted(orch.running) == ["id-1", "id-2"]
    finally:
        await orch.shutdown()


async def test_workflow_is_rechecked_before_each_dispatch_when_watch_events_are_missed(
    make_harness,
):
    h = make_harness([make_issue(1)], script=hang, front="agent:\n  max_concurrent_agents: 1\n")
    await h.start()  # watch_workflow=False: only the re-check can notice the edit
    h.tracker.put(make_issue(2))
    edit(h.store.path, "max_concurrent_agents: 1", "max_concurrent_agents: 2")
    await h.orch.tick()
    await h.settle()
    assert sorted(h.orch.running) == ["id-1", "id-2"]
    assert "WORKFLOW.md reloaded" in config_events(h.orch)
    # A bad edit found by the re-check is announced too, and dispatch keeps the good config.
    edit(h.store.path, "max_concurrent_agents: 2", "max_concurrent_agents: many")
    h.tracker.put(make_issue(3))
    await h.orch.tick()
    await h.settle()
    assert "max_concurrent_agents" in h.orch.snapshot().config_error
    assert any("reload failed" in m for m in config_events(h.orch))
    assert sorted(h.orch.running) == ["id-1", "id-2"]


async def test_retry_dispatch_rechecks_the_workflow_first(make_harness):
    calls = []

    async def fail_then_hang(session, prompt, turn):
        calls.append(prompt)
        if len(calls) == 1:
            return TurnResult(TurnStatus.FAILED, error="boom")
        return await session.wait_interrupt()

    h = make_harness([make_issue(1)], script=fail_then_hang, prompt="old {{ issue.identifier }}")
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.retrying
    edit(h.store.path, "old {{", "new {{")
    await h.advance(10)  # the retry timer fires before any poll tick
    await h.until(lambda: len(calls) == 2)  # the edit is evaluated off the loop first
    assert calls == ["old ABC-1", "new ABC-1"]
