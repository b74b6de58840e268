"""The demo in a real terminal: ``symphony-tui demo`` inside a detached tmux session,
driven with real keystrokes (``send-keys``), read back with ``capture-pane -p``.

The tmux server is private (its own socket under ``tmp_path``, ``TMUX_TMPDIR`` and
``HOME`` there too, no config file), so it never touches the user's tmux, and a
finalizer kills it. Skipped only when tmux is missing and ``CI`` is unset.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.real_programs import require_tmux

REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 120, 36
TIMEOUT_S = 60.0

pytestmark = pytest.mark.slow


class Pane:
    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket = socket
        self.env = env

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "demo")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "demo", *keys)

    def wait(self, what: str, predicate: Callable[[str], bool]) -> str:
        """Poll the pane (an external program: there is no event to await) until
        ``predicate`` holds; fail with the last screen otherwise."""
        deadline = time.monotonic() + TIMEOUT_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.text()
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the pane shows:\n{screen}")


@pytest.fixture
def pane(tmp_path: Path):
    require_tmux()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "NO_COLOR", "PYTEST"))}
    env.update(
        HOME=str(home),
        TMUX_TMPDIR=str(tmp_path),
        TERM="xterm-256color",
        SYMPHONY_DEMO_SPEED="0.5",
        ESCDELAY="25",
        SHELL="/bin/sh",
        PS1="ready> ",
    )
    p = Pane(tmp_path / "tmux.sock", env)
    demo = f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m symphony_tui.cli demo"
    command = f'{demo}; echo "EXITED $?"; sleep 600'
    p.tmux(
        "-f", "/dev/null", "new-session", "-d", "-s", "demo",
        "-x", str(WIDTH), "-y", str(HEIGHT), command,
    )  # fmt: skip
    try:
        yield p
    finally:
        subprocess.run(
            ["tmux", "-S", str(p.socket), "kill-server"],
            env=env,
            capture_output=True,
            timeout=30,
        )


def test_demo_with_real_keystrokes(pane: Pane):
    # the four panes and a pending approval (the demo's DEMO-3 asks to run a command);
    # wait until it is the only worker, so the selected row is the one waiting
    screen = pane.wait(
        "four panes and a pending approval",
        lambda s: (
            all(t in s for t in ("1 Issues", "2 Workers (1)", "3 Events", "4 Tokens"))
            and "⚑ 1 approval" in s
            and "! waiting" in s
        ),
    )
    assert "⚑1  DEMO-3" in screen and "⚑ 1 pending · v approvals" in screen
    assert "q Quit" in screen  # the footer

    pane.keys("2")  # focus the workers pane (the waiting worker is selected)
    pane.keys("a")  # approve it once
    pane.wait("the approval's result", lambda s: "DEMO-3: approved" in s)
    pane.wait("the badge to go", lambda s: "⚑ 1 approval" not in s.splitlines()[0])

    pane.keys("?")
    screen = pane.wait("the help screen", lambda s: "Keys" in s and "esc to close" in s)
    assert "Interrupt the selected worker's turn" in screen

    pane.keys("Escape")
    screen = pane.wait("help closed", lambda s: "esc to close" not in s and "4 Tokens" in s)

    pane.keys("q")
    screen = pane.wait(
        "the quit dialog or the exit",
        lambda s: "Quit and stop them?" in s or "EXITED" in s,
    )
    if "Quit and stop them?" in screen:  # workers still running: it asks first
        assert "Quit (y)" in screen and "Cancel (n)" in screen
        pane.keys("y")
    screen = pane.wait("the console to exit", lambda s: "EXITED" in s)
    assert "EXITED 0" in screen
    assert "Traceback" not in screen


def test_a_shell_in_a_workspace_has_the_terminal_and_gives_it_back(pane: Pane):
    # The event loop (and the scheduler) go on while the shell runs; the console must not
    # paint meanwhile: Textual's output thread is stopped, so a repaint would fill its queue
    # and freeze the console and its scheduler for good once the shell exits.
    pane.wait("a worker at work", lambda s: "● working" in s or "! waiting" in s)
    pane.keys("2")
    pane.keys("o")
    pane.wait("the workspace menu", lambda s: "Open a shell there" in s)
    pane.keys("Enter")
    pane.wait("the shell", lambda s: "ready>" in s and "4 Tokens" not in s)
    pane.keys("echo HANDED-$((40+2))", "Enter")
    pane.wait("the shell's output", lambda s: "HANDED-42" in s)
    time.sleep(4)  # the demo's agents go on: what the console would paint piles up
    pane.keys("exit", "Enter")
    pane.wait("the console back", lambda s: "4 Tokens" in s and "HANDED-42" not in s)
    pane.keys("?")  # and it answers keys again
    pane.wait("the help screen", lambda s: "esc to close" in s)
    pane.keys("Escape")
    pane.wait("help closed", lambda s: "esc to close" not in s)


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for c in children:
                out.append(int(c))
                todo.append(int(c))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent has not reaped it


def test_killing_the_terminal_stops_the_console_and_its_workers(pane: Pane):
    """tmux kill-server hangs up the pty (SIGHUP, SIGCONT, EIO on writes): the console
    must stop its workers and exit, leaving no process behind."""
    pane.wait(
        "a running worker",
        lambda s: "4 Tokens" in s and "● " in s and "0/3 running" not in s.splitlines()[0],
    )
    shell = int(pane.tmux("list-panes", "-t", "demo", "-F", "#{pane_pid}").split()[0])
    processes = _descendants(shell)
    assert processes, "the demo's processes were not found"
    pane.tmux("kill-server")
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and any(_alive(p) for p in processes):
        time.sleep(0.2)
    left = [p for p in processes if _alive(p)]
    for p in left:  # do not leave them to the next test run
        os.kill(p, 9)
    assert not left, f"processes outlived their terminal: {left}"


def test_sigterm_restores_the_terminal_and_exits_zero(pane: Pane):
    """``kill -TERM`` takes the quit path: workers stopped through ``shutdown``, the
    terminal back on the main screen with mouse reporting off and the cursor shown."""
    pane.wait(
        "a running worker",
        lambda s: "4 Tokens" in s and "● " in s and "0/3 running" not in s.splitlines()[0],
    )
    shell = int(pane.tmux("list-panes", "-t", "demo", "-F", "#{pane_pid}").split()[0])
    console = [p for p in _descendants(shell) if b"symphony_tui.cli" in _cmdline(p)]
    assert len(console) == 1, f"the console process was not found: {console}"
    workers = _descendants(console[0])
    os.kill(console[0], signal.SIGTERM)
    screen = pane.wait("the console to exit", lambda s: "EXITED" in s)
    assert "EXITED 0" in screen and "terminated: workers stopped" in screen
    assert "Traceback" not in screen
    modes = pane.tmux(
        "display-message", "-p", "-t", "demo", "#{alternate_on} #{mouse_any_flag} #{cursor_flag}"
    )
    assert modes.split() == ["0", "0", "1"], f"alternate screen, mouse, cursor: {modes!r}"
    assert not [p for p in workers if _alive(p)], "workers outlived the console"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
