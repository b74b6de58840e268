"""Admission by memory over this machine's real memory (scheduler/resources.py): a floor
above what is free holds dispatch with the reason on the issue row, a reload that lowers
it lets the issue start; a running agent's real process tree is sampled into its row, the
API state and ``/metrics`` (its series gone once it ended), and the event of a machine
running short names its largest agent. The samples are applied by the loop only."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psutil

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.metrics import render
from symphony_tui.domain import EventKind
from symphony_tui.hosts.resources import MIB
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui_testing.scripted_backend import ScriptedSession

from .conftest import make_issue

HUGE_MB = 1_000_000_000  # a petabyte: above any machine's free memory

HELD = f"""\
worker:
  min_free_memory_mb: {HUGE_MB}
  resource_sample_ms: 100
"""

#: A child of the agent that holds ``MB`` MiB (touched, so resident), then sleeps.
HOG = """
import os, sys, time
if os.fork() == 0:
    block = bytearray(int(sys.argv[1]) * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    open(sys.argv[2], "w").write("ready")
    time.sleep(600)
time.sleep(600)
"""


class Agent(ScriptedSession):
    """A scripted session whose agent is a real process group (:data:`HOG`)."""

    agent: subprocess.Popen

    @property
    def pid(self) -> int | None:
        return self.agent.pid


def _real_agents(h, tmp_path, monkeypatch, mb: int = 64) -> list[subprocess.Popen]:
    """Every session the harness starts gets a real agent process group holding ``mb``
    MiB in a child; returns the agents started (the test ends them)."""
    agents: list[subprocess.Popen] = []
    scripted = h.backend.start_session

    async def start_session(host):
        session = await scripted(host)
        ready = tmp_path / f"hog-ready-{len(agents)}"
        agent = subprocess.Popen(
            [sys.executable, "-c", HOG, str(mb), str(ready)], start_new_session=True
        )
        agents.append(agent)
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline, "the agent's child did not allocate"
            await asyncio.sleep(0.05)
        session.__class__ = Agent
        session.agent = agent
        return session

    monkeypatch.setattr(h.backend, "start_session", start_session)
    return agents


def _end(agents: list[subprocess.Popen]) -> None:
    for agent in agents:
        try:
            os.killpg(agent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        agent.wait()


def _workflow(h, front: str) -> None:
    path = h.root / "WORKFLOW.md"
    text = path.read_text()
    head, _, rest = text.partition("---\n")[2].partition("---\n")
    base = head.split("worker:")[0]
    path.write_text(f"---\n{base}{front}---\n{rest}")


def _row(h, issue_id: str):
    return next(r for r in h.orch.snapshot().issues if r.issue_id == issue_id)


async def test_a_floor_above_free_memory_holds_dispatch_until_a_reload_lowers_it(make_harness):
    h = make_harness([make_issue(1)], front=HELD)
    await h.start()
    await h.settle()
    assert "id-1" not in h.orch.running and "ABC-1" not in h.orch.completed
    row = _row(h, "id-1")
    assert row.note.startswith("waiting for memory: this machine has ")
    assert f"under the {HUGE_MB:,} MB floor" in row.note
    snap = h.orch.snapshot()
    (machine,) = snap.memory
    assert machine.host is None and machine.short is not None
    free = psutil.virtual_memory().available
    assert machine.available_bytes is not None and abs(machine.available_bytes - free) < 2048 * MIB
    assert snap.state_payload()["memory"][0]["short"] == machine.short

    _workflow(h, "worker:\n  min_free_memory_mb: 1\n  resource_sample_ms: 100\n")
    await h.orch.tick()  # re-reads WORKFLOW.md first
    await h.settle()
    assert "id-1" in h.orch.running or "ABC-1" in h.orch.completed
    assert _row(h, "id-1").note in ("", "completed")


async def test_a_running_agents_memory_is_sampled_and_named_when_the_machine_runs_short(
    make_harness, tmp_path, monkeypatch
):
    changers: list[str] = []
    appenders: list[str] = []
    changed, append = SchedulerState.changed, EventHistory.append

    def spy_changed(self):
        changers.append(asyncio.current_task().get_name())
        return changed(self)

    def spy_append(self, event, **stamp):
        appenders.append(asyncio.current_task().get_name())
        return append(self, event, **stamp)

    release = asyncio.Event()

    async def hold(session, prompt, turn):
        await release.wait()
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    h = make_harness(
        [make_issue(1)],
        script=hold,
        front="agent:\n  max_turns: 1\nworker:\n  resource_sample_ms: 100\n",
    )
    agents = _real_agents(h, tmp_path, monkeypatch)
    try:
        await h.start()
        monkeypatch.setattr(SchedulerState, "changed", spy_changed)
        monkeypatch.setattr(EventHistory, "append", spy_append)

        def sampled():
            rows = h.orch.snapshot().running
            return rows and (rows[0].rss_bytes or 0) >= 64 * MIB and rows[0].cpu_percent is not None

        await h.until(sampled, timeout=60)
        row = h.orch.snapshot().running[0]
        state = h.orch.snapshot().state_payload()["running"][0]
        assert state["rss_bytes"] == row.rss_bytes and state["cpu_percent"] == row.cpu_percent
        metrics = render(h.orch.snapshot).decode()
        assert 'symphony_run_rss_bytes{host="' in metrics and 'issue="ABC-1"' in metrics
        assert "symphony_host_memory_short{" in metrics

        # The floor goes above free memory: ABC-2 waits, and the event names ABC-1.
        h.tracker.put(make_issue(2))
        _workflow(h, f"worker:\n  min_free_memory_mb: {HUGE_MB}\n  resource_sample_ms: 100\n")
        await h.orch.tick()

        def short_event():
            return [
                e.message
                for e in h.orch.events_since(0)
                if e.kind is EventKind.WARNING and "short of memory" in e.message
            ]

        await h.until(short_event, timeout=30)
        (said,) = short_event()
        assert said.startswith("short of memory: this machine has ")
        assert "largest agent ABC-1 (" in said and " MB)" in said
        assert "id-2" not in h.orch.running
        assert _row(h, "id-2").note.startswith("waiting for memory: ")

        _workflow(h, "worker:\n  min_free_memory_mb: 0\n  resource_sample_ms: 100\n")
        await h.orch.tick()
        await h.until(lambda: "id-2" in h.orch.running, timeout=30)

        release.set()
        await h.until(lambda: not h.orch.running, timeout=30)
        await h.settle()
        assert 'issue="ABC-1"' not in render(h.orch.snapshot).decode()
        # Only the loop applied the samples (and this test's task, before monkeypatching).
        assert set(changers) <= {"scheduler-loop"} and set(appenders) <= {"scheduler-loop"}
    finally:
        _end(agents)


async def test_agents_at_the_machines_cap_hold_the_next_run(make_harness, tmp_path, monkeypatch):
    release = asyncio.Event()

    async def hold(session, prompt, turn):
        await release.wait()
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    front = "agent:\n  max_turns: 1\nworker:\n  max_memory_mb: {cap}\n  resource_sample_ms: 100\n"
    h = make_harness([make_issue(1)], script=hold, front=front.format(cap=48))
    agents = _real_agents(h, tmp_path, monkeypatch)
    try:
        await h.start()  # nothing runs yet: ABC-1 starts
        await h.until(lambda: (h.orch.snapshot().memory[0].agents_rss_bytes or 0) >= 64 * MIB)
        h.tracker.put(make_issue(2))
        await h.orch.tick()
        assert "id-2" not in h.orch.running
        note = _row(h, "id-2").note
        assert note.startswith("waiting for memory: agents on this machine use ")
        assert note.endswith("the cap is 48 MB")
        (machine,) = h.orch.snapshot().memory
        assert machine.short is not None and machine.agents_rss_bytes >= 64 * MIB
        _workflow(h, front.format(cap=4096))
        await h.orch.tick()
        await h.until(lambda: "id-2" in h.orch.running)
        release.set()
        await h.until(lambda: not h.orch.running, timeout=30)
    finally:
        _end(agents)


def test_a_server_that_runs_share_counts_once_in_the_machines_total() -> None:
    from symphony_tui.hosts.resources import Usage
    from symphony_tui.scheduler.resources import ResourceBook
    from symphony_tui.scheduler.run import Run

    from .conftest import T0

    def run(n: int) -> Run:
        return Run(make_issue(n), None, "opencode", T0, 0.0, 0.0)

    a, b, c = run(1), run(2), run(3)
    book = ResourceBook()
    book.usage = {
        "id-1": (a, Usage(300 * MIB, 5.0, 4, root=4242)),  # one managed server, two runs
        "id-2": (b, Usage(300 * MIB, 5.0, 4, root=4242)),
        "id-3": (c, Usage(100 * MIB, 1.0, 1, root=777)),
    }
    running = {"id-1": a, "id-2": b, "id-3": c}
    assert book.agents_rss(None, running) == 400 * MIB
    assert book.of(run(1)) is None  # a newer run of the issue is not the one sampled


def test_a_short_machine_has_room_again_only_past_a_margin() -> None:
    from symphony_tui.config.worker_hosts import WorkerSettings
    from symphony_tui.hosts.resources import Memory
    from symphony_tui.scheduler.resources import ResourceBook

    book = ResourceBook()
    book.machines[None] = Memory(1000 * MIB, 4000 * MIB)
    worker = WorkerSettings(min_free_memory_mb=980)
    assert book.short(None, worker, {}) is None  # 1,000 MB free, over the floor
    book.was_short = {None}  # it was under it at the last pass
    assert book.short(None, worker, {}) is not None  # not yet 5 % past the floor
    book.machines[None] = Memory(1030 * MIB, 4000 * MIB)
    assert book.short(None, worker, {}) is None
