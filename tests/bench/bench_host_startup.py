"""Start-up with a worker host that does not answer: seconds from spawning a
real ``symphony-tui --headless`` to its API answering and to the first run on the host
that does answer, while the other host's sshd is stopped (SIGSTOP: it accepts
connections and never speaks, as a hung machine does). ``worker.connect_timeout_ms`` is
5000 here; before start-up reached hosts in the background, the first run waited for
that timeout several times over.

Needs ``sshd``; ``python -m tests.bench.bench_host_startup [tree]`` (``tree``: the source
tree the scheduler runs from, default this one, so another checkout can be measured
side by side; also run by ``tests.bench.run_all`` unless ``--quick``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.bench._common import figure
from tests.hosts.sshd import HAVE_SSHD, Fleet

REPO = Path(__file__).resolve().parents[2]
CONNECT_TIMEOUT_MS = 5000


def _first_run(url: str, host: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/api/v1/snapshot", timeout=30) as response:
                snap = json.loads(response.read())
        except OSError:
            continue
        if any(r.get("host") == host for r in snap["running"]) or snap["completed"]:
            return True
        time.sleep(0.05)
    return False


def run(tree: Path = REPO) -> None:
    if not HAVE_SSHD:
        print("bench_host_startup: sshd is not installed; skipped")
        return
    from tests.hosts import test_fleet_e2e as fleet_e2e
    from tests.scheduler.test_usage_restart_e2e import _kill, _start

    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
        folder = Path(tmp)
        fleet = Fleet(folder / "fleet", 2)
        hung, good = fleet.hosts
        old = {k: os.environ.get(k) for k in fleet.env}
        os.environ.update(fleet.env)
        proc = None
        try:
            project, env, _ = fleet_e2e._project(
                folder,
                fleet,
                max_turns=1,
                issues=fleet_e2e._issues(1, "[demo: two-turns]"),
                speed="0.3",
                worker_extra=f"  connect_timeout_ms: {CONNECT_TIMEOUT_MS}\n",
            )
            env["PYTHONPATH"] = str(tree)
            assert hung.proc is not None
            os.kill(hung.proc.pid, signal.SIGSTOP)
            started = time.monotonic()
            proc, url = _start(project, env)
            api = time.monotonic() - started
            ran = _first_run(url, good.name, started + 120)
            first = time.monotonic() - started
            figure("start-up, one host hung: API answering", api, "s")
            if ran:
                figure("start-up, one host hung: first run on the other", first, "s")
            else:
                print("start-up, one host hung: no run on the other host within 120 s")
        finally:
            if hung.proc is not None:
                os.kill(hung.proc.pid, signal.SIGCONT)
            if proc is not None:
                _kill(proc)
            fleet.close()
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


if __name__ == "__main__":
    run(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO)
