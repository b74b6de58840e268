"""Run turnover: 300 issues, 50 concurrent runs, and every round
all 50 turns end together (the agent moves its issue to Done) and the next poll starts 50
new runs. While that happens a probe plays the HTTP API's part every 10 ms: it waits on the
event loop (what any request waits for) and builds the ``/api/v1/state`` payload from a
snapshot. Printed: p50/p99/max of that latency during turnover, the scheduler's wall time
per round, and the time to shut down with 50 workers.

Real workspaces (manifests with fsync, recovery scans) on a temporary folder; the in-process
scripted backend stands in for agents, so the figures are the scheduler's own.

``python -m tests.bench.bench_turnover [--issues 300] [--workers 50] [--rounds 4]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.memory_tracker import MemoryTracker
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.bench._common import figure
from tests.helpers import until
from tests.scheduler.conftest import make_issue, write_workflow


async def run(issues: int, workers: int, rounds: int) -> None:
    print(f"== turnover: {issues} issues, {workers} concurrent, {rounds} rounds")
    release = asyncio.Event()
    tracker = MemoryTracker([make_issue(n) for n in range(issues)])

    async def turn(session, prompt, turn_no):
        session.usage(100, output=10)
        await release.wait()
        tracker.set_state(session.host.issue.id, "Done")
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        front = f"agent:\n  max_concurrent_agents: {workers}\n  max_turns: 1\n"
        store = WorkflowStore(write_workflow(root, front.replace("30000", "500")))
        store.load_initial()
        orch = Orchestrator(
            store,
            tracker,
            WorkspaceManager(lambda: store.current.settings),
            lambda name: ScriptedBackend(turn),
            watch_workflow=False,
        )
        await orch.start()
        latencies: list[float] = []
        probing = True

        async def probe() -> None:
            while probing:
                t0 = time.perf_counter()
                await asyncio.sleep(0.01)
                json.dumps(orch.snapshot().state_payload())
                latencies.append(time.perf_counter() - t0 - 0.01)

        await until(lambda: len(orch.running) == workers, step=0.01, what="turnover")
        probe_task = asyncio.create_task(probe())
        round_s = []
        for _ in range(rounds):
            started = {r.issue.id for r in orch.running.values()}
            t0 = time.perf_counter()
            release.set()
            await until(lambda s=started: not (s & set(orch.running)), step=0.01, what="turnover")
            release.clear()
            orch.request_refresh()
            await until(
                lambda s=started: len(orch.running) == workers and not s & set(orch.running),
                step=0.01,
                what="turnover",
            )
            round_s.append(time.perf_counter() - t0)
        probing = False
        await probe_task
        t0 = time.perf_counter()
        await orch.shutdown()
        quit_s = time.perf_counter() - t0
    ms = sorted(x * 1000 for x in latencies)
    figure("API-side latency at turnover, p50", statistics.median(ms), "ms")
    figure("API-side latency at turnover, p99", ms[int(len(ms) * 0.99) - 1], "ms", "< 250 ms")
    figure("API-side latency at turnover, max", ms[-1], "ms", "< 1,000 ms")
    figure(f"round: {workers} runs end and {workers} start", statistics.median(round_s), "s")
    figure(f"shutdown with {workers} workers", quit_s, "s", "< 5 s")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--issues", type=int, default=300)
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)
    asyncio.run(run(args.issues, args.workers, args.rounds))


if __name__ == "__main__":
    main()
