"""Churning runs and the full collections they cost (no full GC pause may exceed 50 ms).

``python -m tests.bench.bench_reclaim [--workers 50 200] [--seconds 90] [--before REF]``

The real ``symphony-tui`` (headless, under :mod:`tests.bench.sched_host`) with ``workers``
issues and as many concurrent runs of :mod:`tests.bench.flood_agent`: each turn streams
``--rate`` deltas a second for ``--turn-s`` seconds and completes, each run has one turn
(``max_turns: 1``), and the continuation retry starts the next run of its issue a second
later, so runs end all the time. Printed, for a window of ``--seconds`` after every
worker's first run started: the runs that ended in it (one agent process each), the full
collections in it and the longest of them in CPU and wall time (the heap freezer's
reclaim among them: everything the collector tracks, frozen or not), the objects tracked
after the longest one, and the permanent generation's size (``gc.get_freeze_count()``)
at the window's start and end, with its growth per ended run.

``--before REF`` runs the scheduler of git commit REF (a ``git archive`` copy) right before
this tree's, per worker count, and prints the two side by side. Quote CPU times: wall
times on a shared machine move with its load (the load average is printed).

Agents get a private ``HOME``: ``bash -lc`` then runs no login profile of the machine's
(pyenv's rehash takes a global lock that a killed shell can leave held).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tests.bench._flood import ROOT, Api, FloodProject, checkout, cpu_seconds


@dataclass
class ChurnProject(FloodProject):
    def env(self) -> dict[str, str]:
        env = super().env()
        home = self.tmp / "home"
        home.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(home)
        return env

    def runs_started(self) -> int:
        """Agent processes started so far (one report file each)."""
        return len(list(self.reports.glob("*.jsonl")))


def churn(workers: int, seconds: float, rate: float, turn_s: float, root: Path) -> dict:
    project = ChurnProject(workers, rate=rate, turn_s=turn_s, max_turns=1, root=root)
    label = "this tree" if root == ROOT else f"code of {root}"
    print(f"-- {workers} workers, {turn_s:g} s turns at {rate:g} lines/s, {label}", flush=True)
    out: dict[str, str] = {}
    try:
        project.start()
        assert project.proc is not None
        pid = project.proc.pid
        took = project.wait_running(Api(project.port), workers, timeout_s=300 + 3 * workers)
        out["start-up to all runs"] = f"{took:.1f} s"
        time.sleep(2.0 * turn_s + 3.0)  # the first runs end, the freezer has frozen them
        g0 = project.gc_stats()
        s0, c0, t0 = project.runs_started(), cpu_seconds(pid), time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(0.5)
        time.sleep(1.0)  # the stats file is rewritten twice a second
        g1 = project.gc_stats()
        s1, c1, t1 = project.runs_started(), cpu_seconds(pid), time.monotonic()
        ended = s1 - s0
        window = [p for p in g1.get("gc2_pauses", []) if t0 <= p[0] <= t1]
        longest = max(window, key=lambda p: p[2]) if window else None
        f0, f1 = g0.get("freeze_count", 0), g1.get("freeze_count", 0)
        out["runs ended in the window"] = f"{ended:,} ({ended / (t1 - t0):.1f}/s)"
        out["scheduler CPU use"] = f"{(c1 - c0) / (t1 - t0) * 100:.0f} % of a core"
        out["full collections in the window"] = f"{len(window)}"
        out["longest full collection, CPU (wall)"] = (
            f"{longest[2]:.1f} ({longest[1]:.1f}) ms" if longest else "-"
        )
        out["longest full collection of the whole run, CPU"] = (
            f"{g1.get('gc2_max_cpu_ms', 0):.1f} ms ({g1.get('gc2_count', 0)} in all)"
        )
        out["objects tracked after the longest (whole run)"] = f"{g1.get('gc2_tracked', 0):,}"
        out["longest collection of any generation, CPU"] = f"{g1.get('gc_max_cpu_ms', 0):.1f} ms"
        out["frozen objects, window start -> end"] = f"{f0:,} -> {f1:,}"
        out["frozen growth per ended run"] = f"{(f1 - f0) / max(ended, 1):+.1f}"
        out["load average at the end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        for name, value in out.items():
            print(f"  {name:<48} {value}", flush=True)
        return out
    finally:
        project.stop()
        project.cleanup()


def run(workers: tuple[int, ...], seconds: float, rate: float, turn_s: float, ref: str) -> None:
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    before_root = checkout(ref) if ref else None
    try:
        for n in workers:
            turn = turn_s if turn_s > 0 else max(1.0, n / 20)
            before = churn(n, seconds, rate, turn, before_root) if before_root else None
            after = churn(n, seconds, rate, turn, ROOT)
            if before is not None:
                print(f"\n{n} workers | before ({ref}) | after")
                print("--- | --- | ---")
                for name in after:
                    print(f"{name} | {before.get(name, '-')} | {after[name]}")
                print()
    finally:
        if before_root is not None:
            shutil.rmtree(before_root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[50, 200])
    p.add_argument("--seconds", type=float, default=90.0)
    p.add_argument("--rate", type=float, default=20.0, help="delta lines/s per agent")
    p.add_argument(
        "--turn-s", type=float, default=0.0, help="seconds per turn (0: workers / 20, >= 1)"
    )
    p.add_argument("--before", default="", help="also run this commit's scheduler, first")
    a = p.parse_args()
    run(tuple(a.workers), a.seconds, a.rate, a.turn_s, a.before)


if __name__ == "__main__":
    main()
