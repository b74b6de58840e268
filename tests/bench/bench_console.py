"""Console figures.

- The cost of one refresh (snapshot -> tables, log, token pane) with 200 workers, a changing
  snapshot and a busy event log, measured inside a headless Textual app (ms per refresh).
- Terminal bytes at 120x36 with 50 busy workers: what the console writes per
  second at its refresh rate, beside a naive full repaint of the same screen at the same rate
  measured in the same run (every tick, the whole screen rendered as Textual would for a
  full update), and what it writes when nothing changed. The app runs headless with its
  frames rendered to terminal bytes and counted (truecolor, as on a pseudo-terminal).

``python -m tests.bench.bench_console [--before DIR]``: ``DIR`` is another checkout of this
repository (``git worktree add /tmp/before <commit>``); the byte figures are then measured
for its code too (in a subprocess) and printed in a column beside this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HZ = 4.0  # the console's refresh rate (console.app.REFRESH_HZ)
BUSY_WORKERS = 50
BUSY_TICKS = 40  # 10 s at 4 Hz
MESSAGES_PER_WORKER_S = 5.0  # as bench_attach's busy workers
T0 = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)


async def refresh_cost(root: Path) -> None:
    from symphony_tui.console.app import SymphonyApp
    from symphony_tui.domain import AgentEvent, EventKind
    from tests.bench._common import figure
    from tests.bench.bench_scheduler import build
    from tests.scheduler.conftest import make_issue

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


class FrameBytes:
    """Counts the terminal bytes of every frame a headless app would have written, and can
    render the whole screen as a full update (the naive repaint) without disturbing it."""

    def __init__(self, app) -> None:
        from rich.console import Console

        from symphony_tui.console.repaint import cropped_update

        self.app = app
        self.written = 0
        self.frames = 0
        # what a 24-bit pseudo-terminal gets (the app's own console is headless)
        self.console = Console(
            color_system="truecolor", force_terminal=True, file=open(os.devnull, "w"),  # noqa: SIM115
            width=app.size.width, height=app.size.height, legacy_windows=False,
            safe_box=False, soft_wrap=False, emoji=False, highlight=False,
        )  # fmt: skip
        original = app._display

        def display(screen, renderable) -> None:
            # the app writes a partial update over its dirty spans only (its own _display)
            renderable = cropped_update(renderable)
            drawn = renderable is not None and hasattr(renderable, "render_segments")
            if drawn and not app._batch_count:
                self.written += len(renderable.render_segments(self.console).encode())
                self.frames += 1
            original(screen, renderable)

        app._display = display

    def full_repaint(self) -> int:
        from textual._compositor import LayoutUpdate

        compositor = self.app.screen._compositor
        region = compositor.size.region
        chops = compositor._render_chops(region, lambda y: True)
        update = LayoutUpdate([chop.values() for chop in chops], region)
        return len(update.render_segments(self.console).encode())


async def screen_bytes(root: Path) -> dict[str, float]:
    """Bytes/s at ``HZ`` for 50 busy workers (console and naive full repaint) and for a
    still screen, in a headless app of 120x36 over an in-process scheduler."""
    from symphony_tui.console.app import SymphonyApp
    from symphony_tui.domain import AgentEvent, EventKind
    from tests.bench.bench_scheduler import build
    from tests.scheduler.conftest import make_issue

    orch = build(
        root,
        [make_issue(n) for n in range(BUSY_WORKERS)],
        f"agent:\n  max_concurrent_agents: {BUSY_WORKERS}\n",
    )
    await orch.tick()
    for _ in range(50):
        await asyncio.sleep(0)
    now = [T0]
    kwargs = {"cursor_blink": False, "refresh_hz": 0.001, "clock": lambda: now[0]}
    if "monotonic" in inspect.signature(SymphonyApp).parameters:  # older trees: no such clock
        kwargs["monotonic"] = lambda: (now[0] - T0).total_seconds()
    app = SymphonyApp(orch, **kwargs)
    words = Path(__file__).read_text(encoding="utf-8").split()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.5)
        counter = FrameBytes(app)
        runs = list(orch.running.values())
        per_tick = MESSAGES_PER_WORKER_S / HZ
        sent = 0.0
        naive = 0
        for i in range(BUSY_TICKS):
            now[0] = T0 + timedelta(seconds=i / HZ)
            sent += per_tick
            while sent >= 1:
                sent -= 1
                for j, run in enumerate(runs):
                    k = (i * 7 + j * 13) % (len(words) - 12)
                    text = " ".join(words[k : k + 12])
                    orch.state.recorder.on_event(
                        run, AgentEvent(kind=EventKind.MESSAGE, message=text)
                    )
            app.tick()
            await pilot.pause()
            naive += counter.full_repaint()
        busy = counter.written
        counter.written = 0
        for _ in range(BUSY_TICKS):  # nothing changes, the clock stands still
            app.tick()
            await pilot.pause()
        still = counter.written
    await orch.shutdown()
    seconds = BUSY_TICKS / HZ
    return {
        "busy": busy / seconds / 1024,
        "naive": naive / seconds / 1024,
        "still": still / seconds / 1024,
    }


def measure_bytes(tree: Path | None) -> dict[str, float]:
    """:func:`screen_bytes` for this tree, or for checkout ``tree`` in a subprocess."""
    if tree is None:
        with tempfile.TemporaryDirectory() as tmp:
            return asyncio.run(screen_bytes(Path(tmp) / "b"))
    code = (
        "import importlib.util, json, sys, logging;"
        "logging.getLogger('symphony_tui').propagate = False;"
        f"spec = importlib.util.spec_from_file_location('bench_bytes', {str(__file__)!r});"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        "print(json.dumps(m.measure_bytes(None)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_bytes(before: Path | None) -> None:
    columns = [("before", measure_bytes(before.resolve()))] if before is not None else []
    columns.append(("this tree", measure_bytes(None)))
    print(f"{'120x36, 4 Hz':<44}" + "".join(f"{name:>14}" for name, _ in columns))
    rows = (
        ("50 busy workers: console (KB/s)", lambda f: f["busy"]),
        ("50 busy workers: naive full repaint (KB/s)", lambda f: f["naive"]),
        ("console / naive full repaint", lambda f: f["busy"] / f["naive"]),
        ("nothing changed: console (KB/s)", lambda f: f["still"]),
    )
    for label, value in rows:
        print(f"{label:<44}" + "".join(f"{value(f):>14.3f}" for _, f in columns))
    print(f"{'target: console / naive <= 0.2, 0 when still':<44}")


def run(before: Path | None = None) -> None:
    logging.getLogger("symphony_tui").propagate = False
    print("== console")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(refresh_cost(Path(tmp) / "c"))
    print_bytes(before)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="another checkout, measured beside this one")
    run(p.parse_args().before)
