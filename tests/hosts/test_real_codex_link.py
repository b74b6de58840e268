"""The real codex app-server (0.171.0) runs detached on a worker host
(``codex.transport: unix``), reached through an ssh forward of its host-loopback socket;
the link drops and comes back (agents/codex/link.py). Real sshd on loopback, the fake
model server; every message sent is checked against the binary's schema.

One session, three turns:

1. a shell command whose whole turn (the command, its output, the model's answer, the
   turn's end) happens while every forward is killed for 3 s: the turn completes with the
   command's full output, caught up from ``thread/turns/list``;
2. an approval asked before a 3 s cut and answered after it: asked once, answered once,
   the command ran on the host;
3. the host's sshd killed for good: the turn fails, the session names the host lost, only
   after ``worker.host_lost_after_ms``.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from pathlib import Path

import psutil
import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.agents.codex.remote_detached import HostPlace
from symphony_tui.config.settings import Settings
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, EventKind
from symphony_tui.domain.payloads import CommandEnded, LinkChanged
from symphony_tui_testing.codex_env import CodexSchema, generate_schema, make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.hosts.test_codex_over_ssh import HostedSession
from tests.real_programs import require_codex

pytestmark = [pytest.mark.real_codex, pytest.mark.slow]

LOST_AFTER_MS = 4_000


async def cut(local_socket: str, seconds: float) -> int:
    """Kill every ssh client forwarding ``local_socket``, again and again for ``seconds``
    (the link's reconnect attempts fail meanwhile); returns how many were killed."""
    killed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmdline = proc.info["cmdline"] or []
            if proc.info["name"] == "ssh" and any(local_socket in a for a in cmdline):
                try:
                    proc.kill()
                    killed += 1
                except psutil.Error:
                    pass
        await asyncio.sleep(0.05)
    return killed


def link_states(host: HostedSession) -> list[str]:
    return [e.payload.state for e in host.events if isinstance(e.payload, LinkChanged)]


async def test_a_dropped_link_reconnects_resumes_and_fails_as_host_down(tmp_path, fleet) -> None:
    codex_bin = require_codex()
    schema = CodexSchema(generate_schema(codex_bin, tmp_path / "schema"))
    workspace = tmp_path / "ws" / "LINK-1"
    workspace.mkdir(parents=True)
    sent: list[dict] = []
    gate = asyncio.Event()

    async def approve(request) -> ApprovalAnswer:
        await gate.wait()
        return ApprovalAnswer(decision=ApprovalDecision.ACCEPT, by="operator")

    with FakeModelServer(slow_delay=0.05) as fake:
        codex_env = make_codex_home(tmp_path / "codex-home", fake.url)
        settings = Settings.model_validate(
            {
                "codex": {
                    "command": f"{shlex.quote(str(codex_bin))} app-server",
                    "transport": "unix",
                    "read_timeout_ms": 30_000,
                    "env": codex_env,
                },
                "worker": {"ssh_hosts": fleet.names, "host_lost_after_ms": LOST_AFTER_MS},
            }
        )
        backend = CodexBackend(lambda: settings, sent=sent)
        host = HostedSession(Path(workspace), fleet.names[1], approve=approve)
        session = await backend.start_session(host)
        agent = session.detached
        assert agent is not None and agent.host == fleet.names[1]
        assert host.recorded["agent"]["host"] == fleet.names[1]
        try:
            assert session._link is not None
            place = session._link.place
            assert isinstance(place, HostPlace) and place.local_socket is not None
            local = place.local_socket
            # 1. the whole turn happens during the cut
            turn = asyncio.create_task(session.run_turn("SHELL: sleep 1; echo LINK-OUTPUT-1"))
            await host.wait_for(EventKind.COMMAND_STARTED, timeout=60)
            assert await cut(local, 3.0) >= 1
            result = await asyncio.wait_for(turn, 60)
            assert result.status is TurnStatus.COMPLETED, result
            ended = [e.payload for e in host.of_kind(EventKind.COMMAND_COMPLETED)]
            assert any(
                isinstance(p, CommandEnded) and "LINK-OUTPUT-1" in p.output for p in ended
            ), ended
            assert "LINK-OUTPUT-1" in host.of_kind(EventKind.MESSAGE)[-1].message
            assert session._link.reconnects == 1
            assert link_states(host) == ["reconnecting", "connected"]

            # 2. an approval pending across the cut, answered after it
            turn = asyncio.create_task(
                session.run_turn("ESCALATE SHELL: echo approved > proof.txt")
            )
            await host.wait_for(EventKind.APPROVAL_REQUESTED, timeout=60)
            assert await cut(local, 3.0) >= 1
            await host.wait_for(
                lambda e: isinstance(e.payload, LinkChanged) and len(link_states(host)) == 4,
                timeout=30,
            )
            gate.set()
            result = await asyncio.wait_for(turn, 60)
            assert result.status is TurnStatus.COMPLETED, result
            assert (workspace / "proof.txt").read_text() == "approved\n"
            assert len(host.approvals) == 1 and len(host.answers) == 1
            assert len(host.of_kind(EventKind.APPROVAL_REQUESTED)) == 1
            answers = [m for m in sent if "result" in m and "decision" in (m["result"] or {})]
            assert len(answers) == 1, answers

            # 3. the host goes away for good: host down after the deadline, not before
            turn = asyncio.create_task(session.run_turn("SLOW400 words"))
            await host.wait_for(EventKind.TURN_STARTED, timeout=60)
            await asyncio.sleep(0.5)
            fleet.hosts[1].kill()
            killed_at = time.monotonic()
            with pytest.raises(AgentError):
                await asyncio.wait_for(turn, 60)
            assert time.monotonic() - killed_at >= LOST_AFTER_MS / 1000
            assert session.host_lost == fleet.names[1]
            assert link_states(host)[-2:] == ["reconnecting", "lost"]
        finally:
            await session.close()
            await backend.aclose()
            with_pgid = agent.pgid if agent is not None else None
            if with_pgid is not None:  # the host was killed: what ran there is ours to end
                try:
                    os.killpg(with_pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    assert schema.validate_all(sent) > 0
