"""The codex backend against the real codex app-server (0.171.0) and the fake model server.

Skips only when codex is missing and ``CI`` is unset. Every message the backend
sends is validated against the schema the same binary generates.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.codex import CodexBackend, CodexSession
from symphony_tui.agents.codex.process import group_members
from symphony_tui.config.settings import Settings
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    EventKind,
    TokenUsage,
)
from symphony_tui.domain.payloads import NoteDelivered
from symphony_tui_testing.codex_env import (
    CodexSchema,
    generate_schema,
    make_codex_home,
)
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.session_host import RecordingSessionHost
from tests.real_programs import require_codex

pytestmark = pytest.mark.real_codex


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return require_codex()


@pytest.fixture(scope="session")
def codex_schema(codex_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> CodexSchema:
    return CodexSchema(generate_schema(codex_bin, tmp_path_factory.mktemp("codex-schema")))


@pytest.fixture
def fake() -> FakeModelServer:
    with FakeModelServer(slow_delay=0.05) as srv:
        yield srv


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspaces" / "TEST-1"
    ws.mkdir(parents=True)
    return ws


@pytest.fixture
def sent(codex_schema: CodexSchema) -> list[dict]:
    messages: list[dict] = []
    yield messages
    assert codex_schema.validate_all(messages) > 0


@pytest.fixture
async def backend(codex_bin, fake, tmp_path, sent):
    env = _env(tmp_path, fake)
    settings = Settings.model_validate(
        {"codex": {"command": f"'{codex_bin}' app-server", "read_timeout_ms": 20_000}}
    )
    b = CodexBackend(lambda: settings, env=env, sent=sent)
    yield b
    await b.aclose()


def _env(tmp_path: Path, fake: FakeModelServer) -> dict[str, str]:
    # A private HOME: `bash -lc` then skips the machine's login profile (pyenv rehash takes
    # a global lock that a killed shell can leave behind, stalling every later login shell).
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**make_codex_home(tmp_path / "codex-home", fake.url), "HOME": str(home)}


def _usage(host: RecordingSessionHost) -> TokenUsage:
    return host.of_kind(EventKind.TOKEN_USAGE)[-1].payload.usage


async def test_text_turn_reports_the_fake_models_token_totals(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    result = await session.run_turn("hello there")

    assert result.status == TurnStatus.COMPLETED
    assert host.recorded == {"thread_id": session.thread_id, "backend": "codex"}
    assert session.session_id == f"{session.thread_id}-{result.turn_id}"
    messages = host.of_kind(EventKind.MESSAGE)
    assert "Hello from the fake model. You said: hello there" in messages[-1].message
    assert host.of_kind(EventKind.MESSAGE_DELTA)
    assert _usage(host) == fake.usage_total
    assert _usage(host).cached_input_tokens > 0
    assert host.kinds()[-1] == EventKind.TURN_COMPLETED
    assert host.of_kind(EventKind.RATE_LIMITS)[-1].payload.rate_limits.source == "codex"


async def test_escalated_command_accepted_runs(backend, fake, workspace):
    host = RecordingSessionHost(workspace, approve=ApprovalDecision.ACCEPT)
    session = await backend.start_session(host)
    result = await session.run_turn("ESCALATE SHELL: echo approved > out.txt")

    assert result.status == TurnStatus.COMPLETED
    (req,) = host.approvals
    assert req.kind == ApprovalKind.COMMAND
    assert req.id.startswith(f"{host.issue.id}:")
    assert "echo approved > out.txt" in (req.command or "")
    assert req.reason and "outside the sandbox" in req.reason
    done = host.of_kind(EventKind.COMMAND_COMPLETED)[-1]
    assert done.payload.exit_code == 0 and done.payload.status == "completed"
    assert (workspace / "out.txt").read_text().strip() == "approved"
    assert _usage(host) == fake.usage_total


async def test_escalated_command_declined_turn_goes_on(backend, fake, workspace):
    host = RecordingSessionHost(workspace, approve=ApprovalDecision.DECLINE)
    session = await backend.start_session(host)
    result = await session.run_turn("ESCALATE SHELL: echo nope > out.txt")

    assert result.status == TurnStatus.COMPLETED
    assert len(host.approvals) == 1
    done = host.of_kind(EventKind.COMMAND_COMPLETED)[-1]
    assert done.payload.status == "declined"
    assert not (workspace / "out.txt").exists()
    assert fake.decisions() == ["shell", "text"]  # the model saw the refusal and answered


async def test_decline_with_a_message_reaches_the_model(backend, fake, workspace):
    # codex's approval answer has no message field: the session steers the running turn.
    answer = ApprovalAnswer(
        decision=ApprovalDecision.DECLINE, message="use the staging bucket instead", by="operator"
    )
    host = RecordingSessionHost(workspace, approve=answer)
    session = await backend.start_session(host)
    result = await session.run_turn("ESCALATE SHELL: echo nope > out.txt")

    assert result.status == TurnStatus.COMPLETED
    assert not (workspace / "out.txt").exists()
    # The model's next request carried the operator's words as user input.
    later = [json.dumps(r["body"]) for r in fake.requests[1:]]
    assert any("use the staging bucket instead" in body for body in later)
    (note,) = [
        e for e in host.of_kind(EventKind.NOTIFICATION) if isinstance(e.payload, NoteDelivered)
    ]
    assert "use the staging bucket instead" in note.message
    assert not [w for w in host.of_kind(EventKind.WARNING) if "not delivered" in w.message]


async def test_dynamic_tool_call_reaches_the_host(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    result = await session.run_turn('TOOL: symphony_set_issue_state {"state": "Done"}')

    assert result.status == TurnStatus.COMPLETED
    assert host.tool_calls == [("symphony_set_issue_state", {"state": "Done"})]
    assert host.state_changes == ["Done"]
    call = [e for e in host.of_kind(EventKind.TOOL_CALL) if e.payload.status == "completed"]
    assert call and call[-1].payload.success is True
    assert "moved to Done" in host.of_kind(EventKind.MESSAGE)[-1].message


async def test_interrupt_during_a_slow_answer(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    task = asyncio.create_task(session.run_turn("SLOW200"))
    await host.wait_for(EventKind.MESSAGE_DELTA)
    started = time.monotonic()
    await session.interrupt()
    result = await asyncio.wait_for(task, 10)
    elapsed = time.monotonic() - started

    assert result.status == TurnStatus.INTERRUPTED
    assert elapsed < 2.0, f"interrupt took {elapsed:.2f}s"
    assert host.kinds()[-1] == EventKind.TURN_CANCELLED
    # the streaming message was left open by codex: it is closed for the UI
    closed = [e for e in host.of_kind(EventKind.MESSAGE) if getattr(e.payload, "synthetic", None)]
    assert closed and closed[-1].payload.status == "interrupted"
    await session.interrupt()  # idempotent once the turn is over
    # the session stays usable
    again = await session.run_turn("after the interrupt")
    assert again.status == TurnStatus.COMPLETED


async def test_continuation_turn_on_the_same_thread(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    first = await session.run_turn("first")
    second = await session.run_turn("second", continuation=True)

    assert first.status == second.status == TurnStatus.COMPLETED
    assert first.turn_id != second.turn_id
    started = host.of_kind(EventKind.TURN_STARTED)
    assert [e.payload.continuation for e in started] == [False, True]
    assert {e.payload.thread_id for e in started} == {session.thread_id}
    # the second request carried the first exchange as history
    assert len(fake.requests[1]["body"]["input"]) > len(fake.requests[0]["body"]["input"])
    assert _usage(host) == fake.usage_total


async def test_resume_after_the_process_is_gone(backend, fake, workspace):
    host1 = RecordingSessionHost(workspace)
    s1 = await backend.start_session(host1)
    assert (await s1.run_turn("remember me")).status == TurnStatus.COMPLETED
    pid = s1.pid
    await s1.close()
    assert group_members(pid) == []

    host2 = RecordingSessionHost(workspace, resume=dict(host1.recorded))
    s2: CodexSession = await backend.start_session(host2)
    assert s2.thread_id == s1.thread_id
    assert host2.of_kind(EventKind.SESSION_STARTED)[0].payload.resumed is True
    assert (await s2.run_turn("and now?")).status == TurnStatus.COMPLETED
    history = fake.requests[-1]["body"]["input"]
    assert any("remember me" in str(item) for item in history)
    assert _usage(host2) == fake.usage_total  # thread totals survive the restart
    # the dynamic tool advertised at thread/start is still there after thread/resume
    tool_turn = await s2.run_turn('TOOL: symphony_set_issue_state {"state": "Done"}')
    assert tool_turn.status == TurnStatus.COMPLETED
    assert host2.state_changes == ["Done"]


async def test_unknown_thread_falls_back_to_a_new_thread(backend, fake, workspace):
    host = RecordingSessionHost(
        workspace, resume={"thread_id": "00000000-0000-0000-0000-000000000000"}
    )
    session = await backend.start_session(host)
    assert session.thread_id != "00000000-0000-0000-0000-000000000000"
    warnings = [e.message for e in host.of_kind(EventKind.WARNING)]
    assert any(w.startswith("cannot resume thread") for w in warnings), warnings
    assert (await session.run_turn("hi")).status == TurnStatus.COMPLETED


async def test_model_error_fails_the_turn_with_its_reason(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    fake.fail_next(status=400)
    result = await session.run_turn("this one fails")

    assert result.status == TurnStatus.FAILED
    assert "fake failure 400" in (result.error or "")
    assert host.kinds()[-1] == EventKind.TURN_FAILED
    # the session is still usable after a failed turn
    assert (await session.run_turn("and again")).status == TurnStatus.COMPLETED


async def test_model_server_down_ends_by_turn_timeout(codex_bin, fake, tmp_path, workspace, sent):
    settings = Settings.model_validate(
        {
            "codex": {
                "command": f"'{codex_bin}' app-server",
                "read_timeout_ms": 20_000,
                "turn_timeout_ms": 3_000,
            }
        }
    )
    backend = CodexBackend(lambda: settings, env=_env(tmp_path, fake), sent=sent)
    host = RecordingSessionHost(workspace)
    try:
        session = await backend.start_session(host)
        fake.stop()  # the port now refuses: codex retries forever ("Reconnecting...")
        result = await session.run_turn("anyone there?")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.FAILED and "turn_timeout" in (result.error or "")
    assert any(getattr(e.payload, "will_retry", None) for e in host.of_kind(EventKind.ERROR))
    assert host.kinds()[-1] == EventKind.TURN_FAILED


async def test_close_kills_the_whole_process_group(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    pid = session.pid
    assert pid in group_members(pid)
    await session.close()
    assert group_members(pid) == []


async def test_interrupt_while_an_approval_is_pending(backend, fake, workspace):
    asked = asyncio.Event()
    withdrawn = asyncio.Event()

    async def never_answer(request):
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            withdrawn.set()
            raise

    host = RecordingSessionHost(workspace, approve=never_answer)
    session = await backend.start_session(host)
    task = asyncio.create_task(session.run_turn("ESCALATE SHELL: echo never > out.txt"))
    await asyncio.wait_for(asked.wait(), 30)
    await session.interrupt()
    result = await asyncio.wait_for(task, 10)

    assert result.status == TurnStatus.INTERRUPTED
    await asyncio.wait_for(withdrawn.wait(), 5)  # the host stopped waiting for an answer
    started = {e.payload.item_id for e in host.of_kind(EventKind.COMMAND_STARTED)}
    ended = {e.payload.item_id for e in host.of_kind(EventKind.COMMAND_COMPLETED)}
    assert started and started <= ended
    assert not (workspace / "out.txt").exists()
    assert (await session.run_turn("still there?")).status == TurnStatus.COMPLETED


async def test_accept_for_session_is_not_asked_again(backend, fake, workspace):
    host = RecordingSessionHost(workspace, approve=ApprovalDecision.ACCEPT_FOR_SESSION)
    session = await backend.start_session(host)
    for _ in range(2):
        result = await session.run_turn("ESCALATE SHELL: echo again >> out.txt")
        assert result.status == TurnStatus.COMPLETED
    assert len(host.approvals) == 1
    assert (workspace / "out.txt").read_text().split() == ["again", "again"]


async def test_steer_mid_turn_reaches_the_models_next_request(backend, fake, workspace):
    host = RecordingSessionHost(workspace)
    session = await backend.start_session(host)
    task = asyncio.create_task(session.run_turn("SLOW30"))
    await host.wait_for(EventKind.MESSAGE_DELTA)
    assert await session.steer("STEERED: please also update the changelog")
    result = await asyncio.wait_for(task, 30)

    assert result.status == TurnStatus.COMPLETED
    assert "STEERED" not in json.dumps(fake.requests[0]["body"])
    later = [json.dumps(r["body"]) for r in fake.requests[1:]]
    assert any("please also update the changelog" in body for body in later)
    # once the turn is over there is nothing to steer: the caller keeps it for the next turn
    assert await session.steer("after the turn") is False
