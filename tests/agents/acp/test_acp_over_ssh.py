"""An ACP agent on a worker host over the SSH stdio channel (the scripted agent, real sshd
on loopback): a turn with a permission runs there, the file methods are not offered (the
files are on the host), the scheduler's secrets are not sent, and nothing of the agent is
left on the host after close."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.config.settings import Settings
from symphony_tui.domain import ApprovalKind, EventKind
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue
from tests.hosts.conftest import fleet
from tests.hosts.test_codex_over_ssh import remote_descendants

from .conftest import FAKE_AGENT

pytestmark = pytest.mark.slow
__all__ = ["fleet"]

REPO = Path(__file__).resolve().parents[3]


class HostedSession(RecordingSessionHost):
    def __init__(self, workspace: Path, worker_host: str, **kw) -> None:
        super().__init__(workspace, **kw)
        self.worker_host = worker_host


def backend(fleet, tmp: Path, command: str = FAKE_AGENT) -> AcpBackend:
    settings = Settings.model_validate(
        {
            "agent": {"backend": "acp"},
            "acp": {
                "command": command,
                "env": {
                    "PYTHONPATH": f"{REPO}:{REPO / 'testing' / 'src'}",
                    "FAKE_ACP_STATE": str(tmp / "state"),
                    "SECRET_HERE": "$SCHED_SECRET",
                },
            },
            "tracker": {"secret_env_names": ["SCHED_SECRET"]},
            "worker": {"ssh_hosts": fleet.names},
        }
    )
    return AcpBackend(lambda: settings, env={"SCHED_SECRET": "s3cr3t"})


async def test_a_turn_runs_on_the_host_without_file_methods(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    host = HostedSession(ws, fleet.names[1], issue=make_issue("ASSH-1"))
    b = backend(fleet, tmp_path)
    session = await b.start_session(host)
    try:
        ran = await session.run_turn("RUN make")
        read = await session.run_turn(f"READ {ws / 'x.txt'}")
        launch = session._remote
        assert launch is not None and launch.host == fleet.names[1]
        assert await launch.alive()
    finally:
        await b.aclose()
    assert ran.status is TurnStatus.COMPLETED and read.status is TurnStatus.COMPLETED
    assert host.approvals[0].kind is ApprovalKind.COMMAND
    said = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert said[-1] == "read failed: method not found: fs/read_text_file"
    assert not await launch.alive()
    await asyncio.sleep(0.3)
    assert remote_descendants(fleet) == []


async def test_secrets_stay_here(tmp_path, fleet) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    out = tmp_path / "env.txt"
    b = backend(fleet, tmp_path, command=f"env > {out}; exit 0")
    with pytest.raises(AgentError):
        await b.start_session(HostedSession(ws, fleet.names[0]))
    env = out.read_text()
    assert "PYTHONPATH=" in env and "s3cr3t" not in env and "SECRET_HERE" not in env
