"""The cost of one resource sampling pass at 200 runs (scheduler/resources.py): 200 real
agent-like process groups (``sh`` leading a group with two ``sleep`` children, 600
processes), sampled as the scheduler does.

- **this machine**: ``local_pass`` (one psutil walk over every process) plus the CPU
  meter, in the sampling thread: CPU ms of this process per pass and per run, wall ms;
- **a worker host**: ``host_script`` for 200 workspaces (each with its agent's pgid
  file) run by ``sh`` here, as on a host: CPU ms of the host-side command (its children's
  rusage) and of parsing its output here, per pass and per run, wall ms, output bytes;
- **the loop**: applying the pass (``apply_sample``, a floor and a cap set) and the
  snapshot's memory rows, CPU ms each;
- **over ssh** (when sshd is installed): the same pass to one sshd on 127.0.0.1 over a
  shared master connection: wall ms, and the CPU of this machine's ``ssh`` client and the
  host's side together (one machine here).

``python -m tests.bench.bench_resources [--runs N] [--passes P]``. Prints figures, no
asserts. Linux (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from symphony_tui.hosts.resources import CpuMeter, host_script, local_pass, parse_host_output
from tests.bench._common import figure


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _spawn(n: int) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            ["sh", "-c", "sleep 600 & sleep 600 & wait"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def _end(groups: list[subprocess.Popen]) -> None:
    for proc in groups:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for proc in groups:
        proc.wait()


def _workspaces(root: Path, groups: list[subprocess.Popen]) -> list[str]:
    paths = []
    for i, proc in enumerate(groups):
        ws = root / f"ABC-{i}"
        (ws / ".symphony").mkdir(parents=True)
        (ws / ".symphony" / "agent-0123abcd.pgid").write_text(
            f"{proc.pid}\n{os.uname().nodename}\n"
        )
        paths.append(str(ws))
    return paths


def _local(groups: list[subprocess.Popen], passes: int) -> None:
    roots = {f"ABC-{i}": p.pid for i, p in enumerate(groups)}
    meter = CpuMeter()
    local_pass(roots)  # psutil's process cache warm, as after the first pass
    cpu0, wall0 = time.process_time(), time.perf_counter()
    found = 0
    for _ in range(passes):
        sample, _memory = local_pass(roots)
        usage = meter.usage(sample, time.monotonic())
        found = sum(u.processes for u in usage.values())
    cpu = (time.process_time() - cpu0) / passes * 1000
    wall = (time.perf_counter() - wall0) / passes * 1000
    n = len(groups)
    print(f"  this machine: {len(psutil.pids())} processes, {found} of them the agents'")
    figure(f"local pass at {n} runs, CPU", cpu, "ms")
    figure(f"local pass at {n} runs, CPU per run", cpu / n * 1000, "us")
    figure(f"local pass at {n} runs, wall", wall, "ms")


def _host(groups: list[subprocess.Popen], paths: list[str], passes: int) -> None:
    script = host_script(paths)
    n = len(groups)
    child0, wall0 = _children_cpu_s(), time.perf_counter()
    parse_cpu = 0.0
    size = 0
    for _ in range(passes):
        out = subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout
        size = len(out)
        t = time.process_time()
        found, _memory = parse_host_output(out.decode(), n)
        parse_cpu += time.process_time() - t
    host_cpu = (_children_cpu_s() - child0) / passes * 1000
    wall = (time.perf_counter() - wall0) / passes * 1000
    procs = sum(len(v) for v in found.values())
    print(f"  host command: {len(script):,} bytes of script, {size:,} bytes out, {procs} processes")
    figure(f"host pass at {n} runs, host-side CPU", host_cpu, "ms")
    figure(f"host pass at {n} runs, host-side CPU per run", host_cpu / n * 1000, "us")
    figure(f"host pass at {n} runs, parsing CPU here", parse_cpu / passes * 1000, "ms")
    figure(f"host pass at {n} runs, wall (no ssh)", wall, "ms")


def _over_ssh(paths: list[str], passes: int) -> None:
    from symphony_tui.config.worker_hosts import parse_host
    from symphony_tui.hosts.ssh import SshTarget
    from tests.hosts.sshd import HAVE_SSHD, Fleet

    if not HAVE_SSHD:
        print("  over ssh: sshd is not installed; skipped")
        return
    with tempfile.TemporaryDirectory(prefix="bench-res-ssh-") as tmp:
        fleet = Fleet(Path(tmp) / "fleet", 1)
        old = {k: os.environ.get(k) for k in fleet.env}
        os.environ.update(fleet.env)
        try:
            target = SshTarget(parse_host(fleet.names[0]))
            script = host_script(paths)

            async def passes_over_ssh() -> tuple[float, float]:
                await target.run("true")  # the master connection is up, as in steady state
                child0, wall0 = _children_cpu_s(), time.perf_counter()
                for _ in range(passes):
                    done = await target.run(script, timeout_s=60)
                    parse_host_output(done.stdout.decode(), len(paths))
                return _children_cpu_s() - child0, time.perf_counter() - wall0

            cpu, wall = asyncio.run(passes_over_ssh())
        finally:
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            fleet.close()
    figure(f"ssh pass at {len(paths)} runs, wall", wall / passes * 1000, "ms")
    print("  (the ssh client's CPU; sshd and the host command are not this process's children)")
    figure(f"ssh pass at {len(paths)} runs, ssh client CPU", cpu / passes * 1000, "ms")


def _loop_side(n: int, rounds: int = 200) -> None:
    """What the loop pays per pass: applying ``ResourcesSampled`` at ``n`` runs (with a
    floor and a cap set, so every check runs) and the snapshot's memory rows."""
    from symphony_tui.config.store import WorkflowStore
    from symphony_tui.hosts.resources import Memory, Usage
    from symphony_tui.scheduler.history.eventlog import EventHistory
    from symphony_tui.scheduler.inbox import ResourcesSampled
    from symphony_tui.scheduler.resources import apply_sample
    from symphony_tui.scheduler.run import Run
    from symphony_tui.scheduler.state import SchedulerState
    from symphony_tui.workspaces.manager import WorkspaceManager
    from symphony_tui_testing.clock import FakeClock
    from tests.scheduler.conftest import T0, make_issue, write_workflow

    with tempfile.TemporaryDirectory(prefix="bench-res-loop-") as tmp:
        front = "worker:\n  min_free_memory_mb: 1\n  max_memory_mb: 1000000\n"
        store = WorkflowStore(write_workflow(Path(tmp), front))
        store.load_initial()
        state = SchedulerState(
            store,
            FakeClock(T0),
            EventHistory(),
            WorkspaceManager(lambda: store.current.settings),
        )
        runs = [Run(make_issue(i), None, "codex", T0, 0.0, 0.0) for i in range(n)]
        state.running = {r.issue.id: r for r in runs}
        sample = ResourcesSampled(
            {r.issue.id: (r, Usage(300 << 20, 12.5, 3, root=i)) for i, r in enumerate(runs)},
            {None: Memory(8 << 30, 16 << 30)},
        )
        cpu0 = time.process_time()
        for _ in range(rounds):
            apply_sample(state, sample)
        applied = (time.process_time() - cpu0) / rounds * 1000
        worker = state.settings.worker
        cpu0 = time.process_time()
        for _ in range(rounds):
            state.resources.rows(worker, state.running)
        rows = (time.process_time() - cpu0) / rounds * 1000
    figure(f"loop: apply one pass at {n} runs", applied, "ms")
    figure(f"loop: a snapshot's memory rows at {n} runs", rows, "ms")


def run(runs: int = 200, passes: int = 20) -> None:
    print(f"bench_resources: one sampling pass at {runs} runs, mean of {passes} passes")
    groups = _spawn(runs)
    try:
        time.sleep(1.0)  # every group has its two children
        with tempfile.TemporaryDirectory(prefix="bench-res-") as tmp:
            paths = _workspaces(Path(tmp), groups)
            _local(groups, passes)
            _host(groups, paths, passes)
            _over_ssh(paths, passes)
    finally:
        _end(groups)
    _loop_side(runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args()
    run(args.runs, args.passes)
