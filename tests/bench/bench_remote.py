"""Worker-host figures: the added cost of starting a run's agent on an SSH
host (launch + ``initialize`` handshake + thread start of the simulated codex agent) over
starting it here, with and without connection reuse, and of running a hook there.

Needs ``sshd`` (``.ci/run`` installs openssh-server); one sshd on 127.0.0.1, so the
figures are the ssh overhead alone, without a network. ``python -m tests.bench.bench_remote``
(also run by ``tests.bench.run_all`` unless ``--quick``).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.session_host import RecordingSessionHost
from tests.bench._common import figure
from tests.hosts.sshd import HAVE_SSHD, Fleet

REPO = Path(__file__).resolve().parents[2]
SAMPLES = 15
ISSUE = Issue(id="b-1", identifier="BENCH-1", title="t", state="Todo")


class _Hosted(RecordingSessionHost):
    def __init__(self, workspace: Path, worker_host: str | None) -> None:
        super().__init__(workspace)
        self.worker_host = worker_host


def _settings(root: Path, hosts: list[str]) -> Settings:
    return Settings.model_validate(
        {
            "workspace": {"root": str(root)},
            "hooks": {"before_run": "true"},
            "codex": {
                "command": f"{shlex.quote(sys.executable)} -m symphony_tui.demo.agent",
                "env": {"PYTHONPATH": str(REPO)},
                "read_timeout_ms": 30_000,
            },
            "worker": {"ssh_hosts": hosts},
        }
    )


async def _start_ms(backend: CodexBackend, ws: Path, host: str | None) -> float:
    started = time.perf_counter()
    session = await backend.start_session(_Hosted(ws, host))
    took = (time.perf_counter() - started) * 1000
    await session.close()
    return took


async def _measure(folder: Path, fleet: Fleet) -> None:
    host = fleet.names[0]
    settings = _settings(folder / "ws", fleet.names)
    ws = folder / "ws" / "BENCH-1"
    ws.mkdir(parents=True)
    backend = CodexBackend(lambda: settings, env={"HOME": str(folder / "home")})
    local = [await _start_ms(backend, ws, None) for _ in range(SAMPLES)]
    reuse = [await _start_ms(backend, ws, host) for _ in range(SAMPLES)]
    plain_backend = CodexBackend(lambda: settings)
    plain_backend._targets = HostTargets(lambda: settings, reuse=False)
    plain = [await _start_ms(plain_backend, ws, host) for _ in range(SAMPLES)]
    base = statistics.median(local)
    figure("agent start here (median)", base, "ms")
    figure("remote agent start, added, connection reused", statistics.median(reuse) - base, "ms")
    figure("remote agent start, added, no reuse", statistics.median(plain) - base, "ms")

    mgr = WorkspaceManager(lambda: settings, env={"HOME": str(folder / "home")})
    path, _ = await mgr.ensure(ISSUE)
    remote_path, _ = await mgr.ensure(ISSUE, host=host)
    here, there = [], []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        await mgr.run_hook("before_run", path, ISSUE)
        here.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await mgr.run_hook("before_run", remote_path, ISSUE, host=host)
        there.append((time.perf_counter() - t) * 1000)
    figure("hook here (`true`, median)", statistics.median(here), "ms")
    figure(
        "remote hook, added, connection reused",
        statistics.median(there) - statistics.median(here),
        "ms",
    )
    await mgr.manifests.flush()


def run() -> None:
    if not HAVE_SSHD:
        print("bench_remote: sshd is not installed; skipped")
        return
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        folder = Path(tmp)
        fleet = Fleet(folder / "fleet", 1)
        old = {k: os.environ.get(k) for k in fleet.env}
        os.environ.update(fleet.env)
        try:
            asyncio.run(_measure(folder, fleet))
        finally:
            fleet.close()
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    run()
