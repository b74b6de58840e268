"""The demo agent driven through the project's real codex backend (as the scheduler does)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.codex.backend import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, ApprovalRequest, EventKind
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

DEMO_COMMAND = '"$SYMPHONY_PYTHON" -m symphony_tui.demo.agent'


def _backend() -> CodexBackend:
    settings = Settings.model_validate(
        {"codex": {"command": DEMO_COMMAND, "read_timeout_ms": 10_000}}
    )
    env = {"SYMPHONY_PYTHON": sys.executable, "SYMPHONY_DEMO_SPEED": "0"}
    return CodexBackend(lambda: settings, env=env)


def _host(tmp_path: Path, identifier: str, **kw) -> RecordingSessionHost:
    ws = tmp_path / identifier
    ws.mkdir(exist_ok=True)
    return RecordingSessionHost(ws, issue=make_issue(identifier, "Todo"), **kw)


async def test_a_full_run_with_an_approval(tmp_path: Path) -> None:
    backend = _backend()
    host = _host(tmp_path, "DEMO-3")
    session = await backend.start_session(host)
    try:
        assert session.thread_id and host.recorded["thread_id"] == session.thread_id
        result = await session.run_turn("Cut a release [demo: approval]")
    finally:
        await backend.aclose()
    assert result.status is TurnStatus.COMPLETED, result
    assert host.state_changes == ["Done"]
    assert [a.kind.value for a in host.approvals] == ["command"]
    assert (host.workspace / "RELEASE-DEMO-3.txt").is_file()
    assert (host.workspace / "NOTES-DEMO-3.md").is_file()
    kinds = host.kinds()
    for kind in (
        EventKind.SESSION_STARTED,
        EventKind.TURN_STARTED,
        EventKind.MESSAGE,
        EventKind.COMMAND_COMPLETED,
        EventKind.FILE_CHANGE,
        EventKind.TOOL_CALL,
        EventKind.TOKEN_USAGE,
        EventKind.RATE_LIMITS,
        EventKind.TURN_COMPLETED,
    ):
        assert kind in kinds, kind
    totals = [e.payload.usage.total_tokens for e in host.of_kind(EventKind.TOKEN_USAGE)]
    assert totals == sorted(totals) and totals[-1] > 0
    # the model thread/start names, which prices the run
    assert host.of_kind(EventKind.SESSION_STARTED)[0].payload.model == "symphony-demo"


async def test_fail_once_then_two_turns_on_one_thread(tmp_path: Path) -> None:
    backend = _backend()
    try:
        host = _host(tmp_path, "DEMO-4")
        session = await backend.start_session(host)
        failed = await session.run_turn("Flaky [demo: fail-once, two-turns]")
        await session.close()
        assert failed.status is TurnStatus.FAILED and "fail-once" in (failed.error or "")

        retry = _host(tmp_path, "DEMO-4", attempt=1)
        session = await backend.start_session(retry)
        first = await session.run_turn("Flaky [demo: fail-once, two-turns]")
        assert first.status is TurnStatus.COMPLETED and retry.state_changes == []
        second = await session.run_turn("Continue the work.", continuation=True)
        assert second.status is TurnStatus.COMPLETED and retry.state_changes == ["Done"]
    finally:
        await backend.aclose()


async def test_interrupt_while_waiting_for_the_operator(tmp_path: Path) -> None:
    backend = _backend()
    asked = asyncio.Event()
    never = asyncio.Event()

    async def operator(request: ApprovalRequest):
        asked.set()
        await never.wait()

    host = _host(tmp_path, "DEMO-5", approve=operator)
    session = await backend.start_session(host)
    try:
        turn = asyncio.create_task(session.run_turn("[demo: approval]"))
        async with asyncio.timeout(20):
            await asked.wait()
        await session.interrupt()
        async with asyncio.timeout(20):
            result = await turn
    finally:
        await backend.aclose()
    assert result.status is TurnStatus.INTERRUPTED
    assert host.state_changes == []
    assert not (host.workspace / "RELEASE-DEMO-5.txt").exists()


async def test_declined_approval_and_resume_after_restart(tmp_path: Path) -> None:
    backend = _backend()
    try:
        host = _host(tmp_path, "DEMO-6", approve=ApprovalDecision.DECLINE)
        session = await backend.start_session(host)
        result = await session.run_turn("[demo: approval, two-turns]")
        await session.close()
        assert result.status is TurnStatus.COMPLETED
        assert not (host.workspace / "RELEASE-DEMO-6.txt").exists()

        again = _host(tmp_path, "DEMO-6", resume=dict(host.recorded))
        session = await backend.start_session(again)
        assert session.thread_id == host.recorded["thread_id"]
        result = await session.run_turn("Continue the work.", continuation=True)
        assert result.status is TurnStatus.COMPLETED
        assert again.state_changes == ["Done"]
    finally:
        await backend.aclose()


async def test_a_denial_note_reaches_the_demo_agent(tmp_path: Path) -> None:
    # The operator's message travels as `turn/steer`; the simulated agent acknowledges it.
    backend = _backend()
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message="ship it on Monday")
    host = _host(tmp_path, "DEMO-7", approve=answer)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("[demo: approval]")
        assert result.status is TurnStatus.COMPLETED
    finally:
        await backend.aclose()
    said = " ".join(e.message for e in host.of_kind(EventKind.MESSAGE))
    assert "declined" in said and "ship it on Monday" in said
    assert not [w for w in host.of_kind(EventKind.WARNING) if "not delivered" in w.message]
