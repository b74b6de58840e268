"""End to end: after ``kill -9`` of a scheduler, the next one ends the agent it left behind
before it dispatches, so an issue never has two agents at once.

Two real ``symphony-tui --headless`` processes on one project (a local tracker and the
simulated codex agent, ``symphony_tui.demo.agent``). The agent's command keeps its process
group alive after its stdin closes (``...; exec sleep 3600``), as an agent that ignores
end-of-file would: killing the scheduler leaves it running, parent 1, in its workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import until_blocking
from tests.scheduler.test_usage_restart_e2e import REPO, _kill, _start, _state

pytestmark = pytest.mark.slow

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
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent; exec sleep 3600'
  read_timeout_ms: 20000
  stall_timeout_ms: 120000
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: twice-1
    identifier: TWO-1
    title: Long work
    description: "[demo: slow, two-turns]"
    state: Todo
"""


def _agents_in(workspace: Path) -> set[int]:
    """The process groups with a live (non-zombie) member working in ``workspace``."""
    root = os.path.realpath(workspace)
    groups = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cwd = os.readlink(entry / "cwd")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if (cwd == root or cwd.startswith(root + os.sep)) and fields[0] not in "ZX":
                groups.add(int(fields[2]))
    return groups


def test_kill_9_and_restart_leave_one_agent_per_issue(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "WORKFLOW.md").write_text(WORKFLOW)
    (project / "issues.yaml").write_text(textwrap.dedent(ISSUES))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "SYMPHONY_LOCK_DIR": str(tmp_path / "locks"),
        "SYMPHONY_PYTHON": sys.executable,
        "SYMPHONY_DEMO_SPEED": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("XDG_STATE_HOME", None)
    workspace = project / "workspaces" / "TWO-1"
    session = workspace / ".symphony" / "session.json"
    started: set[int] = set()
    first = second = None
    try:
        first, url = _start(project, env, lock=True)
        until_blocking(lambda: _state(url)["running"], 90.0)

        def recorded() -> int | None:
            with contextlib.suppress(OSError, ValueError):
                group = json.loads(session.read_text()).get("agent_group") or {}
                return group.get("pgid")
            return None

        old = until_blocking(recorded, 90.0)
        started.add(old)
        assert old in _agents_in(workspace)
        os.kill(first.pid, signal.SIGKILL)  # the scheduler only: its agent lives on
        first.wait(timeout=30)
        time.sleep(0.5)
        assert old in _agents_in(workspace), "the agent should outlive the killed scheduler"

        second, url = _start(project, env, lock=True)
        until_blocking(lambda: _state(url)["running"], 90.0)
        agents = until_blocking(lambda: _agents_in(workspace), 60.0)
        started |= agents
        assert old not in agents  # ended before the issue was dispatched again
        time.sleep(1.0)  # the new run's agent is up; nothing else joins it
        assert len(_agents_in(workspace)) == 1
    finally:
        for proc in (first, second):
            if proc is not None:
                _kill(proc)
        for pgid in started | _agents_in(workspace):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
