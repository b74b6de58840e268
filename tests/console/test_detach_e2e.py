"""The scheduler outlives its console, for real: ``symphony-tui WORKFLOW.md`` in tmux, the
tmux server killed (the pane's processes get SIGHUP, the pty hangs up), then a new console.

A local tracker and the bundled simulated agent (``symphony_tui.demo.agent``, slowed down)
keep it cheap. Asserted are outcomes: the same agent processes run 8 s after the kill; a
new ``symphony-tui WORKFLOW.md`` attaches and shows them working; ``ps`` lists the
scheduler; ``stop`` ends it and its agents. Each wait is a bound for a broken build.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.console.test_tmux_demo import REPO, Pane
from tests.helpers import until_blocking
from tests.real_programs import require_tmux

pytestmark = pytest.mark.slow

BOUND_S = 60.0

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
  max_turns: 50
  approvals: auto
codex:
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'
  read_timeout_ms: 20000
  stall_timeout_ms: 600000
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: det-1
    identifier: DET-1
    title: Long work one
    description: "[demo: slow]"
    state: Todo
  - id: det-2
    identifier: DET-2
    title: Long work two
    description: "[demo: slow]"
    state: Todo
"""


def agent_pids(workspaces: Path) -> set[int]:
    """Live simulated agents whose working folder is under ``workspaces``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        agent = b"symphony_tui.demo.agent" in cmdline and cwd.startswith(str(workspaces))
        if agent and state not in ("Z", "X"):
            found.add(int(entry.name))
    return found


@pytest.fixture
def project(tmp_path: Path):
    require_tmux()
    root = tmp_path / "project"
    root.mkdir()
    (root / "WORKFLOW.md").write_text(WORKFLOW)
    (root / "issues.yaml").write_text(ISSUES)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "NO_COLOR", "PYTEST"))}
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        TMUX_TMPDIR=str(tmp_path),
        TERM="xterm-256color",
        SYMPHONY_DEMO_SPEED="10",
        SYMPHONY_PYTHON=sys.executable,
        PYTHONPATH=str(REPO),
        SHELL="/bin/sh",
    )
    yield root, env, tmp_path
    subprocess.run(  # whatever the test left running (a failed build) is stopped
        [sys.executable, "-m", "symphony_tui.cli", "stop", "WORKFLOW.md", "--timeout", "30"],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=60,
    )
    for name in ("first.sock", "second.sock", "third.sock"):
        subprocess.run(
            ["tmux", "-S", str(tmp_path / name), "kill-server"], env=env, capture_output=True
        )


def console_in_tmux(root: Path, env: dict, socket: Path, module: str = "symphony_tui.cli") -> Pane:
    pane = Pane(socket, env)
    command = (
        f"cd {shlex.quote(str(root))} && {shlex.quote(sys.executable)} -m {module} "
        f'WORKFLOW.md --log-dir {shlex.quote(str(root / "log"))}; echo "EXITED $?"; sleep 600'
    )
    pane.tmux(
        "-f", "/dev/null", "new-session", "-d", "-s", "demo", "-x", "120", "-y", "36", command
    )
    return pane


def both_working(pane: Pane, workspaces: Path) -> set[int]:
    """Wait for the console to show both agents working; their processes' pids."""
    pane.wait("both agents working", lambda s: s.count("● working") == 2)
    return until_blocking(
        lambda: (p := agent_pids(workspaces)) and len(p) == 2 and p,
        BOUND_S,
        what="two agent processes",
    )


def cli(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "symphony_tui.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_killing_the_consoles_tmux_leaves_the_agents_running_and_a_new_console_attaches(
    project,
):
    root, env, tmp = project
    workspaces = root / "workspaces"
    first = console_in_tmux(root, env, tmp / "first.sock")
    agents = both_working(first, workspaces)

    first.tmux("kill-server")
    time.sleep(8.0)  # the Done-when's 8 s: a stop would have ended them by now
    assert agent_pids(workspaces) == agents, "the agents did not survive the terminal"

    listed = cli(root, env, "ps", "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["running"] == 2, listed
    assert rows[0]["workflow"].endswith("WORKFLOW.md") and rows[0]["api"].startswith(
        "http://127.0.0.1:"
    )

    second = console_in_tmux(root, env, tmp / "second.sock")
    screen = second.wait("the new console attached", lambda s: "attached" in s)
    assert "project_locked" not in screen
    screen = second.wait("both rows working", lambda s: s.count("● working") == 2)
    assert "DET-1" in screen and "DET-2" in screen
    assert agent_pids(workspaces) == agents, "attaching started or ended agents"

    # q on an attached console asks: stop the agents, or detach; d leaves them running
    second.keys("q")
    second.wait("the stop-or-detach question", lambda s: "Stop 2 agents (s)" in s)
    second.keys("d")
    second.wait("the console exited", lambda s: "EXITED 0" in s)
    assert agent_pids(workspaces) == agents

    # `symphony-tui stop` while a console is attached: it says so, and q just quits
    third = console_in_tmux(root, env, tmp / "third.sock")
    third.wait("the third console attached", lambda s: s.count("● working") == 2)
    stopped = cli(root, env, "stop", "WORKFLOW.md")
    assert stopped.returncode == 0, stopped.stderr
    assert not agent_pids(workspaces), "stop left agents behind"
    # what stopped it, not a signal: the reason may reach the line a frame after the stop
    screen = third.wait(
        "the stop and its reason shown",
        lambda s: "■ scheduler stopped at" in s and "stopped by `symphony-tui stop` from" in s,
    )
    assert "working" not in screen and "STALE" not in screen and "link lost" not in screen
    assert "stopped by `symphony-tui stop` from" in (root / "log" / "symphony.log").read_text()
    third.keys("q")
    screen = third.wait("the console exited", lambda s: "EXITED 0" in s)
    assert "the scheduler had stopped" in screen and "keep" not in screen
    assert cli(root, env, "stop", "WORKFLOW.md").returncode == 1  # nothing runs it now


def test_q_in_an_attached_console_stops_the_scheduler_and_its_agents(project):
    root, env, tmp = project
    workspaces = root / "workspaces"
    first = console_in_tmux(root, env, tmp / "first.sock")
    first.wait("both agents working", lambda s: s.count("● working") == 2)
    first.keys("q")
    first.wait("the stop-or-detach question", lambda s: "Detach (d)" in s)
    first.keys("d")
    first.wait("the console detached", lambda s: "EXITED 0" in s)
    until_blocking(lambda: len(agent_pids(workspaces)) == 2, BOUND_S, what="two agent processes")

    second = console_in_tmux(root, env, tmp / "second.sock")
    second.wait("both rows working", lambda s: s.count("● working") == 2)
    second.keys("q")
    second.wait("the stop-or-detach question", lambda s: "Stop 2 agents (s)" in s)
    second.keys("s")
    screen = second.wait("the console exited", lambda s: "EXITED 0" in s)
    assert "the scheduler stopped; its agents have ended" in screen
    assert not agent_pids(workspaces), "the stop left agents behind"
    assert not json.loads(cli(root, env, "ps", "--json").stdout or "null")
    audit = [json.loads(line) for p in tmp.glob("**/audit.jsonl") for line in p.open()]
    assert [e["ok"] for e in audit if e["what"] == "stop_scheduler"] == [True], audit


def test_a_killed_console_gives_the_terminal_back(project):
    """``kill -9`` of the console (and the scheduler it embeds) cannot restore the terminal
    itself: the holder it forked from turns the console's modes off and says what happened."""
    root, env, tmp = project
    pane = console_in_tmux(root, env, tmp / "first.sock")
    pane.wait("both agents working", lambda s: s.count("● working") == 2)
    shell = int(pane.tmux("list-panes", "-t", "demo", "-F", "#{pane_pid}").split()[0])
    holder = [p for p in _children(shell) if b"symphony_tui.cli" in _cmdline(p)]
    assert len(holder) == 1, f"the holder was not found: {holder}"
    console = [p for p in _children(holder[0]) if b"symphony_tui.cli" in _cmdline(p)]
    assert len(console) == 1, f"the console process was not found: {console}"
    os.kill(console[0], signal.SIGKILL)
    for agent in agent_pids(root / "workspaces"):  # a restart would reap them; none comes
        os.kill(agent, signal.SIGKILL)
    screen = pane.wait("the holder's word", lambda s: "EXITED" in s)
    assert "EXITED 137" in screen and "were ended by SIGKILL" in screen, screen
    modes = pane.tmux(
        "display-message", "-p", "-t", "demo", "#{alternate_on} #{mouse_any_flag} #{cursor_flag}"
    )
    assert modes.split() == ["0", "0", "1"], f"alternate screen, mouse, cursor: {modes!r}"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_two_consoles_started_at_once_make_one_scheduler_and_one_attached_console(project):
    """Two ``symphony-tui WORKFLOW.md`` for one project, released at the same instant (each
    waits on one file), twice: one becomes the scheduler, the other attaches to it;
    neither fails, and only one scheduler runs the agents."""
    root, env, tmp = project
    workspaces = root / "workspaces"
    go = tmp / "go"
    for round_ in range(2):
        panes = []
        for name in ("first.sock", "second.sock"):
            pane = Pane(tmp / name, env)
            command = (
                f"cd {shlex.quote(str(root))} && while [ ! -e {shlex.quote(str(go))} ]; do "
                f"sleep 0.005; done; {shlex.quote(sys.executable)} -m symphony_tui.cli "
                f'WORKFLOW.md --log-dir {shlex.quote(str(root / "log"))}; echo "EXITED $?"; '
                "sleep 600"
            )
            pane.tmux(
                "-f", "/dev/null", "new-session", "-d", "-s", "demo", "-x", "120", "-y", "36",
                command,
            )  # fmt: skip
            panes.append(pane)
        go.touch()
        screens = [
            pane.wait(
                f"round {round_}: a console with both rows working",
                lambda s: s.count("● working") == 2 or "EXITED" in s,
            )
            for pane in panes
        ]
        assert not any("EXITED" in s for s in screens), screens
        attached = [
            pane.wait(f"round {round_}: the attach notice", lambda s: "attached to it" in s)
            for pane in panes
            if "attached to it" in pane.text()
        ]
        assert len(attached) == 1, [pane.text() for pane in panes]
        rows = [json.loads(line) for line in cli(root, env, "ps", "--json").stdout.splitlines()]
        assert len(rows) == 1 and rows[0]["running"] == 2, rows
        assert len(agent_pids(workspaces)) == 2  # one scheduler's agents, not two
        assert cli(root, env, "stop", "WORKFLOW.md").returncode == 0
        for pane in panes:
            pane.tmux("kill-server")
        go.unlink()
        until_blocking(lambda: not agent_pids(workspaces), BOUND_S, what="the agents ended")


def test_a_console_that_fails_leaves_its_scheduler_and_agents_running(project):
    """An unhandled error in the console ends the console, not the scheduler it embeds:
    the agents run on headless, as after a hang-up, and the terminal says how to attach."""
    root, env, tmp = project
    workspaces = root / "workspaces"
    pane = console_in_tmux(root, env, tmp / "first.sock", "tests.console.failing_console")
    agents = both_working(pane, workspaces)
    pane.keys("?")
    screen = pane.wait("the console ended", lambda s: "EXITED" in s)
    assert "a fault in the console" in screen
    assert "the console failed (above), not its scheduler" in screen
    assert "EXITED 0" in screen
    time.sleep(3.0)  # a stop would have ended them by now
    assert agent_pids(workspaces) == agents, "the agents did not survive the console"
    listed = cli(root, env, "ps", "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["running"] == 2, listed
    assert cli(root, env, "stop", "WORKFLOW.md").returncode == 0
    assert not agent_pids(workspaces), "stop left agents behind"
