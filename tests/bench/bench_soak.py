"""Console soak (issue 12, benchmark a): the console on a pseudo-terminal (120x36) with 50
churning workers, RSS over time.

``python -m tests.bench.bench_soak [--minutes 10] [--workers 50] [--rate 50]``

Each run is one turn of ``--turn-s`` seconds (deltas at ``--rate`` lines/s per agent), so
runs end and new ones start all the time (the continuation retry re-dispatches the issue).
Prints the console process's RSS at 1, 5 and 10 minutes (those within ``--minutes``, and
the end), its terminal output in bytes per second, and how long quitting (``q``, ``y``)
takes with the workers running.
"""

from __future__ import annotations

import argparse
import time

from tests.bench._common import figure
from tests.bench._flood import Api, ConsoleOnPty, FloodProject, rss_mb


def run(minutes: float = 10.0, workers: int = 50, rate: float = 50.0, turn_s: float = 3.0) -> None:
    print(f"== console soak: {workers} churning workers, {minutes:g} min")
    project = FloodProject(workers, rate=rate, turn_s=turn_s, max_turns=1)
    console = ConsoleOnPty(project)
    try:
        api = Api(project.port)
        took = project.wait_running(api, max(1, workers * 3 // 5))  # runs churn
        figure("start-up to 3/5 of the workers streaming (console)", took, "s")
        t0 = time.monotonic()
        b0 = console.bytes
        marks = sorted({m for m in (1.0, 5.0, 10.0) if m <= minutes} | {minutes})
        first = None
        for mark in marks:
            while time.monotonic() - t0 < mark * 60:
                time.sleep(1.0)
                if console.proc.poll() is not None:
                    raise RuntimeError(f"console exited with {console.proc.returncode}")
            rss = rss_mb(console.proc.pid)
            first = rss if first is None else first
            figure(f"console RSS at {mark:g} min", rss, "MB")
        elapsed = time.monotonic() - t0
        figure("console RSS growth from the first mark", rss - first, "MB", "< 20 MB (1 -> 10 min)")
        figure("terminal output", (console.bytes - b0) / elapsed / 1024, "KB/s")
        figure("agent lines written", project.agent_lines(), "lines")
        figure(f"quit (q, y) with {workers} workers", console.quit(), "s", "< 5 s")
    finally:
        console.close()
        project.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--turn-s", type=float, default=3.0)
    a = p.parse_args()
    run(a.minutes, a.workers, a.rate, a.turn_s)


if __name__ == "__main__":
    main()
