"""The real OpenHands agent-server (1.58.2) started on a worker host in the
workspace, reached through an SSH port forward (REST and the event WebSocket), runs a turn
with a shell command end to end against the fake model; an interrupt ends a turn; after
close nothing of it is left on the host, its terminal tool's tmux servers included; a
missing program is one line. Real sshd on loopback."""

from __future__ import annotations

import asyncio
import shlex
import shutil
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.openhands import OpenHandsBackend
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.openhands_env import fake_llm
from symphony_tui_testing.session_host import make_issue
from tests.hosts.test_codex_over_ssh import HostedSession, remote_descendants
from tests.real_programs import require_openhands, require_tmux

pytestmark = [pytest.mark.real_openhands, pytest.mark.slow]

QUICK = StreamOptions(readiness_timeout_s=30, backoff_initial_s=0.1, backoff_max_s=1.0)


def backend(fleet, model_url: str, *, command: str | None = None) -> OpenHandsBackend:
    if command is None:
        venv = require_openhands()
        command = f"{shlex.quote(str(venv / 'bin' / 'python'))} -m openhands.agent_server"
    settings = Settings.model_validate(
        {
            "agent": {"backend": "openhands"},
            "openhands": {
                "command": command,
                "llm": fake_llm(model_url),
                "confirmation_policy": "NeverConfirm",
                "ws_auth": "first_frame",
                "startup_timeout_ms": 120_000,
                "env": {"LEAK": "$SCHED_SECRET"},
            },
            "tracker": {"secret_env_names": ["SCHED_SECRET"]},
            "worker": {"ssh_hosts": fleet.names},
        }
    )
    return OpenHandsBackend(
        lambda: settings,
        env={"SCHED_SECRET": "s3cr3t"},
        state_dir=Path("/nonexistent/not-used-on-hosts"),
        stream_options=QUICK,
    )


def tmux_dirs() -> set[Path]:
    return set(Path("/tmp").glob("sym-oh-*"))


def run_processes(folders: set[Path]) -> list[int]:
    """Live processes started with one of these private ``TMUX_TMPDIR`` folders: the
    server, its tool shells and the tmux servers that left its process group."""
    marks = [f"TMUX_TMPDIR={f}".encode() for f in folders]
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and any(m in environ.split(b"\0") for m in marks):
            out.append(int(entry.name))
    return out


async def test_real_agent_server_runs_a_turn_on_the_host_and_leaves_nothing(
    tmp_path, fleet
) -> None:
    require_tmux()
    ws = tmp_path / "remote-ws" / "OH-1"
    ws.mkdir(parents=True)
    before = tmux_dirs()
    with FakeModelServer(slow_delay=0.2) as model:
        b = backend(fleet, model.url)
        host = HostedSession(ws, fleet.names[1], issue=make_issue("OH-1"))
        session = await b.start_session(host)
        try:
            result = await session.run_turn("SHELL: echo hello > greeting.txt")
            assert result.status is TurnStatus.COMPLETED, result
            seen = len(host.events)  # the first turn's events are not this one's
            turn = asyncio.create_task(session.run_turn("SLOW200 take your time"))
            await host.wait_for(
                lambda e: (
                    getattr(e.payload, "status", None) == "running"
                    and any(x is e for x in host.events[seen:])
                ),
                timeout=60,
            )
            await session.interrupt()
            cut = await asyncio.wait_for(turn, 30)
            assert cut.status is TurnStatus.INTERRUPTED, cut
            assert remote_descendants(fleet), "no server process on the host"
            ours = tmux_dirs() - before
            assert ours, "the terminal tool's tmux folder is not private"
            tmux = [p for p in run_processes(ours) if b"tmux" in _comm(p)]
            assert tmux, "no tmux server of the terminal tool"
        finally:
            await session.close()
            await b.aclose()
    # The command ran in the workspace on the host.
    assert (ws / "greeting.txt").read_text() == "hello\n"
    kinds = host.kinds()
    assert EventKind.COMMAND_STARTED in kinds and EventKind.COMMAND_COMPLETED in kinds
    assert host.recorded["backend"] == "openhands" and host.recorded["conversation_id"]
    state = ws / ".symphony" / "openhands"
    assert (state / "conversations").is_dir() and (state / "secret_key").stat().st_mode & 0o077 == 0
    assert "s3cr3t" not in (state / "server.log").read_text()
    await asyncio.sleep(0.5)
    assert remote_descendants(fleet) == []
    assert tmux_dirs() - before == set(), "the tmux folder outlived the session"
    assert run_processes(ours) == [], "processes of the run (tmux servers) outlived it"


def _comm(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/comm").read_bytes()
    except OSError:
        return b""


async def test_a_missing_program_on_the_host_is_one_line(tmp_path, fleet) -> None:
    ws = tmp_path / "remote-ws" / "OH-2"
    ws.mkdir(parents=True)
    b = backend(
        fleet, "http://127.0.0.1:9", command="/opt/nowhere/python -m openhands.agent_server"
    )
    with pytest.raises(AgentError) as err:
        await b.start_session(HostedSession(ws, fleet.names[0]))
    text = str(err.value)
    assert "not found on host" in text and "\n" not in text, text
    await asyncio.sleep(0.3)
    assert remote_descendants(fleet) == []
    assert shutil.which("sh")  # the host needed nothing more than sh to say so
