"""``symphony-tui fleet`` figures: N headless schedulers (the real CLI, the demo agent) with
M busy workers each, followed by one :class:`~symphony_tui.fleet.port.FleetPort` in this
process, read the way the console reads its port (``snapshot()`` + ``events_since()`` ten
times a second).

Prints: start-up to every project live; over a ``--window`` the fleet process's CPU (% of
one core) and RSS, events/s merged, ``snapshot()`` cost p50/p99/max and how many merges
were rebuilt; the merge alone on synthetic snapshots (``--merge-projects`` x
``--merge-workers``, default 20 x 50: namespacing one project, rebuilding the whole; one
stream change frame applied, the whole document against what it touched);
then one scheduler frozen with ``SIGSTOP``: seconds until its row is stale, the other
projects' largest age meanwhile, seconds to live after ``SIGCONT``, and, per project, the
fleet's events against the scheduler's own ``/api/v1/events`` (lost, doubled).

``python -m tests.bench.bench_fleet --schedulers 5 --workers 10`` (figures, no asserts).
The console's own drawing is not in these figures (``bench_console.py`` measures it).
The schedulers get a private ``HOME`` (their hooks' ``bash -lc`` reads no login profile).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import jsonpatch
import psutil

from symphony_tui.api.patching import apply_change
from symphony_tui.domain import Snapshot
from symphony_tui.domain.approvals import ApprovalRequest
from symphony_tui.domain.kinds import ApprovalKind
from symphony_tui.domain.snapshot import IssueRow, ProjectRow, RunningRow
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.merge import merge, parts_of
from symphony_tui.fleet.port import FleetPort
from tests.api.remote_scheduler import HeadlessScheduler, issues_yaml
from tests.bench._common import figure

STARTED: list[HeadlessScheduler] = []


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def merge_alone(projects: int, workers: int) -> None:
    now = datetime.now(UTC)
    snaps = [
        Snapshot(
            generated_at=now,
            issues=tuple(
                IssueRow(issue_id=f"i{n}", identifier=f"P-{n}", title="task", state="Todo")
                for n in range(workers * 2)
            ),
            running=tuple(
                RunningRow(issue_id=f"i{n}", issue_identifier=f"P-{n}", state="Todo")
                for n in range(workers)
            ),
            approvals=(ApprovalRequest(id="i1:1", issue_id="i1", kind=ApprovalKind.COMMAND),),
            token_history=tuple(range(60)),
        )
        for _ in range(projects)
    ]
    rows = tuple(ProjectRow(name=f"p{n}", target="t") for n in range(projects))
    times = []
    for _ in range(20):
        start = time.perf_counter()
        parts_of("p0", snaps[0])
        times.append((time.perf_counter() - start) * 1000)
    figure(
        f"namespace one project ({workers} workers, {2 * workers} issues)",
        statistics.median(times),
        "ms",
    )
    parts = [parts_of(f"p{n}", s) for n, s in enumerate(snaps)]
    times = []
    for _ in range(20):
        start = time.perf_counter()
        merge(parts, rows)
        times.append((time.perf_counter() - start) * 1000)
    figure(f"merge {projects} projects (parts ready)", statistics.median(times), "ms")
    change_applied(snaps[0], workers)


def change_applied(snap: Snapshot, workers: int) -> None:
    """One stream ``change`` frame applied by the client (``api/patching.py``): the time
    and one row's turn moved, as a busy scheduler sends twice a second. Side by side: the
    whole document copied and validated again, and the patch applied in place with only
    what it touched validated."""
    doc = json.loads(snap.model_dump_json())
    rows = list(snap.running)
    rows[3] = rows[3].model_copy(update={"turn_count": 7})
    moved = snap.model_copy(update={"running": tuple(rows), "seconds_running": 5.0})
    patch = jsonpatch.make_patch(doc, json.loads(moved.model_dump_json())).patch
    whole, touched = [], []
    for _ in range(50):
        start = time.perf_counter()
        Snapshot.model_validate(jsonpatch.apply_patch(doc, patch))
        whole.append((time.perf_counter() - start) * 1000)
        held = copy.deepcopy(doc)  # apply_change changes its document
        start = time.perf_counter()
        apply_change(held, snap, patch)
        touched.append((time.perf_counter() - start) * 1000)
    label = f"a change frame ({workers} workers)"
    figure(f"{label}: copy + validate all", statistics.median(whole), "ms")
    figure(f"{label}: in place + what it touched", statistics.median(touched), "ms")


async def bench(schedulers: int, workers: int, window: float, root: Path) -> None:
    state = root / "state"
    os.environ["XDG_STATE_HOME"] = str(state)
    # a private HOME: the hooks' ``bash -lc`` runs no login profile of this machine's
    (root / "home").mkdir()
    os.environ["HOME"] = str(root / "home")
    # many more issues than workers: runs end and new ones start the whole time
    issues = issues_yaml(workers * 6, "Busy work. [demo: two-turns]")

    def start(n: int) -> HeadlessScheduler:
        sched = HeadlessScheduler(
            root / f"s{n}", issues, state_home=state, name=f"project{n}", max_agents=workers
        )
        STARTED.append(sched)
        return sched

    t0 = time.monotonic()
    scheds = await asyncio.gather(*(asyncio.to_thread(start, n) for n in range(schedulers)))
    figure("schedulers started (API up)", time.monotonic() - t0, "s")
    fleet = FleetPort([tg.parse("local")])
    origin: list[tuple[str, int]] = []
    take = fleet._take

    def recording(project, events):  # the scheduler's own seq, before the fleet's
        origin.extend((project.name, e.seq) for e in events)
        take(project, events)

    fleet._take = recording  # type: ignore[method-assign]
    runner = asyncio.create_task(fleet.run())
    proc = psutil.Process()
    try:
        t0 = time.monotonic()
        while True:
            rows = fleet.snapshot().projects
            if len(rows) == schedulers and all(r.link_state == "live" for r in rows):
                break
            await asyncio.sleep(0.05)
        figure("every project live", time.monotonic() - t0, "s")
        busy_by = time.monotonic() + 30  # most workers running, or 30 s
        while sum(r.running for r in fleet.snapshot().projects) < schedulers * workers * 0.8:
            if time.monotonic() > busy_by:
                break
            await asyncio.sleep(0.2)

        async def console_reads(seconds: float) -> tuple[list[float], int]:
            costs: list[float] = []
            cpu: list[float] = []
            held = fleet.events_since(0, limit=100_000)  # numbers what waits: read from here
            last = held[-1].seq if held else 0
            taken = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                start, start_cpu = time.perf_counter(), time.thread_time()
                fleet.snapshot()
                got = fleet.events_since(last, limit=2000)
                costs.append((time.perf_counter() - start) * 1000)
                cpu.append((time.thread_time() - start_cpu) * 1000)
                if got:
                    last = got[-1].seq
                    taken += len(got)
                await asyncio.sleep(0.1)
            return costs, cpu, taken

        cpu0, rebuilds0 = proc.cpu_times(), fleet.rebuilds
        wall0 = time.monotonic()
        costs, cpu, taken = await console_reads(window)
        cpu1, wall = proc.cpu_times(), time.monotonic() - wall0
        used = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall * 100
        running = sum(r.running for r in fleet.snapshot().projects)
        print(f"-- {schedulers} schedulers x {workers} workers ({running} running), {window:.0f} s")
        figure("fleet process CPU (% of one core)", used, "%", "<= 30 at 20x50, console incl.")
        figure("fleet process RSS", proc.memory_info().rss / 2**20, "MiB", "<= 200")
        figure("events merged per second", taken / wall, "ev/s")
        figure("snapshot()+events_since() wall p50", percentile(costs, 0.5), "ms")
        figure("snapshot()+events_since() wall p99", percentile(costs, 0.99), "ms")
        figure("snapshot()+events_since() CPU p50", percentile(cpu, 0.5), "ms")
        figure("snapshot()+events_since() CPU p99", percentile(cpu, 0.99), "ms")
        figure("snapshot()+events_since() CPU max", max(cpu), "ms")
        figure("merges rebuilt per second", (fleet.rebuilds - rebuilds0) / wall, "/s")

        # one scheduler frozen
        frozen = scheds[0]
        name = frozen.workflow.parent.name
        ages: list[float] = []
        frozen.signal(signal.SIGSTOP)
        t0 = time.monotonic()
        while True:
            rows = {r.name: r for r in fleet.snapshot().projects}
            ages.extend(r.age_s or 0.0 for n, r in rows.items() if n != name)
            if rows[name].link_state == "stale":
                break
            await asyncio.sleep(0.05)
        figure("SIGSTOP: seconds until its row is stale", time.monotonic() - t0, "s", "<= 10")
        figure("  the other projects' largest age meanwhile", max(ages, default=0), "s")
        others_live = all(
            r.link_state == "live" for r in fleet.snapshot().projects if r.name != name
        )
        print(f"  the other projects all live: {others_live}")
        frozen.signal(signal.SIGCONT)
        t0 = time.monotonic()
        while {r.name: r for r in fleet.snapshot().projects}[name].link_state != "live":
            await asyncio.sleep(0.05)
        figure("SIGCONT: seconds until live again", time.monotonic() - t0, "s")
        await asyncio.sleep(3.0)  # let the catch-up land
        lost = doubled = 0
        for sched in scheds:
            project = sched.workflow.parent.name
            async with httpx.AsyncClient(base_url=sched.url, timeout=10) as raw:
                got = await raw.get("/api/v1/events", params={"since": 0, "limit": 100_000})
            server = [e["seq"] for e in got.json()]
            mine = [seq for p, seq in origin if p == project]
            common = [s for s in server if mine and mine[0] <= s <= mine[-1]]
            lost += len(set(common) - set(mine))
            doubled += len(mine) - len(set(mine))
        figure("events lost across all projects (server ring vs fleet)", lost, "")
        figure("events doubled", doubled, "")
        seqs = [e.seq for e in fleet.events_since(0, limit=100_000)]
        print(f"  fleet seq strictly increasing: {seqs == sorted(set(seqs))}")
    finally:
        await fleet.close()
        runner.cancel()
        await asyncio.gather(*(asyncio.to_thread(s.stop) for s in scheds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedulers", type=int, default=5)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--merge-projects", type=int, default=20)
    parser.add_argument("--merge-workers", type=int, default=50)
    parser.add_argument(
        "--synthetic-only", action="store_true", help="only the merge and change-frame figures"
    )
    args = parser.parse_args()
    merge_alone(args.merge_projects, args.merge_workers)
    if args.synthetic_only:
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below runs
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as root:
        try:
            asyncio.run(bench(args.schedulers, args.workers, args.window, Path(root)))
        finally:
            for sched in STARTED:  # no scheduler outlives the bench
                sched.stop()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
