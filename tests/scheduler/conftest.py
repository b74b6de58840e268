"""Scheduler test harness: a real WorkflowStore and WorkspaceManager on tmp_path, an
in-memory tracker, a scripted backend and a fake clock."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import BlockerRef, Issue
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.scheduler.usage.ledger import UsageLedger
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend, complete
from tests.helpers import until

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_issue(
    n: int,
    *,
    state: str = "Todo",
    priority: int | None = None,
    created_minutes: int | None = None,
    blocked_by: tuple[BlockerRef, ...] = (),
    updated: datetime | None = None,
    **extra: Any,
) -> Issue:
    return Issue(
        id=f"id-{n}",
        identifier=f"ABC-{n}",
        title=f"Issue {n}",
        state=state,
        priority=priority,
        created_at=T0 + timedelta(minutes=created_minutes if created_minutes is not None else n),
        updated_at=updated,
        blocked_by=blocked_by,
        **extra,
    )


def write_workflow(root: Path, front: str, prompt: str = "Work on {{ issue.identifier }}") -> Path:
    (root / "issues.yaml").write_text("issues: []\n")
    path = root / "WORKFLOW.md"
    base = textwrap.dedent(
        """\
        tracker:
          kind: local
          path: issues.yaml
        workspace:
          root: ws
        polling:
          interval_ms: 30000
        """
    )
    path.write_text(f"---\n{base}{textwrap.dedent(front)}---\n{prompt}\n")
    return path


@dataclass
class Harness:
    orch: Orchestrator
    tracker: MemoryTracker
    backend: ScriptedBackend
    clock: FakeClock
    store: WorkflowStore
    root: Path

    async def start(self) -> None:
        await self.orch.start()
        await self.clock.settle()

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)

    async def settle(self) -> None:
        """Let tasks run; also wait (real time, bounded) for workers that are ending, since
        their cleanup may use threads or subprocesses."""
        await self.clock.settle(50)
        await self.orch.barrier()  # what sessions and workers posted is applied
        await self.clock.settle(50)
        ending = [r.task for r in self.orch.running.values() if r.stopping and r.task]
        if ending:
            await asyncio.wait(ending, timeout=5)
            await self.clock.settle(50)
            await self.orch.barrier()

    async def until(self, predicate, timeout: float = 5.0) -> None:
        await until(predicate, timeout, step=0.005)

    def ws(self, identifier: str) -> Path:
        return self.root / "ws" / identifier


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., Harness]:
    made: list[Harness] = []

    def factory(
        issues: list[Issue] = (),
        *,
        script=complete,
        front: str = "",
        prompt: str = "Work on {{ issue.identifier }}",
        usage: UsageLedger | None = None,
        freeze_heap: bool = False,
        event_log: EventHistory | None = None,
        backend: ScriptedBackend | None = None,
    ) -> Harness:
        path = write_workflow(tmp_path, front, prompt)
        store = WorkflowStore(path)
        store.load_initial()
        tracker = MemoryTracker(issues)
        backend = backend or ScriptedBackend(script)
        clock = FakeClock(T0)
        workspaces = WorkspaceManager(lambda: store.current.settings)
        orch = Orchestrator(
            store,
            tracker,
            workspaces,
            lambda name: backend,
            clock=clock,
            watch_workflow=False,
            usage=usage,
            freeze_heap=freeze_heap,
            event_log=event_log,
        )
        h = Harness(orch, tracker, backend, clock, store, tmp_path)
        made.append(h)
        return h

    yield factory
    # Workers are asyncio tasks of the test's loop; pytest-asyncio closes the loop after the
    # test, which cancels anything left.
