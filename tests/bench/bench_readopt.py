"""Restart to re-attached: the real ``symphony-tui --headless`` with N real codex 0.171.0
agents in long streaming turns (the fake model server), killed with SIGKILL and started
again.

``python -m tests.bench.bench_readopt [--runs 10 50] [--delay 0.2]``

For each N and each ``codex.transport``:

* ``unix`` (detached): seconds from spawning the second scheduler to every run back
  (re-adopted: its row running with the same thread, the same turn in flight) and to every
  run's first agent event after that;
* ``stdio`` (the app-server a child on pipes): the agents die with the scheduler; seconds
  from spawning the second scheduler to every run dispatched again and to every run's first
  agent event of its new turn.

And the cost of the agents while they run (before the kill): processes and their total RSS
(every process whose working folder is in the workspace root: bash, the node wrapper, the
native codex) and their proportional share (PSS: the binary's shared pages divided among
them), the scheduler's RSS, how many agent processes outlived the SIGKILL, and, after the second scheduler's SIGTERM, how many
agent processes are left (must be 0). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.workspaces.manifest import read_section
from symphony_tui_testing.fake_model import FakeModelServer
from tests.integration.codex_e2e import make_e2e_project
from tests.integration.test_real_codex_readopt import Scheduler, _codex


def agent_processes(root: Path) -> list[int]:
    """Pids whose working folder is inside ``root`` (the agents and their commands)."""
    found = []
    prefix = str(root.resolve())
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{name}/cwd").startswith(prefix):
                found.append(int(name))
    return found


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def pss_mb(pids: list[int]) -> float:
    """Proportional set size: shared pages (the codex binary) divided among their users."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total / 1024


def wait(predicate, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise SystemExit(f"timed out after {timeout:g}s")


def rows(s: Scheduler) -> list[dict]:
    try:
        return s.get("/api/v1/snapshot").get("running") or []
    except OSError:
        return []


def measure(n: int, transport: str, delay: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer(slow_delay=delay) as fake:
        project = make_e2e_project(
            Path(tmp), fake,
            issues=[(f"R-{i}", "SLOW5000") for i in range(1, n + 1)],
            max_turns=1,
            agent={"max_concurrent_agents": n},
            codex={"command": f"{_codex()} app-server", "transport": transport,
                   "read_timeout_ms": 60_000, "reattach_timeout_ms": 120_000,
                   "turn_timeout_ms": 3_600_000, "stall_timeout_ms": 0},
        )  # fmt: skip
        root = project.workspaces
        first = Scheduler(project, "first")
        second = None
        try:
            wait(lambda: sum(1 for r in rows(first) if r.get("last_event") == "message_delta")
                 >= n, 900)  # fmt: skip
            time.sleep(1.0)
            agents = agent_processes(root)
            out = {
                "agent_processes": len(agents),
                "agent_rss_mb": rss_mb(agents),
                "agent_pss_mb": pss_mb(agents),
                "scheduler_rss_mb": rss_mb([first.proc.pid]),
            }
            threads = {r["issue_identifier"]: r["thread_id"] for r in rows(first)}
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait()
            time.sleep(0.5)
            out["agents_alive_after_kill"] = len(agent_processes(root))
            t0 = time.monotonic()
            since = datetime.now(UTC)
            second = Scheduler(project, "second")
            out["api_up_s"] = time.monotonic() - t0

            def back() -> bool:
                got = rows(second)
                return len(got) >= n and all(r["thread_id"] == threads.get(
                    r["issue_identifier"]) for r in got)  # fmt: skip

            wait(back, 900, 0.02)
            out["all_back_s"] = time.monotonic() - t0

            def evented() -> bool:
                got = rows(second)
                return len(got) >= n and all(
                    r.get("last_event_at")
                    and datetime.fromisoformat(r["last_event_at"]) > since
                    and r.get("last_event") in ("message_delta", "message", "turn_started")
                    for r in got
                )

            wait(evented, 900, 0.02)
            out["first_event_s"] = time.monotonic() - t0
            if transport == "unix":
                turns = {read_section(root / f"R-{i}", "session").get("turn_id")
                         for i in range(1, n + 1)}  # fmt: skip
                out["turns"] = len(turns)
            t1 = time.monotonic()
            second.stop()
            out["stop_s"] = time.monotonic() - t1
            time.sleep(0.5)
            left = agent_processes(root)
            out["agents_left_after_stop"] = len(left)
            for pid in left:
                with contextlib.suppress(OSError):
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    print(f"  left after stop: {pid} {cmd[:160].decode(errors='replace')}")
            return out
        finally:
            first.stop()
            if second is not None:
                second.stop()
            for pid in agent_processes(root):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds between words")
    parser.add_argument("--transports", nargs="+", default=["unix", "stdio"])
    args = parser.parse_args()
    for n in args.runs:
        for transport in args.transports:
            got = measure(n, transport, args.delay)
            line = "  ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in got.items()
            )
            print(f"runs={n} transport={transport}: {line}", flush=True)


if __name__ == "__main__":
    main()
