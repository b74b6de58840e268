"""Console soak (issue 12, benchmark a): the console on a pseudo-terminal (120x36) with 50
churning workers, RSS over time.

``python -m tests.bench.bench_soak [--minutes 10] [--workers 50] [--rate 50] [--headless]
[--heap DIR]``

Each run is one turn of ``--turn-s`` seconds (deltas at ``--rate`` lines/s per agent), so
runs end and new ones start all the time (the continuation retry re-dispatches the issue).
Prints the console process's RSS at 1, 5 and 10 minutes (those within ``--minutes``, and
the end), its terminal output in bytes per second, and how long quitting (``q``, ``y``)
takes with the workers running. ``--headless`` runs the scheduler alone (SIGTERM to quit), to
tell the console's growth from the scheduler's; ``--heap DIR`` writes a heap dump by type at
each mark (``sched_host``'s ``SYMPHONY_BENCH_HEAP``; ``SYMPHONY_BENCH_TRACEMALLOC=FRAMES``
adds tracemalloc snapshots).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from tests.bench._common import figure
from tests.bench._flood import Api, ConsoleOnPty, FloodProject, rss_mb


def run(
    minutes: float = 10.0,
    workers: int = 50,
    rate: float = 50.0,
    turn_s: float = 3.0,
    *,
    headless: bool = False,
    heap: Path | None = None,
) -> None:
    what = "headless scheduler" if headless else "console"
    print(f"== {what} soak: {workers} churning workers, {minutes:g} min")
    if heap is not None:
        heap.mkdir(parents=True, exist_ok=True)
        os.environ["SYMPHONY_BENCH_HEAP"] = str(heap)
    project = FloodProject(workers, rate=rate, turn_s=turn_s, max_turns=1)
    console = None if headless else ConsoleOnPty(project)
    if headless:
        project.start()
    proc = project.proc
    assert proc is not None
    try:
        api = Api(project.port)
        took = project.wait_running(api, max(1, workers * 3 // 5))  # runs churn
        figure("start-up to 3/5 of the workers streaming (console)", took, "s")
        t0 = time.monotonic()
        b0 = console.bytes if console else 0
        marks = sorted({m for m in (1.0, 5.0, 10.0) if m <= minutes} | {minutes})
        first = None
        for mark in marks:
            while time.monotonic() - t0 < mark * 60:
                time.sleep(1.0)
                if proc.poll() is not None:
                    raise RuntimeError(f"{what} exited with {proc.returncode}")
            rss = rss_mb(proc.pid)
            first = rss if first is None else first
            figure(f"{what} RSS at {mark:g} min", rss, "MB")
            if heap is not None:
                (heap / "request").touch()
        elapsed = time.monotonic() - t0
        figure(f"{what} RSS growth from the first mark", rss - first, "MB", "< 20 MB (1 -> 10 min)")
        if console is not None:
            figure("terminal output", (console.bytes - b0) / elapsed / 1024, "KB/s")
        figure("agent lines written", project.agent_lines(), "lines")
        if console is not None:
            figure(f"quit (q, y) with {workers} workers", console.quit(), "s", "< 5 s")
        else:
            figure(f"quit (SIGTERM) with {workers} workers", project.stop(), "s", "< 5 s")
    finally:
        if console is not None:
            console.close()
        project.stop()
        project.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--turn-s", type=float, default=3.0)
    p.add_argument("--headless", action="store_true", help="the scheduler alone, no console")
    p.add_argument("--heap", type=Path, help="write heap dumps by type here at each mark")
    a = p.parse_args()
    run(a.minutes, a.workers, a.rate, a.turn_s, headless=a.headless, heap=a.heap)


if __name__ == "__main__":
    main()
