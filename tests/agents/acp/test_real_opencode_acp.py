"""The ACP backend driving the real ``opencode acp`` (1.18.33) against the fake model.

Covers: a turn whose shell command asks permission (granted through the host) and runs;
an edit whose permission names the file and whose write goes through this client's
``fs/write_text_file`` inside the workspace, reported with its diff; a permission
rejected; an interrupt mid-answer; a restart that loads the recorded session; usage
summed over the turns' reports; and every message the client wrote checked against the
protocol's published schema.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.base import TurnStatus
from symphony_tui.domain import ApprovalDecision, ApprovalKind, EventKind
from symphony_tui.domain.payloads import CommandEnded, FileChange, SessionStarted
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import opencode_env
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue
from tests.real_programs import require_opencode

from .conftest import acp_settings
from .schema import validate_sent

pytestmark = pytest.mark.real_opencode


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(slow_delay=0.05) as fm:
        yield fm


@pytest.fixture(scope="module")
def oc_acp(model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    binary = require_opencode()
    env = opencode_env(tmp_path_factory.mktemp("oc-acp-cfg"), model.url)
    return {"command": f"{binary} acp", "env": env}


class Run:
    def __init__(self, tmp: Path, oc_acp: dict[str, Any]) -> None:
        self.sent: list[dict[str, Any]] = []
        settings = acp_settings(command=oc_acp["command"])
        self.backend = AcpBackend(lambda: settings, env=oc_acp["env"], sent=self.sent)
        self.tmp = tmp

    def host(self, identifier: str = "OCA-1", **kw: Any) -> RecordingSessionHost:
        ws = self.tmp / "ws" / identifier
        ws.mkdir(parents=True, exist_ok=True)
        return RecordingSessionHost(ws, issue=make_issue(identifier), **kw)


async def test_a_command_and_an_edit_asked_granted_and_reported(tmp_path, oc_acp):
    run = Run(tmp_path, oc_acp)
    host = run.host()
    (host.workspace / "a.txt").write_text("hello\n")
    session = await run.backend.start_session(host)
    try:
        shell = await session.run_turn("SHELL: echo hi > made.txt")
        edit_args = {"filePath": "a.txt", "oldString": "hello", "newString": "goodbye"}
        edit = await session.run_turn(f"TOOL: edit {json.dumps(edit_args)}")
    finally:
        await run.backend.aclose()
    assert shell.status == TurnStatus.COMPLETED, shell
    assert edit.status == TurnStatus.COMPLETED, edit
    assert (host.workspace / "made.txt").read_text() == "hi\n"
    # opencode wrote the edit through this client's fs/write_text_file
    assert (host.workspace / "a.txt").read_text() == "goodbye\n"
    kinds = [a.kind for a in host.approvals]
    assert kinds == [ApprovalKind.COMMAND, ApprovalKind.FILE_CHANGE]
    assert host.approvals[0].command == "echo hi > made.txt"
    assert host.approvals[1].files == (str(host.workspace / "a.txt"),)
    assert [o.label for o in host.approvals[0].questions[0].options] == [
        "Allow once",
        "Always allow",
        "Reject",
    ]
    ended = host.of_kind(EventKind.COMMAND_COMPLETED)[0].payload
    assert isinstance(ended, CommandEnded)
    assert ended.command == "echo hi > made.txt" and ended.exit_code == 0
    change = host.of_kind(EventKind.FILE_CHANGE)[-1].payload
    assert isinstance(change, FileChange) and change.status == "completed"
    diff = "".join(c.diff or "" for c in change.changes)
    assert "-hello" in diff and "+goodbye" in diff
    assert "fs/write_text_file" not in {e.message for e in host.of_kind(EventKind.WARNING)}
    # each prompt answer's usage is that turn's; the events carry the session's totals
    reports = [e.payload for e in host.of_kind(EventKind.TOKEN_USAGE)]
    assert len(reports) == 2
    turns = reports[0].last + reports[1].last
    assert reports[-1].usage == turns and turns.total_tokens > 0
    assert validate_sent(run.sent) >= 6


async def test_a_rejected_command_does_not_run(tmp_path, oc_acp):
    run = Run(tmp_path, oc_acp)
    host = run.host(approve=ApprovalDecision.DECLINE)
    session = await run.backend.start_session(host)
    try:
        result = await session.run_turn("SHELL: echo no > nope.txt")
    finally:
        await run.backend.aclose()
    assert result.status in (TurnStatus.COMPLETED, TurnStatus.FAILED), result
    assert not (host.workspace / "nope.txt").exists()
    assert len(host.approvals) == 1
    picked = [m["result"] for m in run.sent if "result" in m and "outcome" in m["result"]]
    assert picked == [{"outcome": {"outcome": "selected", "optionId": "reject"}}]


async def test_an_interrupt_mid_answer_ends_the_turn_interrupted(tmp_path, oc_acp):
    run = Run(tmp_path, oc_acp)
    host = run.host()
    session = await run.backend.start_session(host)
    try:
        turn = asyncio.create_task(session.run_turn("SLOW400 please"))
        await host.wait_for(EventKind.MESSAGE_DELTA, timeout=60)
        await session.interrupt()
        result = await turn
        after = await session.run_turn("still there?")
    finally:
        await run.backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED, result
    assert after.status == TurnStatus.COMPLETED, after
    assert [m.get("method") for m in run.sent].count("session/cancel") == 1


async def test_a_restart_loads_the_recorded_session(tmp_path, oc_acp):
    first = Run(tmp_path, oc_acp)
    host = first.host()
    session = await first.backend.start_session(host)
    await session.run_turn("remember the word heron")
    previous = session.session_id
    await first.backend.aclose()

    second = Run(tmp_path, oc_acp)
    host2 = second.host(resume=host.recorded)
    session2 = await second.backend.start_session(host2)
    try:
        result = await session2.run_turn("and now?")
    finally:
        await second.backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert session2.session_id == previous
    started = host2.of_kind(EventKind.SESSION_STARTED)[0].payload
    assert isinstance(started, SessionStarted) and started.resumed
    assert [e.message for e in host2.of_kind(EventKind.MESSAGE)] == [
        "Hello from the fake model. You said: and now?"
    ]
    assert "session/load" in [m.get("method") for m in second.sent]
    assert os.path.isdir(host2.workspace)
