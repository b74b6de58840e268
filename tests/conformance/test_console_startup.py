"""The console builds its scheduler after its first frame: a bad WORKFLOW.md still ends
with the same one-line error on stderr and exit 1 as a failure before the console
starts. Runs the real command line on a pseudo-terminal (the console needs one)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import child_env

ANSI = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def run_console(cwd: Path, *args: str, timeout_s: float = 60.0) -> tuple[int, str]:
    """Run ``symphony-tui ARGS`` on a 120x36 pseudo-terminal until it exits; its return
    code and everything it wrote, escape sequences removed."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = child_env(TERM="xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, "-m", "symphony_tui.cli", *args],
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, ANSI.sub(b"", out).decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("tracker:\n  kind: local\n  path: [\n", "workflow_parse_error"),
        ("tracker:\n  kind: redmine\n", "unsupported_tracker_kind"),
    ],
)
def test_a_bad_workflow_under_the_console_ends_with_its_one_line_error(tmp_path, front, expected):
    (tmp_path / "WORKFLOW.md").write_text(f"---\n{front}---\nprompt\n")
    code, text = run_console(tmp_path, "--no-lock", "--log-dir", str(tmp_path / "logs"))
    assert code == 1
    # (the console's last frame and the line share a row once escapes are removed)
    lines = re.findall(r"symphony-tui: [^\r\n]*", text)
    assert len(lines) == 1, text[-2000:]
    assert expected in lines[0]
    assert "Traceback" not in text
    assert "exited with an error" not in text  # the reason itself, not the generic line


def test_the_console_gives_the_terminal_back_with_the_modes_it_found(tmp_path):
    """The CLI holds the keys typed while the console loads (echo and line input off) and
    Textual saves the terminal's modes only after that: on quit the terminal must have
    the modes it had before ``symphony-tui`` started, echo on."""
    import fcntl
    import pty
    import struct
    import termios

    from .conftest import write_project

    project = write_project(tmp_path / "p", [])
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen(
        [sys.executable, "-m", "symphony_tui.cli", "--no-lock", "--log-dir", str(tmp_path / "l")],
        cwd=project.folder,
        env=child_env(TERM="xterm-256color"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and b"Workers (" not in ANSI.sub(b"", seen):
            if select.select([master], [], [], 0.1)[0]:
                seen += os.read(master, 65536)
        assert b"Workers (" in ANSI.sub(b"", seen), seen[-2000:]
        assert not termios.tcgetattr(slave)[3] & termios.ECHO  # the console has the keys
        os.write(master, b"q")  # nothing runs: quits at once
        after = b""
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([master], [], [], 0.1)[0]:
                after += os.read(master, 65536)
        logs = "".join(p.read_text() for p in (tmp_path / "l").glob("*.log"))
        assert proc.poll() == 0, (ANSI.sub(b"", after)[-1500:], logs[-1500:])
        assert termios.tcgetattr(slave) == before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)
