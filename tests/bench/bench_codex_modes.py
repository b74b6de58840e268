"""The three ways a codex run can be placed, side by side, with the real codex 0.171.0
and the fake model server: ``local`` (the app-server here), ``ssh`` (the app-server on a
worker host, detached there and reached through a unix-socket forward:
``codex.transport: unix``) and ``exec-server`` (the app-server here, its commands on the
host: ``worker.hosts.<h>.codex_mode: exec-server``). One sshd on 127.0.0.2, so the figures
are the ssh overhead without a network.

Per mode, ``--runs`` sessions (default 3), each:

* run start: ``start_session`` (launch, ``initialize``, thread start; for exec-server the
  exec-server's launch on the host and the forward too), median;
* one turn: a shell command on the run's machine (``seq 1 N``) and a streamed answer of
  ``--words`` words: the agent events the session hands up, this process's CPU per event
  (the scheduler's side: the session, its JSON-RPC, the link) and the CPU of its local
  children per event (the app-server here, or the ssh forward), taken from ``/proc``
  before the session closes.

``python -m tests.bench.bench_codex_modes [--runs 3] [--words 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import tempfile
import time
from pathlib import Path

import psutil

from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui_testing.codex_env import make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.session_host import RecordingSessionHost
from tests.hosts.sshd import HAVE_SSHD, Fleet
from tests.real_programs import require_codex

MODES = ("local", "ssh", "exec-server")


class _Hosted(RecordingSessionHost):
    def __init__(self, workspace: Path, worker_host: str | None) -> None:
        super().__init__(workspace)
        self.worker_host = worker_host


def _children_cpu_s() -> float:
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


async def _one(backend: CodexBackend, ws: Path, host: str | None, words: int) -> tuple:
    started = time.perf_counter()
    hosted = _Hosted(ws, host)
    session = await backend.start_session(hosted)
    start_ms = (time.perf_counter() - started) * 1000
    try:
        before = len(hosted.events)
        cpu0, kids0 = time.process_time(), _children_cpu_s()
        result = await session.run_turn("SHELL: seq 1 2000")
        result = await session.run_turn(f"SLOW{words} words")
        cpu = time.process_time() - cpu0
        kids = _children_cpu_s() - kids0
        events = len(hosted.events) - before
        assert result.status.value == "completed", result
    finally:
        await session.close()
    return start_ms, events, cpu, kids


async def _measure(folder: Path, fleet: Fleet, runs: int, words: int) -> None:
    codex_bin = require_codex()
    host = fleet.names[1]
    with FakeModelServer(slow_delay=0.0) as fake:
        codex_env = make_codex_home(folder / "codex-home", fake.url)
        command = f"{shlex.quote(str(codex_bin))} app-server"
        print(f"{'mode':<12} {'start ms (median)':>18} {'events/turn':>12} "
              f"{'sched us/event':>15} {'children us/event':>18}")  # fmt: skip
        for mode in MODES:
            worker: dict = {"ssh_hosts": fleet.names}
            if mode == "exec-server":
                worker["hosts"] = {host: {"codex_mode": "exec-server"}}
            settings = Settings.model_validate(
                {
                    "codex": {
                        "command": command,
                        "env": codex_env,
                        "transport": "unix",
                        "read_timeout_ms": 60_000,
                    },
                    "worker": worker,
                }
            )
            home = folder / "home"  # an empty HOME: no rc files of this machine, as the hosts'
            home.mkdir(exist_ok=True)
            backend = CodexBackend(lambda s=settings: s, env={"HOME": str(home)})
            rows = []
            for i in range(runs):
                ws = folder / mode / f"B-{i}"
                ws.mkdir(parents=True)
                rows.append(await _one(backend, ws, None if mode == "local" else host, words))
            await backend.aclose()
            starts = [r[0] for r in rows]
            events = sum(r[1] for r in rows)
            sched = sum(r[2] for r in rows) / events * 1e6
            kids = sum(r[3] for r in rows) / events * 1e6
            print(f"{mode:<12} {statistics.median(starts):>18,.0f} {events / runs:>12,.0f} "
                  f"{sched:>15,.1f} {kids:>18,.1f}")  # fmt: skip


def run(runs: int = 3, words: int = 300) -> None:
    if not HAVE_SSHD:
        print("bench_codex_modes: skipped (no sshd)")
        return
    with tempfile.TemporaryDirectory(prefix="bench-modes-") as tmp:
        folder = Path(tmp)
        fleet = Fleet(folder / "fleet", 2)
        os.environ.update(fleet.env)
        try:
            asyncio.run(_measure(folder, fleet, runs, words))
        finally:
            fleet.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--words", type=int, default=300)
    args = parser.parse_args()
    run(args.runs, args.words)


if __name__ == "__main__":
    main()
