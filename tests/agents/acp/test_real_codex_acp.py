"""The ACP backend driving a second real ACP agent: the Codex adapter
``@zed-industries/codex-acp`` (pinned :data:`CODEX_ACP_VERSION`, installed by ``.ci/run``)
against the fake model, offline.

Covers: a command the model asks to run outside codex's sandbox, whose permission goes
through the host with the adapter's own options and, granted, runs in the workspace; the
adapter reports no token usage, so none is reported (never zeros); an interrupt
mid-answer. Every message the client wrote is checked against the published schema.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.base import TurnStatus
from symphony_tui.domain import ApprovalKind, EventKind
from symphony_tui.domain.payloads import CommandEnded
from symphony_tui_testing.codex_env import make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue
from tests.real_programs import missing

from .conftest import acp_settings
from .schema import validate_sent

pytestmark = pytest.mark.real_acp

CODEX_ACP_VERSION = "0.16.0"
CACHED = (
    Path(pwd.getpwuid(os.getuid()).pw_dir)
    / ".cache/symphony-tui"
    / f"codex-acp-{CODEX_ACP_VERSION}"
    / "node_modules/.bin/codex-acp"
)


def require_codex_acp() -> Path:
    env = os.environ.get("SYMPHONY_CODEX_ACP_BIN")
    for candidate in (Path(env) if env else None, CACHED):
        if candidate is not None and candidate.is_file():
            return candidate
    missing(f"codex-acp {CODEX_ACP_VERSION}", "set SYMPHONY_CODEX_ACP_BIN")


@pytest.fixture(scope="module")
def codex_acp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    binary = require_codex_acp()
    with FakeModelServer(slow_delay=0.05) as model:
        env = make_codex_home(tmp_path_factory.mktemp("codex-acp-home"), model.url)
        yield {"command": str(binary), "env": env}


def start(tmp: Path, codex_acp: dict[str, Any], **kw: Any):
    sent: list[dict[str, Any]] = []
    settings = acp_settings(command=codex_acp["command"])
    backend = AcpBackend(lambda: settings, env=codex_acp["env"], sent=sent)
    ws = tmp / "ws" / "CXA-1"
    ws.mkdir(parents=True, exist_ok=True)
    return backend, RecordingSessionHost(ws, issue=make_issue("CXA-1"), **kw), sent


async def test_an_escalated_command_is_asked_granted_and_run(tmp_path, codex_acp):
    backend, host, sent = start(tmp_path, codex_acp)
    session = await backend.start_session(host)
    try:
        result = await session.run_turn("SHELL: echo hi > made.txt\nESCALATE")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert (host.workspace / "made.txt").read_text() == "hi\n"
    (request,) = host.approvals
    assert request.kind == ApprovalKind.COMMAND and "echo hi > made.txt" in (request.command or "")
    assert request.questions[0].options  # the adapter's own options
    ended = host.of_kind(EventKind.COMMAND_COMPLETED)[-1].payload
    assert isinstance(ended, CommandEnded) and ended.exit_code == 0
    assert host.of_kind(EventKind.MESSAGE)
    # codex-acp answers prompts without usage: the run's usage stays not reported
    assert host.of_kind(EventKind.TOKEN_USAGE) == []
    assert validate_sent(sent) >= 4


async def test_an_interrupt_mid_answer_ends_the_turn_interrupted(tmp_path, codex_acp):
    backend, host, sent = start(tmp_path, codex_acp)
    session = await backend.start_session(host)
    try:
        turn = asyncio.create_task(session.run_turn("SLOW400 please"))
        await host.wait_for(EventKind.MESSAGE_DELTA, timeout=60)
        await session.interrupt()
        result = await turn
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED, result
    assert [m.get("method") for m in sent].count("session/cancel") == 1
