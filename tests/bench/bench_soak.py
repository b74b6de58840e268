"""Console soak: the console on a pseudo-terminal (120x36) with 50
churning workers, RSS over time; ``--flood``: the console under a flood of agent
deltas instead of churn.

``python -m tests.bench.bench_soak [--minutes 10] [--workers 50] [--rate 50] [--headless]
[--heap DIR] [--flood [--sample-s 30] [--item-every-s 2] [--item-chars 12000]
[--item-text words|source] [--before DIR]]``

Each run is one turn of ``--turn-s`` seconds (deltas at ``--rate`` lines/s per agent), so
runs end and new ones start all the time (the continuation retry re-dispatches the issue).
Prints the console process's RSS at 1, 5 and 10 minutes (those within ``--minutes``, and
the end), its terminal output in bytes per second, and how long quitting (``q``, ``y``)
takes with the workers running. ``--headless`` runs the scheduler alone (SIGTERM to quit), to
tell the console's growth from the scheduler's; ``--heap DIR`` writes a heap dump by type at
each mark (``sched_host``'s ``SYMPHONY_BENCH_HEAP``; ``SYMPHONY_BENCH_TRACEMALLOC=FRAMES``
adds tracemalloc snapshots).

``--flood``: every run is one long turn whose agent writes deltas as fast as its pipe takes
them (``--rate 0`` unless given; ``flood_agent.py``), so nothing churns and every delta
reaches one of ``--workers`` live transcripts; every ``--item-every-s`` seconds each agent
completes its message with ``--item-chars`` characters of text and starts another, so
completed messages reach the event log as well (``--item-every-s 0``: deltas only, one
message per run). ``--item-text source``: the messages are windows of this project's own
source and docs (compressing like an agent's text, about 2.5x), not one repeated sentence
(``words``, 70x: kept entries are compressed, so it would flatter the figures). RSS is sampled every ``--sample-s`` seconds
(and a heap dump written at each sample with ``--heap``). ``--before DIR`` names another
checkout of this repository (``git worktree add /tmp/before main``): the same flood runs
against its code first, then against this tree's, and the two RSS curves print side by side
(same agents, same machine, minutes apart).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from tests.bench._common import figure
from tests.bench._flood import ROOT, Api, ConsoleOnPty, FloodProject, cpu_seconds, rss_mb


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


def flood_curve(
    root: Path,
    minutes: float,
    workers: int,
    rate: float,
    sample_s: float,
    *,
    item_every_s: float = 0.0,
    item_chars: int = 0,
    item_text: str = "words",
    headless: bool = False,
    heap: Path | None = None,
) -> dict[str, float | list[float]]:
    """One flood run of the code in ``root``: RSS (MB) at start (every run streaming) and
    every ``sample_s`` seconds for ``minutes`` (``load``: the 1-minute load average at
    each sample), the terminal's output (KB/s) and the agents' lines. The process is SIGKILLed at the end (quitting is ``run``'s figure)."""
    if heap is not None:
        heap.mkdir(parents=True, exist_ok=True)
        os.environ["SYMPHONY_BENCH_HEAP"] = str(heap)
    project = FloodProject(
        workers,
        rate=rate,
        turn_s=0.0,
        max_turns=1,
        root=root,
        gated=True,
        item_every_s=item_every_s,
        item_chars=item_chars,
        item_text=item_text,
    )
    console = None if headless else ConsoleOnPty(project)
    if headless:
        project.start()
    proc = project.proc
    assert proc is not None
    try:
        project.wait_running(Api(project.port), workers, timeout_s=600.0)
        project.go()
        t0 = time.monotonic()
        b0 = console.bytes if console else 0
        cpu0, lines0 = cpu_seconds(proc.pid), project.agent_lines()
        curve = [rss_mb(proc.pid)]
        load = [os.getloadavg()[0]]
        n = 1
        while n * sample_s <= minutes * 60 + 0.5:
            while time.monotonic() - t0 < n * sample_s:
                time.sleep(0.5)
                if proc.poll() is not None:
                    raise RuntimeError(f"exited with {proc.returncode}; see {project.tmp}")
            curve.append(rss_mb(proc.pid))
            load.append(os.getloadavg()[0])
            if heap is not None:
                (heap / "request").touch()
            n += 1
        elapsed = time.monotonic() - t0
        out: dict[str, float | list[float]] = {"rss": curve, "load": load}
        out["lines"] = project.agent_lines()
        out["lines/s"] = out["lines"] / elapsed
        # CPU per agent line moves much less with the machine's load than lines/s
        taken = max(1, out["lines"] - lines0)
        out["us/line"] = (cpu_seconds(proc.pid) - cpu0) / taken * 1e6
        if console is not None:
            out["KB/s"] = (console.bytes - b0) / elapsed / 1024
        return out
    finally:
        if console is not None:
            console.close()
        project.stop()
        project.cleanup()
        os.environ.pop("SYMPHONY_BENCH_HEAP", None)


def run_flood(
    minutes: float = 5.0,
    workers: int = 40,
    rate: float = 0.0,
    sample_s: float = 30.0,
    *,
    item_every_s: float = 2.0,
    item_chars: int = 12000,
    item_text: str = "words",
    headless: bool = False,
    heap: Path | None = None,
    before: Path | None = None,
) -> None:
    what = "headless scheduler" if headless else "console"
    print(f"== {what} flood: {workers} workers streaming deltas, {minutes:g} min")
    if item_every_s > 0:
        print(
            f"   each completes a message of {item_chars:,} chars ({item_text})"
            f" every {item_every_s:g} s"
        )
    trees = [("before", before.resolve())] if before is not None else []
    trees.append(("this tree", ROOT))
    results = {}
    for name, root in trees:
        dump = heap / name.replace(" ", "-") if heap is not None else None
        results[name] = flood_curve(
            root,
            minutes,
            workers,
            rate,
            sample_s,
            item_every_s=item_every_s,
            item_chars=item_chars,
            item_text=item_text,
            headless=headless,
            heap=dump,
        )
    names = [n for n, _ in trees]
    print(f"{what} RSS (MB), every {sample_s:g} s from the flood's start (load: 1-min average)")
    print(f"{'s':>6} " + " ".join(f"{n:>12} {'load':>5}" for n in names))
    for i in range(len(results[names[-1]]["rss"])):
        cells = []
        for n in names:
            rss, load = results[n]["rss"], results[n]["load"]
            cells.append(f"{rss[i]:>12.1f} {load[i]:>5.1f}" if i < len(rss) else f"{'':>18}")
        print(f"{i * sample_s:>6.0f} " + " ".join(cells))
    for n in names:
        rss = results[n]["rss"]
        tag = f" ({n})" if len(names) > 1 else ""
        figure(f"RSS growth, flood start -> end{tag}", rss[-1] - rss[0], "MB")
        figure(
            f"RSS growth, 1 min -> end{tag}",
            rss[-1] - rss[min(len(rss) - 1, round(60 / sample_s))],
            "MB",
        )
        figure(f"agent lines/s{tag}", results[n]["lines/s"], "lines/s")
        figure(f"process CPU per agent line{tag}", results[n]["us/line"], "us")
        if "KB/s" in results[n]:
            figure(f"terminal output{tag}", results[n]["KB/s"], "KB/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float)
    p.add_argument("--workers", type=int)
    p.add_argument("--rate", type=float)
    p.add_argument("--turn-s", type=float, default=3.0)
    p.add_argument("--headless", action="store_true", help="the scheduler alone, no console")
    p.add_argument("--heap", type=Path, help="write heap dumps by type here at each mark")
    p.add_argument("--flood", action="store_true", help="long turns streaming deltas, no churn")
    p.add_argument("--sample-s", type=float, default=30.0, help="--flood: RSS sample period")
    p.add_argument("--item-every-s", type=float, default=2.0, help="--flood: message period")
    p.add_argument("--item-chars", type=int, default=12000, help="--flood: message length")
    p.add_argument(
        "--item-text",
        choices=("words", "source"),
        default="words",
        help="--flood: messages of one repeated sentence, or of this project's source and docs",
    )
    p.add_argument("--before", type=Path, help="--flood: another checkout, run before this one")
    a = p.parse_args()
    if a.flood:
        run_flood(
            5.0 if a.minutes is None else a.minutes,
            40 if a.workers is None else a.workers,
            0.0 if a.rate is None else a.rate,
            a.sample_s,
            item_every_s=a.item_every_s,
            item_chars=a.item_chars,
            item_text=a.item_text,
            headless=a.headless,
            heap=a.heap,
            before=a.before,
        )
        return
    if a.before is not None:
        p.error("--before goes with --flood")
    run(
        10.0 if a.minutes is None else a.minutes,
        50 if a.workers is None else a.workers,
        50.0 if a.rate is None else a.rate,
        a.turn_s,
        headless=a.headless,
        heap=a.heap,
    )


if __name__ == "__main__":
    main()
