"""Scheduler figures: tick/dispatch, snapshot build, event ingestion and its memory."""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
import tracemalloc
from pathlib import Path

from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend, hang
from tests.bench._common import figure
from tests.scheduler.conftest import make_issue, write_workflow


def build(root: Path, issues, front: str) -> Orchestrator:
    root.mkdir(parents=True, exist_ok=True)
    store = WorkflowStore(write_workflow(root, front))
    store.load_initial()
    return Orchestrator(
        store,
        MemoryTracker(issues),
        WorkspaceManager(lambda: store.current.settings),
        lambda name: ScriptedBackend(hang),
        clock=FakeClock(),
        watch_workflow=False,
    )


async def bench_tick(root: Path) -> None:
    issues = [make_issue(n, priority=n % 5) for n in range(2000)]
    orch = build(root, issues, "agent:\n  max_concurrent_agents: 200\n")
    # first tick dispatches 200; later ticks reconcile 200 running + scan 2000 candidates
    t0 = time.perf_counter()
    await orch.tick()
    figure("first tick: 2,000 candidates, 200 dispatched", (time.perf_counter() - t0) * 1000, "ms")
    for _ in range(50):
        await asyncio.sleep(0)
    runs = 10
    t0 = time.perf_counter()
    for _ in range(runs):
        await orch.tick()
    figure(
        "steady tick: reconcile 200 + scan 2,000",
        (time.perf_counter() - t0) * 1000 / runs,
        "ms",
        "< 50 ms",
    )
    t0 = time.perf_counter()
    n = 200
    for _ in range(n):
        orch.state.changed()
        orch.snapshot()
    figure("snapshot build: 200 workers, 2,000 issues", (time.perf_counter() - t0) * 1000 / n, "ms")
    from symphony_tui.api.bodies import SnapshotBodies

    snap = orch.snapshot()
    t0 = time.perf_counter()
    for _ in range(n):
        SnapshotBodies().state(snap)
    figure("GET /api/v1/state body, 200 workers", (time.perf_counter() - t0) * 1000 / n, "ms")
    t0 = time.perf_counter()
    for _ in range(n):
        SnapshotBodies().full(snap)
    figure("GET /api/v1/snapshot body, 200 workers", (time.perf_counter() - t0) * 1000 / n, "ms")
    await orch.shutdown()


async def bench_events(root: Path) -> None:
    orch = build(root, [make_issue(1)], "")
    await orch.tick()
    for _ in range(50):
        await asyncio.sleep(0)
    run = orch.running["id-1"]
    text = "x" * 200
    kinds = [
        EventKind.MESSAGE_DELTA,
        EventKind.MESSAGE,
        EventKind.COMMAND_OUTPUT,
        EventKind.TOOL_CALL,
    ]
    events = [AgentEvent(kind=kinds[i % 4], message=text) for i in range(100_000)]
    gc.collect()
    t0 = time.perf_counter()
    for event in events:
        orch.state.recorder.on_event(run, event)
    elapsed = time.perf_counter() - t0
    figure("event ingestion (200-char events)", len(events) / elapsed, "events/s", "> 50,000/s")
    # memory: what another 100,000 events leave behind (the history is bounded)
    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for event in events:
        orch.state.recorder.on_event(run, event)
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figure(
        "event history held (ring + transcript), steady state",
        (after - before) / 1e6,
        "MB",
        "< 50 MB",
    )
    del events
    gc.collect()
    gc.freeze()  # as the CLI does after start-up: modules and set-up out of the count
    for event in [AgentEvent(kind=kinds[i % 4], message=text) for i in range(100_000)]:
        orch.state.recorder.on_event(run, event)  # the history, full, is what the run made
    gc.collect()
    t0, c0 = time.perf_counter(), time.thread_time()
    gc.collect()
    wall, cpu = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
    figure("full GC pause with that history held (wall)", wall, "ms", "<= 50 ms")
    figure("  the same in CPU time", cpu, "ms")
    figure("  objects the collector tracks", len(gc.get_objects()), "")
    gc.unfreeze()
    t0 = time.perf_counter()
    for _ in range(100):
        orch.events_since(orch.events.last_seq - 500)
    figure("events_since (last 500 of the ring)", (time.perf_counter() - t0) * 10, "ms")
    await orch.shutdown()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        await bench_tick(Path(tmp) / "a")
    with tempfile.TemporaryDirectory() as tmp:
        await bench_events(Path(tmp) / "b")


def run() -> None:
    import logging

    logging.getLogger("symphony_tui").propagate = False
    logging.getLogger("symphony_tui").addHandler(logging.NullHandler())
    print("== scheduler")
    asyncio.run(main())


if __name__ == "__main__":
    run()
