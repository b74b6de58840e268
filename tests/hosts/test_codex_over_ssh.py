"""A codex app-server session on a worker host over the SSH stdio channel (the
bundled simulated agent speaks the protocol), and nothing of it left on the host after
close, even when the agent started children of its own. Real sshd on loopback."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEMO = f"{shlex.quote(sys.executable)} -m symphony_tui.demo.agent"


class HostedSession(RecordingSessionHost):
    """The recording host with a worker host, as the scheduler's RunChannel has."""

    def __init__(self, workspace: Path, worker_host: str, **kw) -> None:
        super().__init__(workspace, **kw)
        self.worker_host = worker_host


def backend(fleet, command: str = DEMO, env: dict | None = None) -> CodexBackend:
    settings = Settings.model_validate(
        {
            "codex": {
                "command": command,
                "env": {"PYTHONPATH": str(REPO), "SECRET_HERE": "$SCHED_SECRET", **(env or {})},
                "read_timeout_ms": 20_000,
            },
            "tracker": {"secret_env_names": ["SCHED_SECRET"]},
            "worker": {"ssh_hosts": fleet.names},
        }
    )
    return CodexBackend(lambda: settings, env={"SCHED_SECRET": "s3cr3t"})


def remote_descendants(fleet) -> list[int]:
    """Live processes the hosts' sshd started, other than sshd's own (the master
    connection's session process stays while the connection is reused)."""
    out = []
    for host in fleet.hosts:
        out.extend(p for p in host.sessions() if _live(p) and not _comm(p).startswith("sshd"))
    return out


def left_on_hosts(fleet, timeout: float) -> list[tuple[int, bytes]]:
    """Wait up to ``timeout`` seconds for a moment when nothing runs on the hosts
    (:func:`remote_descendants`); [] then, else what is still there with its command
    line (for a failure's message). One empty look is enough: with a scheduler running,
    its own short commands on a host (the recovered-workspace scan, a manifest write)
    come and go, and sampling again could catch one of them, while what a run left
    behind never gives that empty look."""
    deadline = time.monotonic() + timeout
    while True:
        left = remote_descendants(fleet)
        if not left:
            return []
        if time.monotonic() >= deadline:
            return [(p, _cmd(p)[:200]) for p in left if _live(p)]
        time.sleep(0.1)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _live(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def test_a_turn_runs_on_the_host_and_close_leaves_nothing_there(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    host = HostedSession(ws, fleet.names[1], issue=make_issue("SSH-1"))
    session = await backend(fleet).start_session(host)
    try:
        result = await session.run_turn("Do it. [demo: two-turns]")
        assert result.status is TurnStatus.COMPLETED, result
        assert host.recorded.get("thread_id")
        launch = session._remote
        assert launch is not None and launch.host == fleet.names[1]
        assert await launch.alive()
    finally:
        await session.close()
    assert not await launch.alive()
    await asyncio.sleep(0.3)
    assert remote_descendants(fleet) == []


async def test_close_mid_turn_ends_the_agent_and_its_children_on_the_host(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    # An "agent" that starts a long child, then never answers: only a group kill ends it.
    fake = tmp_path / "agent.sh"
    fake.write_text("sleep 6107 &\nsleep 6108\n")
    host = HostedSession(ws, fleet.names[0])
    b = backend(fleet, command=f"sh {fake}")
    b._settings().codex  # noqa: B018 - settings are built
    task = asyncio.ensure_future(b.start_session(host))
    deadline = asyncio.get_running_loop().time() + 20
    while asyncio.get_running_loop().time() < deadline:
        if any(b"sleep\x006108" in _cmd(p) for p in _all_pids()):
            break
        await asyncio.sleep(0.1)
    assert any(b"sleep\x006107" in _cmd(p) for p in _all_pids()), "the agent did not start"
    task.cancel()
    with pytest.raises((asyncio.CancelledError, AgentError)):
        await task
    await asyncio.sleep(0.3)
    # Exactly the agent's two, by whole command line (another test may run a sleep too).
    ours = (b"sleep\x006107\x00", b"sleep\x006108\x00")
    left = [p for p in _all_pids() if _cmd(p) in ours and _live(p)]
    assert left == [], "agent processes survived on the host"


async def test_secrets_stay_here_and_missing_programs_are_one_line(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    out = tmp_path / "env.txt"
    b = backend(fleet, command=f"env > {out}; exit 0")
    with pytest.raises(AgentError):
        await b.start_session(HostedSession(ws, fleet.names[0]))
    env = out.read_text()
    assert "PYTHONPATH=" in env and "s3cr3t" not in env and "SECRET_HERE" not in env
    b = backend(fleet, command="no-such-codex app-server")
    with pytest.raises(AgentError) as err:
        await b.start_session(HostedSession(ws, fleet.names[0]))
    assert "not found on host" in str(err.value) and "\n" not in str(err.value)


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _cmd(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def test_a_hosts_own_command_runs_there_only(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings.model_validate(
        {
            "codex": {"command": DEMO, "env": {"PYTHONPATH": str(REPO)}},
            "worker": {
                "ssh_hosts": fleet.names,
                "hosts": {fleet.names[0]: {"commands": {"codex": "/opt/nowhere/codex app-server"}}},
            },
        }
    )
    b = CodexBackend(lambda: settings)
    with pytest.raises(AgentError) as err:
        await b.start_session(HostedSession(ws, fleet.names[0]))
    assert "'/opt/nowhere/codex app-server' not found on host" in str(err.value)
    session = await b.start_session(HostedSession(ws, fleet.names[1]))
    await session.close()
