"""The detached app-server's pieces without codex: the manifest record, liveness against
pid reuse, the socket folder, the WebSocket line link, and the re-attach deadline."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.agents.codex.detached import (
    DetachedAgent,
    alive,
    kill_pgid,
    socket_folder,
    start_ticks,
)
from symphony_tui.agents.codex.link import AppServerLink, LocalPlace
from symphony_tui.config.settings import Settings
from symphony_tui_testing.session_host import RecordingSessionHost

# A WebSocket server on a unix socket that accepts connections and never answers a
# message (an app-server that hangs), or (ECHO) answers each request with its id.
SERVER = textwrap.dedent(
    """
    import asyncio, json, sys
    from websockets.asyncio.server import unix_serve

    async def handler(ws):
        async for message in ws:
            if sys.argv[2] == "echo":
                msg = json.loads(message)
                await ws.send(json.dumps({"id": msg["id"], "result": {"echo": msg["method"]}}))

    async def main():
        async with unix_serve(handler, sys.argv[1]):
            print("ready", flush=True)
            await asyncio.Future()

    asyncio.run(main())
    """
)


def serve(sock: Path, mode: str) -> subprocess.Popen[bytes]:
    """The server above in its own session (a detached agent's shape); returns once it
    listens."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(sock), mode],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def agent_of(proc: subprocess.Popen[bytes], sock: Path) -> DetachedAgent:
    return DetachedAgent(
        pid=proc.pid,
        pgid=proc.pid,
        socket=str(sock),
        log="",
        started_at="2026-01-01T00:00:00+00:00",
        start_ticks=start_ticks(proc.pid),
    )


def test_the_manifest_record_names_an_adoptable_agent_only():
    agent = DetachedAgent(1, 1, "/s", "/l", "t", 5)
    assert DetachedAgent.from_facts(agent.facts()) == agent
    assert DetachedAgent.from_facts(agent.facts(adoptable=False)) is None
    assert DetachedAgent.from_facts({**agent.facts(), "transport": "stdio"}) is None
    assert DetachedAgent.from_facts({**agent.facts(), "pid": "x"}) is None
    assert DetachedAgent.from_facts(None) is None


async def test_alive_follows_the_group_and_refuses_a_reused_pid(tmp_path):
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        agent = agent_of(proc, tmp_path / "s")  # type: ignore[arg-type]
        assert agent.start_ticks is not None and alive(agent)
        reused = DetachedAgent(**{**agent.__dict__, "start_ticks": agent.start_ticks + 1})
        assert not alive(reused)
        await kill_pgid(agent.pgid, grace_s=1)
        proc.wait(timeout=5)
        assert not alive(agent)
    finally:
        proc.kill()


def test_the_socket_folder_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = socket_folder()
    assert folder.parent == tmp_path / "symphony-tui"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700


async def test_the_link_carries_lines_both_ways_and_ends_with_the_agent(tmp_path):
    sock = tmp_path / "app.sock"
    proc = serve(sock, "echo")
    try:
        place = LocalPlace(agent_of(proc, sock))
        link = await AppServerLink.open(place, 10, hello={}, lost_after_s=10)
        link.writer.write(b'{"id":1,"method":"initialize"}\n{"id":2,"method":"x"}\n')
        await link.writer.drain()
        first = json.loads(await link.reader.readline())
        second = json.loads(await link.reader.readline())
        assert (first["id"], second["result"]) == (1, {"echo": "x"})
        os.killpg(proc.pid, 9)
        assert await asyncio.wait_for(link.reader.read(), 10) == b""
        assert "the app-server is gone" in link.close_reason
        assert link.state == "lost" and link.host_lost is None
        await link.aclose()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("silent", [True, False])
async def test_an_agent_that_does_not_reattach_in_time_is_ended(tmp_path, silent):
    sock = tmp_path / "app.sock"
    ws = tmp_path / "ws"
    ws.mkdir()
    # silent: the socket accepts but the app-server never answers initialize; else the
    # socket is gone (nothing listens) while the process lives on
    proc = (
        serve(sock, "silent")
        if silent
        else subprocess.Popen(["sleep", "30"], start_new_session=True)  # type: ignore[assignment]
    )
    try:
        settings = Settings.model_validate(
            {"codex": {"transport": "unix", "reattach_timeout_ms": 600, "read_timeout_ms": 300}}
        )
        backend = CodexBackend(lambda: settings)
        host = RecordingSessionHost(ws, resume={"thread_id": "th-1", "turn_id": "tu-1"})
        agent = agent_of(proc, sock)
        with pytest.raises(AgentError) as err:
            await backend.adopt_session(host, agent)
        assert err.value.code == "reattach_failed"
        assert proc.wait(timeout=10) is not None  # its process group was ended
        assert not alive(agent)
        assert host.recorded["agent"]["adoptable"] is False
    finally:
        proc.kill()
        proc.wait()


async def test_a_dead_agent_is_not_reattached(tmp_path):
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    settings = Settings.model_validate({"codex": {"transport": "unix"}})
    backend = CodexBackend(lambda: settings)
    host = RecordingSessionHost(tmp_path, resume={"thread_id": "th-1"})
    with pytest.raises(AgentError) as err:
        await backend.adopt_session(host, agent_of(proc, tmp_path / "gone.sock"))
    assert err.value.code == "process_exited"


async def test_ending_an_agent_ends_the_children_it_started_in_sessions_of_their_own(tmp_path):
    # codex runs a login shell in a session of its own; killpg of the agent's group alone
    # leaves it running
    pidfile = tmp_path / "escaped.pid"
    proc = subprocess.Popen(
        ["bash", "-c", f"setsid sleep 60 & echo $! > {pidfile}; sleep 60"],
        start_new_session=True,
    )
    try:
        escaped = int(await _read_soon(pidfile))
        for _ in range(250):  # $! is known before the child has called setsid()
            if os.getpgid(escaped) != proc.pid:
                break
            await asyncio.sleep(0.02)
        assert os.getpgid(escaped) != proc.pid
        await kill_pgid(proc.pid, grace_s=1)
        proc.wait(timeout=5)
        for _ in range(100):
            if start_ticks(escaped) is None or _zombie(escaped):
                break
            await asyncio.sleep(0.02)
        assert start_ticks(escaped) is None or _zombie(escaped)
    finally:
        proc.kill()
        proc.wait()


async def _read_soon(path: Path) -> str:
    for _ in range(250):
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} not written")


def _zombie(pid: int) -> bool:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat_line[stat_line.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


async def test_closing_the_backend_leaves_no_detached_agent_behind(tmp_path):
    # a session whose orderly close did not end its app-server (it timed out, say)
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        settings = Settings.model_validate({"codex": {"transport": "unix"}})
        backend = CodexBackend(lambda: settings)
        folder = tmp_path / "sock"
        folder.mkdir()
        (folder / "app.sock").touch()
        agent = agent_of(proc, folder / "app.sock")  # type: ignore[arg-type]
        backend._groups[proc.pid] = agent
        await backend.aclose()
        assert proc.wait(timeout=5) == -9
        assert not backend._groups and not folder.exists()
    finally:
        proc.kill()
        proc.wait()
