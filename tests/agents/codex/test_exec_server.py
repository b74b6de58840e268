"""The exec-server link's parts without codex (agents/codex/exec_server.py): the token
file, the launch script (run here with ``sh`` against a stand-in program), and the link's
answer to a dropped forward (a stand-in ssh: one that binds the port, one that cannot
reach the host)."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.exec_server import (
    CONTROL_NAME,
    LOG_FILE,
    TOKEN_NAME,
    ExecServerLink,
    exec_server_program,
    launch_script,
    new_token,
    read_token,
    sweep_stale_tokens,
    token_digest,
    write_token,
)
from symphony_tui.agents.reconnect import Backoff
from symphony_tui.domain.payloads import LinkChanged
from symphony_tui.hosts.ssh import Completed, SshError, free_port


def private(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    return folder


def test_the_token_file_is_the_users_alone_and_never_overwritten(tmp_path: Path) -> None:
    folder = private(tmp_path)
    token = new_token()
    assert len(token) >= 43 and token != new_token()
    path = write_token(folder, token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_token(path) == token
    with pytest.raises(AgentError, match="cannot write the token file"):
        write_token(folder, "another")  # an existing file (or a planted link) is refused
    assert read_token(path) == token
    os.chmod(path, 0o644)
    with pytest.raises(AgentError, match="open to others"):
        read_token(path)
    link = folder / "link"
    link.symlink_to(path)
    with pytest.raises(AgentError, match="cannot read the token file"):
        read_token(link)


def test_the_token_folder_must_be_private(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    with pytest.raises(AgentError, match="open to others"):
        write_token(folder, new_token())
    assert list(folder.iterdir()) == []


HOLDER = """
import sys, time
from pathlib import Path
from symphony_tui.agents.codex.exec_server import hold_token
hold_token(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


def test_a_killed_schedulers_token_folder_is_swept_a_live_ones_kept(tmp_path: Path) -> None:
    base = private(tmp_path)
    folders = {name: base / f"codex-{name}" for name in ("live", "dead", "fresh", "app")}
    for name, folder in folders.items():
        folder.mkdir(mode=0o700)
        if name != "app":
            write_token(folder, new_token())
    (folders["dead"] / CONTROL_NAME).write_text("")  # its control socket, left too
    (folders["app"] / "app.sock").write_text("")  # a detached app-server's: not a token folder
    old = time.time() - 120
    for name in ("live", "dead"):
        os.utime(folders[name] / TOKEN_NAME, (old, old))
    live = subprocess.Popen(  # a scheduler whose run holds its token file
        [sys.executable, "-c", HOLDER, str(folders["live"] / TOKEN_NAME)], stdout=subprocess.PIPE
    )
    try:
        assert live.stdout is not None and live.stdout.readline() == b"held\n"
        assert sweep_stale_tokens(base) == [folders["dead"]]
        assert not folders["dead"].exists()
        assert (folders["live"] / TOKEN_NAME).exists() and (folders["fresh"] / TOKEN_NAME).exists()
        live.kill()  # kill -9: its lock goes with it, the file stays
        live.wait(10)
        assert sweep_stale_tokens(base) == [folders["live"]]
    finally:
        live.kill()
        live.wait(10)
    assert sorted(p.name for p in base.iterdir()) == ["codex-app", "codex-fresh"]


def test_the_program_is_the_words_before_app_server() -> None:
    assert exec_server_program("codex app-server") == "codex"
    assert exec_server_program("'/opt/my codex/codex' app-server -c x=1") == "'/opt/my codex/codex'"
    assert exec_server_program("npx -y @openai/codex app-server") == "npx -y @openai/codex"
    for bad in ("my-agent --stdio", "app-server"):
        with pytest.raises(ValueError):
            exec_server_program(bad)


FAKE_SERVER = """#!/bin/sh
# stands in for codex: prints where it listens, as exec-server does, and its arguments
echo "$@" > args.txt
echo "starting"
echo "ws://127.0.0.1:45678"
exec sleep 30
"""


def _run(script: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", script], capture_output=True, timeout=30, cwd=cwd)


def test_the_launch_script_starts_it_detached_and_reports_pid_and_url(tmp_path: Path) -> None:
    program = tmp_path / "codex"
    program.write_text(FAKE_SERVER)
    program.chmod(0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    token = new_token()
    script = launch_script(
        str(ws), str(program), token_digest(token), pgid_file=".symphony/agent-x.pgid",
        env={"WHERE": "there", "DROPPED": None},
    )  # fmt: skip
    assert token not in script
    done = _run(script)
    assert done.returncode == 0, done.stderr
    pid, url, _ticks = done.stdout.decode().split()
    try:
        assert url == "ws://127.0.0.1:45678"
        assert os.getpgid(int(pid)) == int(pid)  # the leader of a group of its own
        assert (ws / ".symphony/agent-x.pgid").read_text().split()[0] == pid
        args = (ws / "args.txt").read_text().split()
        assert args[:3] == ["exec-server", "--listen", "ws://127.0.0.1:0"]
        assert args[-2:] == ["--ws-token-sha256", token_digest(token)]
        assert "starting" in (ws / LOG_FILE).read_text()
    finally:
        os.killpg(int(pid), 9)


def test_the_launch_script_says_why_it_did_not_start(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    missing = launch_script(str(ws), str(tmp_path / "nope"), "00", pgid_file=".symphony/a.pgid")
    done = _run(missing)
    assert done.returncode == 127
    assert b"not found" in done.stderr or b"No such file" in done.stderr
    assert not (ws / ".symphony/a.pgid").exists()
    gone = launch_script(str(tmp_path / "gone"), "codex", "00", pgid_file=".symphony/a.pgid")
    assert _run(gone).returncode == 94


class FakeTarget:
    """An ``SshTarget`` stand-in: the link's connection is a program (``CONNECTION``, or
    ``UNREACHABLE``) that makes its control file and binds the port it is told to
    forward (``add_forward_argv`` writes it down); a command on the host answers
    ``alive`` or ``gone``."""

    name = "build-1"
    connect_timeout_s = 2.0

    def __init__(self, *, alive: bool = True) -> None:
        self.reachable = True
        self.is_alive = alive
        self.connections = 0
        self.scripts: list[str] = []

    def connection_argv(self, control: str) -> list[str]:
        self.connections += 1
        if not self.reachable:
            return ["sh", "-c", UNREACHABLE]
        return [sys.executable, "-c", CONNECTION, control]

    def add_forward_argv(self, control: str, local_port: int, remote_port: int) -> list[str]:
        return ["sh", "-c", f"echo {local_port} > {control}.port"]

    async def run(self, script: str, *, timeout_s: float | None = None) -> Completed:
        self.scripts.append(script)
        if not self.reachable:
            raise SshError("refused", self.name, "host build-1 refused the connection")
        return Completed(0, b"alive\n" if self.is_alive else b"gone\n", b"")


CONNECTION = (
    "import os, socket, sys, time\n"
    "control = sys.argv[1]; open(control, 'w').close()\n"
    "while not os.path.exists(control + '.port'): time.sleep(0.01)\n"
    "port = int(open(control + '.port').read()); os.unlink(control + '.port')\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', port)); s.listen(); time.sleep(60)\n"
)
UNREACHABLE = "echo 'ssh: connect to host build-1 port 22: Connection refused' >&2; exit 255"
FAST = Backoff(initial_s=0.01, max_s=0.05, max_attempts=1_000_000, jitter=0.5)


def _link(target: FakeTarget, tmp_path: Path, lost_after_s: float) -> ExecServerLink:
    link = ExecServerLink(
        target,  # type: ignore[arg-type]
        "/ws/A-1",
        "codex app-server",
        {},
        private(tmp_path),
        lost_after_s=lost_after_s,
        backoff=FAST,
    )
    link.local_port, link.remote_port, link.pid = free_port(), 4567, 4242
    link._launched = True
    return link


async def _follow(link: ExecServerLink) -> tuple[list[LinkChanged], list[str]]:
    states: list[LinkChanged] = []
    lost: list[str] = []
    link.on_state = lambda e: states.append(e.payload)  # type: ignore[arg-type,misc]
    link.on_lost = lambda: lost.append(link.close_reason)
    await link._open_forward()
    link._watch = asyncio.create_task(link._follow())
    return states, lost


async def test_a_dropped_forward_comes_back_on_the_same_port(tmp_path: Path) -> None:
    target = FakeTarget()
    link = _link(target, tmp_path, lost_after_s=30)
    states, lost = await _follow(link)
    port = link.local_port
    try:
        assert link._forward is not None
        link._forward.kill()
        for _ in range(200):
            if link.reconnects:
                break
            await asyncio.sleep(0.02)
        assert link.reconnects == 1 and link.state == "connected" and lost == []
        assert link.local_port == port and target.connections == 2
        assert [(s.mode, s.state, s.host) for s in states] == [
            ("exec-server", "reconnecting", "build-1"),
            ("exec-server", "connected", "build-1"),
        ]
        assert states[0].since is not None and "ssh client exited" in (states[0].reason or "")
    finally:
        await link.stop()
    assert not (tmp_path / "private").exists()  # the token folder goes with the link
    assert "kill -s TERM" in target.scripts[-1]  # its group there too


async def test_a_host_not_reached_until_the_deadline_is_host_down(tmp_path: Path) -> None:
    target = FakeTarget()
    link = _link(target, tmp_path, lost_after_s=1.5)
    states, lost = await _follow(link)
    try:
        target.reachable = False
        assert link._forward is not None
        link._forward.kill()
        assert link._watch is not None
        await asyncio.wait_for(link._watch, 30)
        assert link.host_lost == "build-1" and link.state == "lost"
        assert lost == [link.close_reason]
        assert "host build-1 not reached for 1.5s" in link.close_reason
        assert "refused the connection" in link.close_reason
        assert target.connections > 3  # it kept trying until the deadline
        assert [s.state for s in states] == ["reconnecting", "lost"]
    finally:
        await link.stop()


async def test_an_exec_server_gone_from_a_host_that_answers_is_not_host_down(
    tmp_path: Path,
) -> None:
    target = FakeTarget(alive=False)
    link = _link(target, tmp_path, lost_after_s=30)
    _states, lost = await _follow(link)
    try:
        assert link._forward is not None
        link._forward.kill()
        assert link._watch is not None
        await asyncio.wait_for(link._watch, 30)
        assert link.host_lost is None and link.state == "lost" and len(lost) == 1
        assert "the exec-server on host build-1 is gone" in link.close_reason
    finally:
        await link.stop()
