"""Console soak: the console on a pseudo-terminal (120x36) with 50
churning workers, RSS over time; ``--flood``: the console under a flood of agent
deltas instead of churn; ``--attached``: a detached scheduler and a console attached to it.

``python -m tests.bench.bench_soak [--minutes 10] [--workers 50] [--rate 50] [--headless]
[--heap DIR] [--flood [--sample-s 30] [--item-every-s 2] [--item-chars 12000]
[--item-text words|source] [--before DIR]] [--attached [--minutes 60] [--workers 8]
[--turn-s 0.25] [--sample-s 60] [--warmup-min 5]]``

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

``--attached``: the scheduler runs headless holding the project's lock (as one a console
left behind does), and ``symphony-tui WORKFLOW.md`` on the pseudo-terminal attaches to it
(checked: the console's process holds a TCP connection to the scheduler's API and runs no
agents). Every run is one turn of ``--turn-s`` seconds, so ``--workers`` issues are
re-dispatched all the time. Every ``--sample-s`` seconds one line: minutes, the scheduler's
and the console's RSS (MB), dispatches so far (the scheduler's ``dispatch`` events), the
1-minute load average; at the end each process's growth from ``--warmup-min`` to the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psutil

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


def attached_console(holder: int, port: int, timeout_s: float = 120.0) -> psutil.Process:
    """The console that ``symphony-tui WORKFLOW.md`` (pid ``holder``, which forks it:
    ``symphony_tui/detach.py``) runs, once it is attached to the scheduler serving ``port``:
    it holds a TCP connection to that port and has no child processes (a console that had
    built a scheduler of its own would run the agents). Raises ``RuntimeError`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            for console in psutil.Process(holder).children():
                conns = getattr(console, "net_connections", console.connections)("tcp")
                linked = any(c.raddr and c.raddr.port == port for c in conns)
                if linked and not console.children(recursive=True):
                    return console
        except psutil.Error:
            raise RuntimeError(f"the console (pid {holder}) exited") from None
        time.sleep(0.5)
    raise RuntimeError(f"the console (pid {holder}) did not attach to 127.0.0.1:{port}")


class Dispatches:
    """The scheduler's dispatches so far: its ``dispatch`` events, read from
    ``/api/v1/events`` after the last one read (:meth:`read` often enough that the bounded
    ring still holds them: every few seconds)."""

    def __init__(self, api: Api) -> None:
        self.api, self.seq, self.count = api, 0, 0

    def read(self) -> int:
        while True:
            status, body, _ = self.api.call("GET", f"/api/v1/events?since={self.seq}&limit=10000")
            if status != 200 or not body:
                return self.count
            self.count += sum(e["kind"] == "dispatch" for e in body)
            self.seq = body[-1]["seq"]
            if len(body) < 10000:
                return self.count


def run_attached(
    minutes: float = 60.0,
    workers: int = 8,
    rate: float = 50.0,
    turn_s: float = 0.25,
    sample_s: float = 60.0,
    warmup_min: float = 5.0,
) -> None:
    """A detached scheduler (headless, holding the project's lock) and a console attached
    to it (``symphony-tui WORKFLOW.md`` on a pseudo-terminal), ``workers`` issues each
    re-dispatched as soon as its one short turn ends: both processes' RSS every
    ``sample_s`` seconds, and their growth from ``warmup_min`` to the end."""
    print(f"== attached soak: {workers} churning workers, turns of {turn_s:g} s, {minutes:g} min")
    project = FloodProject(workers, rate=rate, turn_s=turn_s, max_turns=1)
    scheduler = project.start(lock=True)
    console = None
    try:
        api = Api(project.port)
        project.wait_running(api, max(1, workers * 3 // 5))
        workflow = str(project.tmp / "WORKFLOW.md")
        logs = str(project.tmp / "console-logs")
        argv = [sys.executable, "-m", "symphony_tui", workflow, "--log-dir", logs]
        console = ConsoleOnPty(project, argv=argv)
        viewer = attached_console(console.proc.pid, project.port)
        print(f"console pid {viewer.pid} attached to the scheduler, pid {scheduler.pid}")
        dispatches = Dispatches(api)
        print(f"{'min':>6} {'scheduler MB':>13} {'console MB':>11} {'dispatches':>11} {'load':>6}")
        rows: list[tuple[float, float]] = []
        t0 = time.monotonic()
        n = 0
        while n * sample_s <= minutes * 60 + 0.5:
            while time.monotonic() - t0 < n * sample_s:
                time.sleep(2.0)
                dispatches.read()
                if scheduler.poll() is not None or console.proc.poll() is not None:
                    raise RuntimeError(f"a process exited; see {project.tmp}")
            rows.append((rss_mb(scheduler.pid), rss_mb(viewer.pid)))
            print(
                f"{n * sample_s / 60:>6.1f} {rows[-1][0]:>13.1f} {rows[-1][1]:>11.1f}"
                f" {dispatches.read():>11,} {os.getloadavg()[0]:>6.1f}",
                flush=True,
            )
            n += 1
        attached_console(console.proc.pid, project.port, timeout_s=10.0)  # still attached
        warm = min(len(rows) - 1, round(warmup_min * 60 / sample_s))
        for i, what in enumerate(("scheduler", "console")):
            growth = rows[-1][i] - rows[warm][i]
            figure(f"{what} RSS growth, {warmup_min:g} min -> end", growth, "MB")
        figure("dispatches", dispatches.read(), "runs")
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
    p.add_argument("--turn-s", type=float, help="each turn's length (3 s; --attached 0.25 s)")
    p.add_argument("--headless", action="store_true", help="the scheduler alone, no console")
    p.add_argument("--heap", type=Path, help="write heap dumps by type here at each mark")
    p.add_argument("--flood", action="store_true", help="long turns streaming deltas, no churn")
    p.add_argument(
        "--attached", action="store_true", help="a detached scheduler and a console attached to it"
    )
    p.add_argument("--sample-s", type=float, help="--flood, --attached: RSS sample period")
    p.add_argument("--warmup-min", type=float, default=5.0, help="--attached: growth from here")
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
    if a.attached:
        if a.flood or a.headless or a.heap or a.before:
            p.error("--attached goes without --flood, --headless, --heap and --before")
        run_attached(
            60.0 if a.minutes is None else a.minutes,
            8 if a.workers is None else a.workers,
            50.0 if a.rate is None else a.rate,
            0.25 if a.turn_s is None else a.turn_s,
            60.0 if a.sample_s is None else a.sample_s,
            a.warmup_min,
        )
        return
    if a.flood:
        run_flood(
            5.0 if a.minutes is None else a.minutes,
            40 if a.workers is None else a.workers,
            0.0 if a.rate is None else a.rate,
            30.0 if a.sample_s is None else a.sample_s,
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
        3.0 if a.turn_s is None else a.turn_s,
        headless=a.headless,
        heap=a.heap,
    )


if __name__ == "__main__":
    main()
