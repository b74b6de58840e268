"""End to end: a headless scheduler process killed with SIGKILL keeps its usage totals.

Two real ``symphony-tui --headless`` processes on one project (a local tracker and the
simulated codex agent, ``symphony_tui.demo.agent``): the first works, is killed with
``kill -9`` (its whole process group, as a crash would leave things), the second starts on
the same state folder and reports the first one's totals before it adds its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from symphony_tui.scheduler.usage.ledger import USAGE_FILE_NAME, read_ledger
from tests.control import remember_control

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]  # the checkout whose code the processes run

WORKFLOW = """\
---
tracker:
  kind: local
  path: issues.yaml
  active_states: [Todo, In Progress]
  terminal_states: [Done]
polling:
  interval_ms: 1000
workspace:
  root: workspaces
agent:
  backend: codex
  max_turns: 50
  approvals: auto
codex:
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'
  read_timeout_ms: 20000
  stall_timeout_ms: 120000
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: usage-1
    identifier: USE-1
    title: Long work
    description: "[demo: slow, two-turns]"
    state: Todo
"""


def _start(
    project: Path, env: dict[str, str], *, lock: bool = False
) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "symphony_tui.cli", str(project / "WORKFLOW.md")]
    options = ["--headless", "--port", "0", "--log-dir", str(project / "logs")]
    options += [] if lock else ["--no-lock"]
    proc = subprocess.Popen(
        [*command, *options],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        found = re.search(r"HTTP API on (\S+)", line)
        if found:
            url = found.group(1).rstrip("/")
            remember_control(url, env)
            return proc, url
        if time.monotonic() > deadline:
            break
    _kill(proc)
    raise AssertionError(f"no API address from the scheduler (exit {proc.poll()})")


def _state(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/api/v1/state", timeout=10) as response:
        return json.loads(response.read())


def _wait(url: str, predicate, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = _state(url)
        if predicate(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"state not reached: {state['codex_totals']}")
        time.sleep(0.2)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()


def _wait_on_disk(home: Path, tokens: int, timeout: float = 60.0) -> None:
    """Until the project's usage ledger under ``home`` holds at least ``tokens`` (its writer
    thread syncs each checkpoint; a loaded machine can take longer than one interval)."""
    deadline = time.monotonic() + timeout
    while True:
        on_disk = 0
        for path in home.rglob(USAGE_FILE_NAME):
            book, _ = read_ledger(path)
            on_disk = max(on_disk, sum(u.tokens.total_tokens for u in book.per_issue().values()))
        if on_disk >= tokens:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the ledger holds {on_disk} tokens, not {tokens}")
        time.sleep(0.2)


def _restored(state: dict) -> int:
    """Total tokens minus what this process's own live runs counted (a row whose agent has
    reported no usage yet has null tokens)."""
    own = sum((r["tokens"] or {}).get("total_tokens", 0) for r in state["running"])
    return state["codex_totals"]["total_tokens"] - own


def test_totals_survive_kill_9_of_the_scheduler_process(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "WORKFLOW.md").write_text(WORKFLOW)
    (project / "issues.yaml").write_text(textwrap.dedent(ISSUES))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),  # the state folder (platformdirs) of both processes
        "SYMPHONY_PYTHON": sys.executable,
        "SYMPHONY_DEMO_SPEED": "3",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("XDG_STATE_HOME", None)

    first, url = _start(project, env)
    try:
        early = _wait(
            url,
            lambda s: (
                s["codex_totals"]["total_tokens"] > 0 and s["codex_totals"]["seconds_running"] > 3
            ),
        )
        _wait_on_disk(tmp_path / "home", early["codex_totals"]["total_tokens"])
        last = _state(url)
    finally:
        _kill(first)  # SIGKILL: no shutdown, no final write
    assert last["running"], "the run should still be live when the process is killed"

    launched = time.monotonic()
    second, url = _start(project, env)
    try:
        state = _wait(url, lambda s: bool(s["running"]))
        elapsed = time.monotonic() - launched
    finally:
        _kill(second)
    # Nothing the first process had written is lost...
    assert _restored(state) >= early["codex_totals"]["total_tokens"]
    assert state["codex_totals"]["seconds_running"] >= early["codex_totals"]["seconds_running"]
    # ... and nothing is counted twice.
    assert _restored(state) <= last["codex_totals"]["total_tokens"]
    assert state["codex_totals"]["seconds_running"] <= (
        last["codex_totals"]["seconds_running"] + elapsed
    )
