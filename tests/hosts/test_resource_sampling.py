"""Sampling an agent's memory and CPU over real processes: this machine's pass (psutil,
the agent's process tree and group), a worker host's one-command pass run here by ``sh``
(from ``/proc`` and from ``ps``), the real ``ps`` output of this machine, and the same
pass over a real sshd host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from symphony_tui.config.worker_hosts import parse_host
from symphony_tui.hosts.resources import (
    MIB,
    CpuMeter,
    cpu_time_s,
    host_script,
    local_pass,
    parse_host_output,
    parse_ps_line,
    proc_table,
    psutil_table,
)
from symphony_tui.hosts.ssh import SshTarget

#: A child that allocates ``MB`` MiB (touched, so resident) in a grandchild, then sleeps.
TREE = """
import os, sys, time
mb = int(sys.argv[1])
if os.fork() == 0:
    block = bytearray(mb * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(600)
else:
    time.sleep(600)
"""


def _spawn_tree(tmp_path: Path, mb: int) -> tuple[subprocess.Popen, int]:
    """An agent-like group leader whose grandchild holds ``mb`` MiB; (leader, grandchild)."""
    ready = tmp_path / f"ready-{mb}"
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE, str(mb), str(ready)], start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text():
        assert time.monotonic() < deadline, "the allocating child did not start"
        time.sleep(0.05)
    return proc, int(ready.read_text())


def _end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.fixture
def tree(tmp_path):
    proc, grandchild = _spawn_tree(tmp_path, 96)
    yield proc, grandchild
    _end(proc)


def test_this_machines_pass_counts_the_children_of_the_agent(tree) -> None:
    leader, grandchild = tree
    groups, memory = local_pass({"ABC-1": leader.pid, "gone": 2**22 + 7})
    pids = {p.pid for p in groups["ABC-1"]}
    assert {leader.pid, grandchild} <= pids
    assert sum(p.rss_bytes for p in groups["ABC-1"]) >= 96 * MIB
    assert groups["gone"] == []
    assert memory.available is not None and 0 < memory.available <= (memory.total or 0)


def test_the_psutil_walk_sees_what_the_proc_walk_sees(tree) -> None:
    # A machine without /proc walks the process table through psutil: same parents,
    # groups and (nearly) the same memory.
    leader, grandchild = tree
    fast, portable = proc_table(), psutil_table()
    assert fast is not None
    for pid in (leader.pid, grandchild):
        assert fast[pid][:2] == portable[pid][:2] and fast[pid][1] == leader.pid
        assert abs(fast[pid][2].rss_bytes - portable[pid][2].rss_bytes) < 8 * MIB


def test_a_member_that_left_the_tree_still_counts_by_its_group(tmp_path) -> None:
    # The middle process exits: the grandchild is re-parented away from the leader's
    # tree but stays in its process group.
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n"
    )
    ready = tmp_path / "orphan"
    leader = subprocess.Popen([sys.executable, "-c", script, str(ready)], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() or not ready.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        orphan = int(ready.read_text())
        while orphan in {c.pid for c in psutil.Process(leader.pid).children(recursive=True)}:
            assert time.monotonic() < deadline, "the middle process did not exit"
            time.sleep(0.05)
        groups, _ = local_pass({"k": leader.pid})
        assert orphan in {p.pid for p in groups["k"]}
    finally:
        _end(leader)


def test_cpu_is_a_percentage_from_the_second_pass_on(tmp_path) -> None:
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        meter = CpuMeter()
        groups, _ = local_pass({"k": spin.pid})
        first = meter.usage(groups, time.monotonic())["k"]
        assert first.cpu_percent is None and first.processes == 1
        time.sleep(0.5)
        groups, _ = local_pass({"k": spin.pid})
        second = meter.usage(groups, time.monotonic())["k"]
        assert second.cpu_percent is not None and second.cpu_percent > 0
    finally:
        _end(spin)


def _workspace_of(tmp_path: Path, leader: int) -> Path:
    """A workspace whose agent pgid file names ``leader``'s group, as the remote
    launcher writes it (``agent-<id>.pgid``: pid, then the host's name)."""
    ws = tmp_path / "ws" / "ABC-1"
    (ws / ".symphony").mkdir(parents=True)
    (ws / ".symphony" / "agent-0123abcd.pgid").write_text(f"{leader}\n{os.uname().nodename}\n")
    (ws / ".symphony" / "hook-1.pgid").write_text("1\n")  # a hook's group is not the agent
    return ws


@pytest.mark.parametrize("use_proc", [True, False], ids=["proc", "ps"])
def test_a_hosts_pass_finds_the_agent_group_of_each_workspace(tree, tmp_path, use_proc) -> None:
    leader, grandchild = tree
    ws = _workspace_of(tmp_path, leader.pid)
    script = host_script([str(tmp_path / "none"), str(ws)], use_proc=use_proc)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    found, memory = parse_host_output(done.stdout, 2)
    assert found[0] == []
    assert {leader.pid, grandchild} <= {p.pid for p in found[1]}
    assert sum(p.rss_bytes for p in found[1]) >= 96 * MIB
    assert memory.available is not None and memory.total is not None
    assert abs(memory.available - psutil.virtual_memory().available) < 512 * MIB


def test_this_machines_real_ps_output_parses_line_for_line() -> None:
    out = subprocess.run(
        ["ps", "-A", "-o", "pgid=", "-o", "pid=", "-o", "rss=", "-o", "time="],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    parsed = [parse_ps_line(line) for line in lines]
    assert lines and all(p is not None for p in parsed)
    mine = next(p for g, p in (x for x in parsed if x) if p.pid == os.getpid())
    own = psutil.Process().memory_info().rss
    assert abs(mine.rss_bytes - own) < 64 * MIB
    assert cpu_time_s("1-02:03:04") == 93784 and cpu_time_s("00:01:02") == 62
    assert cpu_time_s("3:04.5") == 184.5
    assert parse_ps_line("12 34 not-a-number 00:00:01") is None


def test_a_hosts_output_without_its_lines_is_nothing_lost() -> None:
    found, memory = parse_host_output("motd line\nG 9 5\nP x y\nM 0 0\n", 1)
    assert found == {0: []} and memory.available is None


@pytest.mark.slow
async def test_a_pass_over_a_real_sshd_host(fleet, tree, tmp_path) -> None:
    leader, grandchild = tree
    ws = _workspace_of(tmp_path, leader.pid)  # the fleet's hosts are this machine
    target = SshTarget(parse_host(fleet.names[0]))
    done = await target.run(host_script([str(ws)]), timeout_s=30)
    found, memory = parse_host_output(done.stdout.decode(), 1)
    assert {leader.pid, grandchild} <= {p.pid for p in found[0]}
    assert memory.available is not None


@pytest.mark.slow
async def test_a_pass_is_one_ssh_command_per_host_whatever_its_runs(fleet, tmp_path) -> None:
    from symphony_tui.config.store import WorkflowStore
    from symphony_tui.hosts.ssh import HostTargets
    from symphony_tui.scheduler.history.eventlog import EventHistory
    from symphony_tui.scheduler.resources import ResourceSampler
    from symphony_tui.scheduler.run import Run
    from symphony_tui.scheduler.state import SchedulerState
    from symphony_tui.workspaces.manager import WorkspaceManager
    from symphony_tui_testing.clock import FakeClock
    from tests.scheduler.conftest import T0, make_issue, write_workflow

    busy, idle = fleet.names
    hosts = ", ".join(f'"{name}"' for name in fleet.names)
    store = WorkflowStore(write_workflow(tmp_path, f"worker:\n  ssh_hosts: [{hosts}]\n"))
    store.load_initial()
    state = SchedulerState(
        store, FakeClock(T0), EventHistory(), WorkspaceManager(lambda: store.current.settings)
    )
    groups = [
        subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"], start_new_session=True)
        for _ in range(3)
    ]
    try:
        for n, group in enumerate(groups, 1):
            ws = tmp_path / "remote" / f"ABC-{n}"
            (ws / ".symphony").mkdir(parents=True)
            (ws / ".symphony" / "agent-0123abcd.pgid").write_text(f"{group.pid}\n")
            run = Run(make_issue(n), None, "codex", T0, 0.0, 0.0, worker_host=busy, workspace=ws)
            state.running[run.issue.id] = run
        real = HostTargets(lambda: store.current.settings)
        calls: list[str] = []

        class Counted:
            def __init__(self, name: str) -> None:
                self.name = name

            async def run(self, script: str, **kwargs):
                calls.append(self.name)
                return await real(self.name).run(script, **kwargs)

        sampler = ResourceSampler(state, lambda item: None, Counted)  # type: ignore[arg-type]  # a counting SshTarget
        first = await sampler.sample()
        time.sleep(0.2)
        second = await sampler.sample()
        assert sorted(calls) == sorted([busy, idle] * 2)  # one command per host per pass
        assert set(second.machines) == {busy, idle}
        assert set(second.runs) == {"id-1", "id-2", "id-3"}
        for run, usage in second.runs.values():
            assert usage.processes == 3 and usage.rss_bytes > 0
            assert usage.cpu_percent is not None and first.runs[run.issue.id][1].cpu_percent is None
    finally:
        for group in groups:
            _end(group)
