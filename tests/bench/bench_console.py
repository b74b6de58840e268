"""Console figures: the cost of one refresh (snapshot -> tables, log, token pane) with 200
workers, a changing snapshot and a busy event log, measured inside a headless Textual app."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from pathlib import Path

from symphony_tui.console.app import SymphonyApp
from symphony_tui.domain import AgentEvent, EventKind
from tests.bench._common import figure
from tests.bench.bench_scheduler import build
from tests.scheduler.conftest import make_issue


async def main(root: Path) -> None:
    orch = build(
        root, [make_issue(n) for n in range(400)], "agent:\n  max_concurrent_agents: 200\n"
    )
    await orch.tick()
    for _ in range(50):
        await asyncio.sleep(0)
    app = SymphonyApp(orch, cursor_blink=False, refresh_hz=0.001)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.5)
        runs = list(orch.running.values())
        samples = []
        for i in range(40):
            for j, run in enumerate(runs):
                orch.state.recorder.on_event(
                    run, AgentEvent(kind=EventKind.MESSAGE, message=f"step {i}.{j}")
                )
            t0 = time.perf_counter()
            app.tick()
            samples.append(time.perf_counter() - t0)
            await pilot.pause(0)
        samples.sort()
        figure(
            "console refresh, 200 workers changing (median)",
            samples[len(samples) // 2] * 1000,
            "ms",
            "< 50 ms",
        )
        figure(
            "console refresh, 200 workers changing (p90)",
            samples[int(len(samples) * 0.9)] * 1000,
            "ms",
        )
        t0 = time.perf_counter()
        for _ in range(40):
            app.tick()
        figure("console refresh, nothing changed", (time.perf_counter() - t0) * 1000 / 40, "ms")
    await orch.shutdown()


def run() -> None:
    logging.getLogger("symphony_tui").propagate = False
    print("== console")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "c"))


if __name__ == "__main__":
    run()
