"""Attention in a real terminal: the console inside a detached tmux session rings the
bell when an approval arrives (tmux's ``window_bell_flag``), and ``notify.command`` runs
with the alert in its environment. The simulated codex agent asks for the approval."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.console.test_tmux_demo import HEIGHT, REPO, WIDTH, Pane
from tests.real_programs import require_tmux

pytestmark = pytest.mark.slow

WORKFLOW = """\
---
tracker:
  kind: local
  path: issues.yaml
  active_states: [Todo]
  terminal_states: [Done]
polling:
  interval_ms: 1000
workspace:
  root: workspaces
agent:
  max_turns: 1
  approvals: operator
codex:
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'
  read_timeout_ms: 20000
notify:
  command: 'printf "%s|%s\\n" "$SYMPHONY_ALERT_KIND" "$SYMPHONY_ALERT_ISSUE" >> notified.txt'
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: bell-1
    identifier: BELL-1
    title: Asks first
    description: "[demo: approval]"
    state: Todo
"""


def test_an_approval_rings_the_bell_and_runs_notify_command(tmp_path: Path):
    require_tmux()
    project = tmp_path / "project"
    project.mkdir()
    (project / "WORKFLOW.md").write_text(WORKFLOW)
    (project / "issues.yaml").write_text(textwrap.dedent(ISSUES))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "NO_COLOR", "PYTEST"))}
    env.update(
        HOME=str(home),
        TMUX_TMPDIR=str(tmp_path),
        TERM="xterm-256color",
        SYMPHONY_PYTHON=sys.executable,
        SYMPHONY_DEMO_SPEED="0.2",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
    )
    pane = Pane(tmp_path / "tmux.sock", env)
    console = (
        f"cd {shlex.quote(str(project))} && {shlex.quote(sys.executable)} -m symphony_tui.cli "
        f"WORKFLOW.md --no-lock --log-dir {shlex.quote(str(tmp_path / 'logs'))}"
    )
    pane.tmux(
        "-f", "/dev/null", "new-session", "-d", "-s", "demo",
        "-x", str(WIDTH), "-y", str(HEIGHT), f'{console}; echo "EXITED $?"; sleep 600',
    )  # fmt: skip
    try:
        assert pane.tmux("display", "-p", "-t", "demo", "#{window_bell_flag}").strip() == "0"
        pane.wait("the pending approval", lambda s: "⚑ 1 approval" in s)
        deadline = time.monotonic() + 10
        flag = ""
        while time.monotonic() < deadline:
            flag = pane.tmux("display", "-p", "-t", "demo", "#{window_bell_flag}").strip()
            if flag == "1":
                break
            time.sleep(0.1)
        assert flag == "1", "the console did not ring the bell for the approval"
        notified = project / "notified.txt"
        while time.monotonic() < deadline + 10 and not notified.exists():
            time.sleep(0.1)
        assert notified.read_text().splitlines() == ["approval|BELL-1"]
        assert "Traceback" not in pane.text()
    finally:
        subprocess.run(
            ["tmux", "-S", str(pane.socket), "kill-server"],
            env=env,
            capture_output=True,
            timeout=30,
        )
