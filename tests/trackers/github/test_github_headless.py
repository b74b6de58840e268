"""``--headless --exit-when-idle`` against a GitHub that refuses the token: the process
gives up with exit code 1 and one clear line instead of polling forever, and the token
never reaches its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .test_github_scheduler_e2e import write_reference_workflow

WRONG = "ghp_wrongWRONGwrong0000000000000000000000"


def test_exit_when_idle_gives_up_on_a_refused_token(tmp_path: Path, fake) -> None:
    fake.add_issues(1)
    write_reference_workflow(tmp_path, fake)
    env = dict(os.environ, GITHUB_TOKEN=WRONG, NO_PROXY="127.0.0.1,localhost")
    argv = ["--headless", "--exit-when-idle", "--log-dir", str(tmp_path / "logs")]
    done = subprocess.run(
        [sys.executable, "-m", "symphony_tui.cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert "HTTP 401" in done.stderr
    assert "the tracker refused its credentials; --exit-when-idle gives up" in done.stderr
    assert WRONG not in done.stderr + done.stdout
    final = json.loads(done.stdout.strip().splitlines()[-1])  # the final state, as ever
    assert final["counts"]["running"] == 0
    # the start-up cleanup's fetch and the first ticks' were enough to know: no replay
    states = [r.query["state"] for r in fake.rest_requests("GET", "/repos/octo/app/issues")]
    assert states.count(["closed"]) == 1 and states.count(["open"]) <= 2
