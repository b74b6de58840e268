"""End-to-end ingest under a flood.

``python -m tests.bench.bench_flood [--workers 50 200] [--seconds 20] [--rate 0]
[--until-events N] [--before REF]``

``--before REF`` runs the scheduler of git commit REF (a ``git archive`` copy) right before
this tree's, per worker count, and prints the two side by side: before/after figures of one
run, under the same machine load. Agents start streaming only once every run is up.

For each worker count: the real ``symphony-tui --headless`` (HTTP API on loopback) runs that
many codex sessions, each on a scripted agent (:mod:`tests.bench.flood_agent`) streaming
``item/agentMessage/delta`` lines as fast as its pipe takes them (``--rate`` paces them
instead). Over a measured window it prints:

* agent events/s taken in and scheduler CPU microseconds per event (user + system time of
  the scheduler process over the same window), the scheduler's share of a core, and the
  scripted agents' CPU (all of them together: on a small machine they compete with the
  scheduler for its cores, where a real codex's would run elsewhere in CPU terms);
* latency from an agent writing a line to that line's text showing in a worker's
  ``last_message`` in ``GET /api/v1/state`` (p50 / p99 / max; 100 ms polls);
* under the same flood: ``GET /api/v1/state`` latency, interrupt-to-agent latency (the
  ``POST /api/v1/commands`` interrupt to the agent reading ``turn/interrupt``; the issue is
  then re-run), approval-visible latency (the agent sending ``requestApproval`` to the
  approval showing in ``GET /api/v1/snapshot``; 50 ms polls, answered from another thread so
  a slow answer does not delay seeing the next one) and approve-to-agent latency;
* the scheduler's RSS and its longest GC pauses (``gc.callbacks``);
* the time the scheduler takes to quit (SIGTERM) with all workers running (as
  ``bench_quit``, headless).

``--until-events N`` keeps the flood going until N events were taken in, then prints RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import threading
import time
from pathlib import Path

from tests.bench._common import figure
from tests.bench._flood import (
    ROOT,
    STAMP,
    Api,
    FloodProject,
    checkout,
    cpu_seconds,
    percentile,
    rss_mb,
)


def _ms(values: list[float]) -> str:
    if not values:
        return "no samples"
    p50, p99, mx = (percentile(values, 50), percentile(values, 99), max(values))
    return (
        f"p50 {p50 * 1000:,.0f}  p99 {p99 * 1000:,.0f}  max {mx * 1000:,.0f} ms  (n={len(values)})"
    )


def line(name: str, text: str) -> None:
    print(f"{name:<52} {text}")


class Probes:
    """The API pollers and the operator (interrupts, re-runs, approvals), in threads."""

    def __init__(self, project: FloodProject) -> None:
        self.project = project
        self.stop = threading.Event()
        self.state_latency: list[float] = []
        self.line_latency: list[float] = []
        self.snapshot_latency: list[float] = []
        self.command_latency: list[float] = []
        self.approval_visible: list[float] = []
        self.approved_at: dict[int, float] = {}  # approval n per issue -> when approved
        self.approvals_seen: set[str] = set()
        self.interrupts: list[tuple[str, float]] = []
        self.running: list[dict] = []
        self.interrupt_every_s = 1.0
        self.to_answer: queue.Queue[str] = queue.Queue()

    def poll_state(self) -> None:
        api = Api(self.project.port)
        while not self.stop.is_set():
            status, body, took = api.call("GET", "/api/v1/state")
            now = time.time()
            self.state_latency.append(took)
            if status == 200:
                self.running = body["running"]
                for row in self.running:
                    stamps = STAMP.findall(row.get("last_message") or "")
                    if stamps:
                        self.line_latency.append(now - float(stamps[-1]))
            self.stop.wait(0.1)

    def poll_approvals(self) -> None:
        """Polls ``/snapshot`` for new approvals; answering them is another thread's job
        (:meth:`answer_approvals`), so a slow answer never delays seeing the next one."""
        api = Api(self.project.port)
        while not self.stop.is_set():
            _, body, took = api.call("GET", "/api/v1/snapshot")
            now = time.time()
            self.snapshot_latency.append(took)
            for req in (body or {}).get("approvals") or []:
                rid, text = req.get("id"), req.get("command") or ""
                if rid in self.approvals_seen or not text.startswith("flood-approve "):
                    continue
                self.approvals_seen.add(rid)
                stamp = text.split()[2]
                self.approval_visible.append(now - float(stamp))
                self.to_answer.put(rid)
            self.stop.wait(0.05)

    def answer_approvals(self) -> None:
        cmd = Api(self.project.port)
        while not self.stop.is_set():
            try:
                rid = self.to_answer.get(timeout=0.2)
            except queue.Empty:
                continue
            _, _, took = cmd.call(
                "POST", "/api/v1/commands", {"type": "approve", "approval_id": rid}
            )
            self.command_latency.append(took)

    def operate(self) -> None:
        api = Api(self.project.port)
        done: set[str] = set()
        while not self.stop.wait(self.interrupt_every_s):
            rows = [r for r in self.running if r["issue_identifier"] not in done]
            if not rows:
                continue
            row = rows[len(self.interrupts) * 7 % len(rows)]
            done.add(row["issue_identifier"])
            self.interrupts.append((row["issue_identifier"], time.time()))
            body = {"type": "interrupt", "issue_id": row["issue_id"]}
            _, _, took = api.call("POST", "/api/v1/commands", body)
            self.command_latency.append(took)
            threading.Timer(0.5, self._rerun, (row["issue_id"],)).start()

    def _rerun(self, issue_id: str) -> None:
        if self.stop.is_set():
            return
        with contextlib.suppress(OSError):
            Api(self.project.port).call(
                "POST", "/api/v1/commands", {"type": "rerun", "issue_id": issue_id}
            )

    def _guard(self, loop) -> None:
        try:
            loop()
        except OSError:  # the scheduler went away: the figures so far stand
            pass

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._guard, args=(f,), daemon=True)
            for f in (self.poll_state, self.poll_approvals, self.answer_approvals, self.operate)
        ]
        for t in threads:
            t.start()
        return threads

    def interrupt_latency(self) -> list[float]:
        notes = self.project.agent_notes("interrupt")
        out = []
        for ident, sent in self.interrupts:
            got = [n["t"] for n in notes if n.get("issue") == ident and n["t"] >= sent - 0.001]
            if got:
                out.append(min(got) - sent)
        return out


class Figures:
    """Prints each figure as it is measured and keeps its text for a side-by-side table."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def num(self, name: str, value: float, unit: str, target: str = "") -> None:
        figure(name, value, unit, target)
        self.rows[name] = f"{value:,.1f} {unit}"

    def ms(self, name: str, values: list[float], target: str = "") -> None:
        line(name, _ms(values) + (f"   (target {target})" if target else ""))
        if values:
            p50, p99 = percentile(values, 50) * 1000, percentile(values, 99) * 1000
            self.rows[name] = f"{p50:,.0f} / {p99:,.0f} / {max(values) * 1000:,.0f} ms"
        else:
            self.rows[name] = "no samples"


def flood(
    workers: int, seconds: float, rate: float, until_events: int, root: Path = ROOT
) -> dict[str, str]:
    project = FloodProject(
        workers, rate=rate, approval_every_s=max(2.0, workers / 5), root=root, gated=True
    )
    label = "this tree" if root == ROOT else f"code of {root}"
    print(
        f"-- {workers} workers, {'saturating' if rate <= 0 else f'{rate:g} lines/s each'}, {label}"
    )
    out = Figures()
    try:
        project.start()
        assert project.proc is not None
        pid = project.proc.pid
        api = Api(project.port)
        took = project.wait_running(api, workers, timeout_s=300 + 3 * workers)
        out.num(f"start-up to {workers} runs (before the flood)", took, "s")
        project.go()
        time.sleep(3.0)  # warm-up
        probes = Probes(project)
        threads = probes.start()
        a0 = project.agent_cpu_seconds()
        c0, n0, t0 = cpu_seconds(pid), project.agent_lines(), time.monotonic()
        rss_max = 0.0
        while time.monotonic() - t0 < seconds:
            time.sleep(0.5)
            rss_max = max(rss_max, rss_mb(pid))
        c1, n1, t1 = cpu_seconds(pid), project.agent_lines(), time.monotonic()
        a1 = project.agent_cpu_seconds()
        probes.stop.set()
        for t in threads:
            t.join(30)
        events = n1 - n0
        rate_s = events / (t1 - t0)
        us = (c1 - c0) / max(events, 1) * 1e6
        out.num("agent events taken in", rate_s, "events/s", ">= 25,000/s")
        out.num("scheduler CPU per event", us, "us", "<= 40 us")
        out.num("scheduler CPU use", (c1 - c0) / (t1 - t0) * 100, "% of a core")
        agents_s = sum(a1[p] - a0[p] for p in a1.keys() & a0.keys())
        out.num(
            f"the {workers} agents' CPU use (all together)",
            agents_s / (t1 - t0) * 100,
            "% of a core",
        )
        out.ms("agent line -> API last_message", probes.line_latency)
        out.ms("GET /api/v1/state under the flood", probes.state_latency, "p99 <= 250")
        out.ms("GET /api/v1/snapshot under the flood", probes.snapshot_latency)
        out.ms("POST /api/v1/commands under the flood", probes.command_latency)
        out.ms("interrupt -> agent reads turn/interrupt", probes.interrupt_latency(), "p99 <= 250")
        out.ms("requestApproval -> visible in the API", probes.approval_visible, "p99 <= 250")
        if until_events:
            deadline = time.monotonic() + 3600
            while project.agent_lines() < until_events and time.monotonic() < deadline:
                time.sleep(1.0)
                rss_max = max(rss_max, rss_mb(pid))
            out.num(f"RSS after {until_events:,}+ events", rss_mb(pid), "MB", "<= 150 MB at 50")
        out.num("scheduler RSS (max over the window)", rss_max, "MB")
        gc = project.gc_stats()
        t_end = time.monotonic()  # the window, and with --until-events the filling after it
        window = [p for p in gc.get("gc2_pauses", []) if t0 <= p[0] <= t_end]
        out.num("full GC collections in the window", len(window), "")
        out.num(
            "longest full GC pause in the window (wall / CPU)",
            max((p[1] for p in window), default=0.0),
            "ms",
            "<= 50",
        )
        line("  in CPU time", f"{max((p[2] for p in window), default=0.0):,.1f} ms")
        out.rows["longest full GC pause in the window (wall / CPU)"] += (
            f" / {max((p[2] for p in window), default=0.0):,.1f} ms"
        )
        out.num(
            "longest GC pause (any generation)", gc.get("gc_max_ms", float("nan")), "ms", "<= 50"
        )
        out.num(
            "longest GC pause in CPU time (any generation)",
            gc.get("gc_max_cpu_ms", float("nan")),
            "ms",
            "<= 50",
        )
        out.num("longest full (gen 2) GC pause", gc.get("gc2_max_ms", float("nan")), "ms")
        out.num("longest full GC pause in CPU time", gc.get("gc2_max_cpu_ms", float("nan")), "ms")
        out.num("full GC collections (whole run)", gc.get("gc2_count", 0), "")
        out.num("objects tracked at that full collection", gc.get("gc2_tracked", 0), "")
        out.num("  their references (what it traverses)", gc.get("gc2_refs", 0), "")
        out.num("  garbage it collected", gc.get("gc2_collected", 0), "")
        out.num("objects frozen (permanent generation) at the end", gc.get("freeze_count", 0), "")
        top = gc.get("gc2_top") or {}
        line("  commonest types then", ", ".join(f"{k} {v:,}" for k, v in list(top.items())[:8]))
        quit_s = project.stop()
        out.num(f"quit (SIGTERM, headless) with {workers} workers", quit_s, "s", "< 5 s")
        return out.rows
    finally:
        project.stop()
        project.cleanup()


def side_by_side(workers: int, before: dict[str, str], after: dict[str, str]) -> None:
    print(f"\n{workers} workers | before | after")
    print("--- | --- | ---")
    for name in dict.fromkeys([*before, *after]):
        print(f"{name} | {before.get(name, '-')} | {after.get(name, '-')}")
    print()


def run(
    workers: tuple[int, ...] = (50, 200),
    seconds: float = 20.0,
    rate: float = 0.0,
    until_events: int = 0,
    before_ref: str = "",
) -> None:
    """``before_ref``: also run the scheduler of that commit, right before this tree's, per
    worker count, and print both side by side (figures of one run, same machine load)."""
    print("== end-to-end flood through the codex backend")
    print(f"load average before: {os.getloadavg()}")
    before_root = checkout(before_ref) if before_ref else None
    try:
        for n in workers:
            before = flood(n, seconds, rate, until_events, before_root) if before_root else None
            after = flood(n, seconds, rate, until_events)
            if before is not None:
                side_by_side(n, before, after)
            print(f"load average now: {os.getloadavg()}")
    finally:
        if before_root is not None:
            shutil.rmtree(before_root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[50, 200])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--until-events", type=int, default=0)
    p.add_argument(
        "--before",
        default="",
        metavar="REF",
        help="also run the scheduler of git REF first and print both side by side",
    )
    a = p.parse_args()
    run(tuple(a.workers), a.seconds, a.rate, a.until_events, a.before)


if __name__ == "__main__":
    main()
