"""A dropped terminal (then ``symphony-tui stop``), SIGTERM (headless or not) and ``q`` ``s``
with a hung hook: the real ``symphony-tui run`` on a pseudo-terminal that is its controlling
terminal, the demo agent waiting for an approval, and an ``after_run`` hook that hangs
(``hooks.timeout_ms`` an hour). Closing the pty's master is a real hang-up: the kernel
sends SIGHUP and reads of the tty fail with EIO; the scheduler runs on headless.

What is asserted are outcomes (each wait below is a bound for a broken build, never a
figure; the seconds are in ``tests/bench/bench_quit.py``): the process exited 0, the hook's
child is gone, the run's end is in the event history and the usage ledger as on a normal
quit, and the cut is said in the event history and on stderr. Before the hook cutoff the
shutdown gave up on the worker after 20 s and left its end unrecorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.console.test_tmux_demo import REPO

pytestmark = pytest.mark.slow

BOUND_S = 90.0
HOUR_MS = 3_600_000

WORKFLOW = f"""\
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
hooks:
  timeout_ms: {HOUR_MS}
  shutdown_grace_ms: 3000
  after_run: 'sleep 600 & echo $! > "$SYMPHONY_WORKSPACE/../hook-child.pid"; wait'
agent:
  max_turns: 1
  approvals: operator
codex:
  command: '"${{SYMPHONY_PYTHON}}" -m symphony_tui.demo.agent'
  read_timeout_ms: 20000
---
Work on {{{{ issue.identifier }}}}. {{{{ issue.description }}}}
"""

ISSUES = """\
issues:
  - id: hup-1
    identifier: HUP-1
    title: Asks first
    description: "[demo: approval]"
    state: Todo
"""


class Project:
    """A project folder with the hung hook; ``tree``: the source tree the scheduler runs
    from (default this one; ``tests/bench/bench_quit.py`` also runs an earlier commit's)."""

    def __init__(self, root: Path, tree: Path | None = None) -> None:
        self.root = root
        (root / "WORKFLOW.md").write_text(WORKFLOW)
        (root / "issues.yaml").write_text(ISSUES)
        self.state = root / "state"
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "PYTEST", "NO_COLOR"))
        }
        self.env.update(
            HOME=str(root / "home"),
            XDG_STATE_HOME=str(self.state),
            XDG_DATA_HOME=str(root / "data"),
            XDG_CACHE_HOME=str(root / "cache"),
            XDG_CONFIG_HOME=str(root / "config"),
            PYTHONPATH=str(tree or REPO),
            TERM="xterm-256color",
            SYMPHONY_DEMO_SPEED="0.5",
            SYMPHONY_PYTHON=sys.executable,
        )
        (root / "home").mkdir()

    def argv(self) -> list[str]:
        log = str(self.root / "log")
        return [sys.executable, "-m", "symphony_tui.cli", "run", "WORKFLOW.md", "--log-dir", log]

    def one(self, name: str) -> Path:
        found = list(self.state.rglob(name))
        assert len(found) == 1, f"{name}: {found}"
        return found[0]

    def events(self) -> list[dict]:
        try:
            path = self.one("events.jsonl")
        except AssertionError:
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_for_approval(self, bound_s: float = BOUND_S) -> None:
        """Polls the event history (another process: no event to await)."""
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            if any(e["kind"] == "approval_requested" for e in self.events()):
                return
            time.sleep(0.2)
        raise AssertionError(f"no approval requested; log:\n{self.log()[-3000:]}")

    def log(self) -> str:
        logs = list((self.root / "log").glob("*.log"))
        return logs[0].read_text() if logs else ""

    def check_quit_as_normal(self) -> None:
        events = self.events()
        hooks = [
            e["message"] for e in events if e["kind"] == "hook" and "after_run" in e["message"]
        ]
        assert len(hooks) == 1 and "cut short (scheduler shutdown)" in hooks[0], hooks
        assert hooks[0].endswith("; its process group was ended")
        ended = [e for e in events if e["kind"] == "run_ended"]
        assert [e["issue_identifier"] for e in ended] == ["HUP-1"]
        ledger = [json.loads(line) for line in self.one("usage.jsonl").read_text().splitlines()]
        assert any(r.get("kind") == "run" and r.get("ended") for r in ledger), ledger
        child = int((self.root / "workspaces" / "hook-child.pid").read_text())
        assert _gone(child), "the hook's child outlived the console"
        assert 'msg="hook failed" hook=after_run status="cut short after ' in self.log()
        assert "scheduler shutdown" in self.log()


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


class Console:
    """The console on a pty that is its controlling terminal (``setsid`` then
    ``TIOCSCTTY``), so closing the master hangs it up for real."""

    def __init__(self, project: Project) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))

        def controlling_tty() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            project.argv(),
            cwd=project.root,
            env=project.env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=controlling_tty,
        )
        os.close(slave)
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def hang_up(self) -> None:
        os.close(self.master)
        self.master = -1

    def wait(self, bound_s: float = BOUND_S) -> int:
        try:
            return self.proc.wait(timeout=bound_s)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


def end_hook_left_behind(p: Project) -> None:
    """A failed run must not leave the hung hook behind."""
    pidfile = p.root / "workspaces" / "hook-child.pid"
    if pidfile.exists():
        try:
            os.killpg(os.getpgid(int(pidfile.read_text())), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


@pytest.fixture
def project(tmp_path: Path):
    p = Project(tmp_path)
    yield p
    end_hook_left_behind(p)


def stop_command(project: Project) -> subprocess.CompletedProcess:
    """``symphony-tui stop WORKFLOW.md`` for the project (graceful: the hooks' grace)."""
    return subprocess.run(
        [sys.executable, "-m", "symphony_tui.cli", "stop", "WORKFLOW.md"],
        cwd=project.root,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )


def test_a_hang_up_leaves_the_scheduler_running_until_stop_cuts_the_hung_hook(project: Project):
    """A hang-up ends the console (exit 0) but not its agents: the run waits on, its
    approval still asked; ``symphony-tui stop`` then ends it as a normal quit would."""
    console = Console(project)
    try:
        project.wait_for_approval()
        console.hang_up()
        assert console.wait() == 0
        time.sleep(2.0)  # room for a wrong stop to show in the history (a bound, not asserted)
        assert not [e for e in project.events() if e["kind"] == "run_ended"]
        assert 'msg="console detached; the scheduler runs on headless" reason=hangup' in (
            project.log()
        )
    finally:
        console.close()
        stopped = stop_command(project)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped the scheduler of" in stopped.stderr
    project.check_quit_as_normal()


@pytest.mark.parametrize("how", ["sigterm", "quit"])
def test_sigterm_and_q_y_on_the_console_cut_the_hung_hook(project: Project, how: str):
    console = Console(project)
    try:
        project.wait_for_approval()
        if how == "sigterm":
            console.proc.send_signal(signal.SIGTERM)
        else:
            console.press(b"q")
            time.sleep(1.0)  # the confirmation is on the screen (a bound, not asserted)
            console.press(b"s")
        assert console.wait() == 0
    finally:
        console.close()
    project.check_quit_as_normal()
    said = console.output.decode(errors="replace")
    assert "symphony-tui: HUP-1: after_run hook cut short (scheduler shutdown)" in said


def test_sigterm_headless_cuts_the_hung_hook(project: Project):
    proc = subprocess.Popen(
        [*project.argv(), "--headless"],
        cwd=project.root,
        env=project.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        project.wait_for_approval()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err
    project.check_quit_as_normal()
    assert (
        "symphony-tui: HUP-1: after_run hook cut short (scheduler shutdown); "
        "its process group was ended" in err.decode()
    )
