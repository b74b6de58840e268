"""The real codex app-server (0.171.0) runs a turn on a worker host over the
SSH stdio channel against the fake model server, and nothing of it is left on the host
after close. Real sshd on loopback; every message sent is checked against the schema the
same binary generates."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind
from symphony_tui_testing.codex_env import CodexSchema, generate_schema, make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.hosts.test_codex_over_ssh import HostedSession, remote_descendants
from tests.real_programs import require_codex

pytestmark = [pytest.mark.real_codex, pytest.mark.slow]


async def test_real_codex_runs_a_turn_on_the_host_and_leaves_nothing(tmp_path, fleet) -> None:
    codex_bin = require_codex()
    schema = CodexSchema(generate_schema(codex_bin, tmp_path / "schema"))
    workspace = tmp_path / "ws" / "SSH-1"
    workspace.mkdir(parents=True)
    sent: list[dict] = []
    with FakeModelServer(slow_delay=0.05) as fake:
        codex_env = make_codex_home(tmp_path / "codex-home", fake.url)
        settings = Settings.model_validate(
            {
                "codex": {
                    "command": f"{shlex.quote(str(codex_bin))} app-server",
                    "transport": "stdio",  # the app-server on the ssh session's pipes
                    "read_timeout_ms": 30_000,
                    "env": codex_env,
                },
                "worker": {"ssh_hosts": fleet.names},
            }
        )
        backend = CodexBackend(lambda: settings, sent=sent)
        host = HostedSession(Path(workspace), fleet.names[1])
        session = await backend.start_session(host)
        try:
            result = await session.run_turn("hello over ssh")
            assert result.status is TurnStatus.COMPLETED, result
            messages = host.of_kind(EventKind.MESSAGE)
            assert "Hello from the fake model. You said: hello over ssh" in messages[-1].message
            assert session._remote is not None and await session._remote.alive()
        finally:
            await session.close()
        await backend.aclose()
    assert schema.validate_all(sent) > 0
    await asyncio.sleep(0.5)
    assert remote_descendants(fleet) == []
