"""The shared managed-server launcher: argv errors, probe deadline, process-group stop."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.local_server import LocalServer, command_argv


class CountingProbe:
    """Healthy after ``after`` calls; records that it was closed."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.calls = 0
        self.closed = False

    async def health(self) -> bool:
        self.calls += 1
        return self.calls > self.after

    async def aclose(self) -> None:
        self.closed = True


def alive(pid: int) -> bool:
    """Running, not a zombie (an orphan waits for whatever reaps it here)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_command_argv_names_the_setting() -> None:
    assert command_argv("opencode serve --x 'a b'", "opencode.command") == [
        "opencode",
        "serve",
        "--x",
        "a b",
    ]
    with pytest.raises(AgentError, match=r"^launch_failed: x\.command is empty$"):
        command_argv("  ", "x.command")
    with pytest.raises(AgentError, match=r"^launch_failed: x\.command: No closing quotation$"):
        command_argv("serve 'oops", "x.command")


async def test_launch_passes_port_env_cwd_and_stop_ends_the_whole_group(tmp_path: Path) -> None:
    # The server starts a child that ignores SIGTERM: stop() must still end it (SIGKILL).
    script = tmp_path / "server.py"
    script.write_text(
        "import os, signal, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        "print('argv', sys.argv[1:], 'cwd', os.getcwd(), 'flag', os.environ['FLAG'], "
        "'child', child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    server = LocalServer("demo", tmp_path / "server.log", startup_timeout_s=30)
    probe = CountingProbe(after=2)
    urls: list[str] = []

    def make_probe(url: str) -> CountingProbe:
        urls.append(url)
        return probe

    await server.launch(
        [sys.executable, str(script)],
        host_flag="--host",
        env={**os.environ, "FLAG": "on"},
        cwd=tmp_path,
        probe=make_probe,
    )
    try:
        assert server.running and server.startup_s is not None and probe.closed
        assert server.base_url is not None and urls == [server.base_url]
        port = server.base_url.rsplit(":", 1)[1]
        line = server.log_path.read_text().splitlines()[0]
        assert f"argv ['--host', '127.0.0.1', '--port', '{port}']" in line
        assert f"cwd {tmp_path}" in line and "flag on" in line
        child = int(line.rsplit(" ", 1)[1])
    finally:
        await server.stop(grace_s=0.5)
    assert not server.running and server.pid is None
    # SIGKILL is delivered asynchronously: wait (bounded) for the orphan to die.
    async with asyncio.timeout(10):
        while alive(child):
            await asyncio.sleep(0.02)
    await server.stop()  # idempotent


async def test_a_server_that_exits_is_one_line_with_its_output(tmp_path: Path) -> None:
    server = LocalServer("demo", tmp_path / "server.log")
    code = "import sys; print('first'); print('bad config', file=sys.stderr); sys.exit(2)"
    with pytest.raises(AgentError) as info:
        await server.launch(
            [sys.executable, "-c", code],
            host_flag="--host",
            env=dict(os.environ),
            cwd=tmp_path,
            probe=lambda url: CountingProbe(after=10**6),
        )
    assert str(info.value) == "launch_failed: demo exited with 2: first | bad config"
    assert not server.running


async def test_a_server_never_healthy_times_out_and_is_stopped(tmp_path: Path) -> None:
    server = LocalServer("demo", tmp_path / "server.log", startup_timeout_s=0.3)
    probe = CountingProbe(after=10**6)
    with pytest.raises(AgentError, match=r"^launch_failed: demo not healthy after 0\.3s: $"):
        await server.launch(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            host_flag="--host",
            env=dict(os.environ),
            cwd=tmp_path,
            probe=lambda url: probe,
        )
    assert not server.running and probe.closed
