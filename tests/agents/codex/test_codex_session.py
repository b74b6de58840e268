"""CodexSession against the scripted fake app-server: framing, events, requests, failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.base import AgentError, ToolSpec, TurnStatus
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.agents.codex.process import group_members
from symphony_tui.config.settings import Settings
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, ApprovalKind, EventKind
from symphony_tui.domain.payloads import CommandEnded, NoteDelivered
from symphony_tui_testing.session_host import RecordingSessionHost

from .conftest import HANDSHAKE, note, server_request, turn_completed, turn_start

TEXT_TURN = [
    *HANDSHAKE,
    turn_start(),
    note("turn/started", threadId="th-1", turn={"id": "tu-1", "status": "inProgress"}),
    note("item/started", threadId="th-1", item={"type": "agentMessage", "id": "m1", "text": ""}),
    note("item/agentMessage/delta", threadId="th-1", itemId="m1", delta="Hel"),
    note("item/agentMessage/delta", threadId="th-1", itemId="m1", delta="lo"),
    note(
        "item/completed",
        threadId="th-1",
        item={"type": "agentMessage", "id": "m1", "text": "Hello"},
    ),
    note(
        "thread/tokenUsage/updated",
        threadId="th-1",
        turnId="tu-1",
        tokenUsage={
            "total": {
                "totalTokens": 150,
                "inputTokens": 130,
                "cachedInputTokens": 20,
                "outputTokens": 20,
                "reasoningOutputTokens": 5,
            },
            "last": {
                "totalTokens": 50,
                "inputTokens": 40,
                "cachedInputTokens": 0,
                "outputTokens": 10,
                "reasoningOutputTokens": 0,
            },
            "modelContextWindow": 1000,
        },
    ),
    note(
        "account/rateLimits/updated",
        rateLimits={
            "limitId": "codex",
            "primary": {"usedPercent": 12.5, "windowDurationMins": 300, "resetsAt": 1800000000},
            "credits": {"hasCredits": True, "unlimited": False, "balance": "9.5"},
            "planType": "pro",
        },
    ),
    turn_completed(),
]


async def test_text_turn_events_and_handshake(fake_codex, host):
    run = fake_codex(TEXT_TURN)
    session = await run.backend.start_session(host)
    assert session.thread_id == "th-1"
    assert host.recorded == {"thread_id": "th-1", "backend": "codex"}
    result = await session.run_turn("hi")

    assert result.status == TurnStatus.COMPLETED and result.turn_id == "tu-1"
    assert session.session_id == "th-1-tu-1"
    kinds = host.kinds()
    assert kinds[0] == EventKind.SESSION_STARTED
    assert kinds.count(EventKind.TURN_STARTED) == 1
    assert [e.message for e in host.of_kind(EventKind.MESSAGE_DELTA)] == ["Hel", "lo"]
    assert host.of_kind(EventKind.MESSAGE)[0].message == "Hello"
    usage = host.of_kind(EventKind.TOKEN_USAGE)[0].payload
    assert usage.usage.model_dump() == {
        "input_tokens": 130,
        "cached_input_tokens": 20,
        "output_tokens": 20,
        "reasoning_tokens": 5,
        "total_tokens": 150,
        "cost_usd": None,
    }
    assert usage.last.total_tokens == 50
    limits = host.of_kind(EventKind.RATE_LIMITS)[0].payload.rate_limits.model_dump(mode="json")
    assert limits["primary"]["used_percent"] == 12.5
    assert limits["primary"]["window_minutes"] == 300
    assert limits["credits_balance"] == "9.5" and limits["plan_type"] == "pro"
    assert limits["raw"]["limitId"] == "codex"
    assert kinds[-1] == EventKind.TURN_COMPLETED
    assert all(
        e.session_id == "th-1-tu-1" for e in host.events[kinds.index(EventKind.TURN_STARTED) :]
    )

    got = run.received()
    init = got[0]
    assert init["method"] == "initialize" and "jsonrpc" not in init
    assert init["params"]["clientInfo"]["name"] == "symphony-tui"
    assert init["params"]["capabilities"] == {"experimentalApi": True}
    start = next(m for m in got if m.get("method") == "thread/start")["params"]
    assert start["approvalPolicy"] == "on-request" and start["sandbox"] == "workspace-write"
    assert start["cwd"] == str(host.workspace)
    assert start["dynamicTools"][0]["name"] == "symphony_set_issue_state"
    assert start["dynamicTools"][0]["inputSchema"]["required"] == ["state"]
    turn = next(m for m in got if m.get("method") == "turn/start")["params"]
    assert turn["threadId"] == "th-1" and turn["input"] == [{"type": "text", "text": "hi"}]


async def test_a_usage_report_without_a_total_counts_input_plus_output(fake_codex, host):
    usage_without_total = note(
        "thread/tokenUsage/updated",
        threadId="th-1",
        turnId="tu-1",
        tokenUsage={
            "total": {"inputTokens": 130, "cachedInputTokens": 20, "outputTokens": 20},
            "last": {"inputTokens": 40, "outputTokens": 10},
        },
    )
    run = fake_codex([*HANDSHAKE, turn_start(), usage_without_total, turn_completed()])
    session = await run.backend.start_session(host)
    await session.run_turn("hi")
    report = host.of_kind(EventKind.TOKEN_USAGE)[0].payload
    assert report.usage.total_tokens == 150 and report.last.total_tokens == 50
    assert report.usage.input_tokens == 130 and report.usage.output_tokens == 20


async def test_settings_pass_through(fake_codex, workspace):
    policy = {"type": "workspaceWrite", "networkAccess": False}
    run = fake_codex(
        [*HANDSHAKE, turn_start(), turn_completed()],
        approval_policy="never",
        thread_sandbox="danger-full-access",
        turn_sandbox_policy=policy,
        model="m-1",
    )
    host = RecordingSessionHost(workspace, tools=())
    session = await run.backend.start_session(host)
    await session.run_turn("x")
    got = run.received()
    start = next(m for m in got if m.get("method") == "thread/start")["params"]
    assert start["approvalPolicy"] == "never" and start["sandbox"] == "danger-full-access"
    assert start["model"] == "m-1" and "dynamicTools" not in start
    turn = next(m for m in got if m.get("method") == "turn/start")["params"]
    assert turn["sandboxPolicy"] == policy and turn["model"] == "m-1"


async def test_partial_lines_are_buffered(fake_codex, host):
    line = json.dumps(
        {"method": "item/agentMessage/delta", "params": {"itemId": "m", "delta": "ab"}}
    )
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            {"raw": line[:10]},
            {"sleep": 0.2},
            {"raw": line[10:] + "\n"},
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    assert [e.message for e in host.of_kind(EventKind.MESSAGE_DELTA)] == ["ab"]
    assert not host.of_kind(EventKind.MALFORMED)


async def test_malformed_json_is_reported_and_skipped(fake_codex, host):
    run = fake_codex(
        [*HANDSHAKE, turn_start(), {"raw": "{not json\n"}, {"raw": "[1, 2]\n"}, turn_completed()]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    bad = host.of_kind(EventKind.MALFORMED)
    assert len(bad) == 2
    assert "invalid JSON" in bad[0].message and "not a JSON object" in bad[1].message


async def test_line_over_10_mb_is_skipped_once(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            {"big_line": 11 * 1024 * 1024},
            note("item/agentMessage/delta", itemId="m", delta="after"),
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    (bad,) = host.of_kind(EventKind.MALFORMED)
    assert "longer than" in bad.message
    assert [e.message for e in host.of_kind(EventKind.MESSAGE_DELTA)] == ["after"]


async def test_line_just_under_the_limit_is_accepted(fake_codex, host):
    delta = "y" * (9 * 1024 * 1024)
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("item/commandExecution/outputDelta", itemId="c", delta=delta),
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    (out,) = host.of_kind(EventKind.COMMAND_OUTPUT)
    assert len(out.message) < 70 * 1024 and "truncated" in out.message  # capped per event
    assert not host.of_kind(EventKind.MALFORMED)


async def test_unknown_server_request_gets_method_not_found(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            server_request(7, "something/new", x=1),
            {"expect_response": 7},
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    assert run.responses()[7]["error"]["code"] == -32601


async def test_process_exit_mid_turn_raises_with_reason(fake_codex, host):
    run = fake_codex([*HANDSHAKE, turn_start(), {"stderr": "panic: model exploded"}, {"exit": 3}])
    session = await run.backend.start_session(host)
    with pytest.raises(AgentError) as err:
        await session.run_turn("x")
    assert err.value.code == "process_exited"
    assert "code 3" in err.value.message and "model exploded" in err.value.message
    assert host.kinds()[-1] == EventKind.TURN_FAILED
    with pytest.raises(AgentError):
        await session.run_turn("again")


async def test_read_timeout_on_a_silent_server(fake_codex, host):
    run = fake_codex([*HANDSHAKE, {"expect": "turn/start", "no_reply": True}], read_timeout_ms=1500)
    session = await run.backend.start_session(host)
    with pytest.raises(AgentError) as err:
        await session.run_turn("x")
    assert err.value.code == "read_timeout" and "turn/start" in err.value.message


async def test_launch_failure_is_one_line_with_stderr(host, tmp_path):
    settings = Settings.model_validate(
        {"codex": {"command": "definitely-not-a-codex-binary-xyz app-server"}}
    )
    backend = CodexBackend(lambda: settings, env={"HOME": str(tmp_path)})
    with pytest.raises(AgentError) as err:
        await backend.start_session(host)
    assert err.value.code == "launch_failed"
    assert "not found" in err.value.message and "\n" not in err.value.message
    await backend.aclose()


async def test_launch_failure_when_the_first_write_breaks_names_the_exit(
    host, tmp_path, monkeypatch
):
    # The child closes stdin before the first request is written, so that write fails with a
    # broken pipe while stdout is still open: the error must still carry the exit code and
    # stderr (a CI run once reported only "Connection lost").
    from symphony_tui.agents.codex import session as session_module

    real_launch = session_module.launch

    async def launch_then_wait(*args, **kwargs):
        proc = await real_launch(*args, **kwargs)
        await asyncio.sleep(1.0)  # the child has closed stdin by now
        return proc

    monkeypatch.setattr(session_module, "launch", launch_then_wait)
    settings = Settings.model_validate(
        {"codex": {"command": "exec 0<&-; echo 'no such model config' >&2; sleep 1.5; exit 7"}}
    )
    backend = CodexBackend(lambda: settings, env={"HOME": str(tmp_path)})
    with pytest.raises(AgentError) as err:
        await backend.start_session(host)
    assert err.value.code == "launch_failed"
    assert "code 7" in err.value.message and "no such model config" in err.value.message
    await backend.aclose()


async def test_close_kills_the_process_group_with_grandchildren(fake_codex, host, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    run = fake_codex([*HANDSHAKE, {"spawn": "sleep 300", "pid_file": str(pid_file)}])
    session = await run.backend.start_session(host)
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    grandchild = int(pid_file.read_text())
    assert grandchild in group_members(session.pid)
    await session.close()
    assert group_members(session.pid) == []
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild)
    await session.close()  # idempotent


async def test_close_sigkills_a_grandchild_that_ignores_sigterm(fake_codex, host, tmp_path):
    pid_file = tmp_path / "stubborn.pid"
    run = fake_codex(
        [*HANDSHAKE, {"spawn": "trap '' TERM; exec sleep 300", "pid_file": str(pid_file)}]
    )
    session = await run.backend.start_session(host)
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    assert int(pid_file.read_text()) in group_members(session.pid)
    await session.close()
    assert group_members(session.pid) == []


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]


async def test_command_approval_declined(fake_codex, workspace):
    host = RecordingSessionHost(workspace, approve=ApprovalDecision.DECLINE)
    item = {"type": "commandExecution", "id": "c1", "command": "rm -rf /", "status": "inProgress"}
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("item/started", threadId="th-1", item=item),
            server_request(
                0,
                "item/commandExecution/requestApproval",
                threadId="th-1",
                turnId="tu-1",
                itemId="c1",
                command="rm -rf /",
                cwd="/w",
                reason="needs root",
                availableDecisions=["cancel", {"acceptWithExecpolicyAmendment": {}}, "decline"],
            ),
            {"expect_response": 0},
            note("serverRequest/resolved", threadId="th-1", requestId=0),
            note("item/completed", threadId="th-1", item={**item, "status": "declined"}),
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    (req,) = host.approvals
    assert req.kind == ApprovalKind.COMMAND and req.id == f"{host.issue.id}:0"
    assert req.command == "rm -rf /" and req.cwd == "/w" and req.reason == "needs root"
    # the server's hint first, then the rest: codex honours all four decisions
    assert req.available == (
        ApprovalDecision.CANCEL,
        ApprovalDecision.DECLINE,
        ApprovalDecision.ACCEPT,
        ApprovalDecision.ACCEPT_FOR_SESSION,
    )
    assert req.details["availableDecisions"][1] == {"acceptWithExecpolicyAmendment": {}}
    assert run.responses()[0]["result"] == {"decision": "decline"}
    assert host.of_kind(EventKind.COMMAND_COMPLETED)[0].payload.status == "declined"


@pytest.mark.parametrize(
    ("decision", "wire"),
    [
        (ApprovalDecision.ACCEPT, "accept"),
        (ApprovalDecision.ACCEPT_FOR_SESSION, "acceptForSession"),
        (ApprovalDecision.CANCEL, "cancel"),
    ],
)
async def test_file_change_approval_carries_paths(fake_codex, workspace, decision, wire):
    host = RecordingSessionHost(workspace, approve=decision)
    item = {
        "type": "fileChange",
        "id": "f1",
        "status": "inProgress",
        "changes": [{"path": "a.py", "kind": {"type": "update"}, "diff": "@@ -1 +1 @@"}],
    }
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("item/started", threadId="th-1", item=item),
            server_request(
                4, "item/fileChange/requestApproval", threadId="th-1", turnId="tu-1", itemId="f1"
            ),
            {"expect_response": 4},
            note("item/completed", threadId="th-1", item={**item, "status": "completed"}),
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    await session.run_turn("x")
    (req,) = host.approvals
    assert req.kind == ApprovalKind.FILE_CHANGE and req.files == ("a.py",)
    assert run.responses()[4]["result"] == {"decision": wire}
    changes = host.of_kind(EventKind.FILE_CHANGE)
    assert changes[-1].payload.paths == ["a.py"] and changes[-1].payload.changes[0].diff


async def test_permissions_user_input_and_elicitation(fake_codex, workspace):
    def policy(req):
        if req.kind == ApprovalKind.USER_INPUT:
            return ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers={"q1": ("Yes",)})
        if req.kind == ApprovalKind.PERMISSIONS:
            return ApprovalAnswer(decision=ApprovalDecision.ACCEPT_FOR_SESSION)
        return ApprovalAnswer(decision=ApprovalDecision.DECLINE)

    host = RecordingSessionHost(workspace, approve=policy)
    perms = {"network": {"enabled": True}}
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            server_request(
                1,
                "item/permissions/requestApproval",
                threadId="th-1",
                turnId="tu-1",
                itemId="p",
                cwd="/w",
                permissions=perms,
            ),
            {"expect_response": 1},
            server_request(
                2,
                "item/tool/requestUserInput",
                threadId="th-1",
                turnId="tu-1",
                itemId="u",
                isBlocking=True,
                questions=[
                    {"id": "q1", "header": "H", "question": "Go?", "options": [{"label": "Yes"}]}
                ],
            ),
            {"expect_response": 2},
            server_request(
                3,
                "mcpServer/elicitation/request",
                serverName="srv",
                mode="form",
                message="Token?",
                requestedSchema={"type": "object", "properties": {}},
            ),
            {"expect_response": 3},
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    await session.run_turn("x")
    res = run.responses()
    assert res[1]["result"] == {"permissions": perms, "scope": "session"}
    assert res[2]["result"] == {"answers": {"q1": {"answers": ["Yes"]}}}
    assert res[3]["result"]["action"] == "decline"
    kinds = [a.kind for a in host.approvals]
    assert kinds == [ApprovalKind.PERMISSIONS, ApprovalKind.USER_INPUT, ApprovalKind.ELICITATION]
    assert host.approvals[1].questions[0].options[0].label == "Yes"


class _FailingHost(RecordingSessionHost):
    async def call_tool(self, name, arguments):
        raise RuntimeError("boom")

    async def request_approval(self, request):
        raise RuntimeError("host down")


async def test_tool_calls_never_stall(fake_codex, workspace):
    tools = [
        server_request(
            n, "item/tool/call", threadId="th-1", turnId="tu-1", callId=f"c{n}", tool=t, arguments=a
        )
        for n, t, a in [(1, "symphony_set_issue_state", {"state": "Done"}), (2, "nope", {})]
    ]
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            tools[0],
            {"expect_response": 1},
            tools[1],
            {"expect_response": 2},
            turn_completed(),
        ]
    )
    host = RecordingSessionHost(workspace)
    session = await run.backend.start_session(host)
    await session.run_turn("x")
    res = run.responses()
    assert res[1]["result"]["success"] is True and host.state_changes == ["Done"]
    assert res[1]["result"]["contentItems"][0]["type"] == "inputText"
    assert res[2]["result"]["success"] is False

    run2 = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            tools[0],
            {"expect_response": 1},
            server_request(
                5,
                "item/commandExecution/requestApproval",
                threadId="th-1",
                turnId="tu-1",
                itemId="c",
                command="ls",
            ),
            {"expect_response": 5},
            turn_completed(),
        ]
    )
    failing = _FailingHost(workspace)
    session2 = await run2.backend.start_session(failing)
    assert (await session2.run_turn("x")).status == TurnStatus.COMPLETED
    res2 = run2.responses()
    assert res2[1]["result"]["success"] is False
    assert "boom" in res2[1]["result"]["contentItems"][0]["text"]
    assert res2[5]["result"] == {"decision": "decline"}


async def test_interrupt_closes_open_items_and_pending_approval(fake_codex, workspace):
    cancelled = asyncio.Event()

    async def never(req):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    host = RecordingSessionHost(workspace, approve=never)
    cmd = {"type": "commandExecution", "id": "c1", "command": "sleep 99", "status": "inProgress"}
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("item/started", threadId="th-1", item=cmd),
            server_request(
                0,
                "item/commandExecution/requestApproval",
                threadId="th-1",
                turnId="tu-1",
                itemId="c1",
                command="sleep 99",
            ),
            {"expect": "turn/interrupt", "result": {}},
            turn_completed(status="interrupted"),
            note("serverRequest/resolved", threadId="th-1", requestId=0),
        ]
    )
    session = await run.backend.start_session(host)
    task = asyncio.create_task(session.run_turn("x"))
    await host.wait_for(EventKind.APPROVAL_REQUESTED, timeout=10)
    await asyncio.gather(session.interrupt(), session.interrupt())  # concurrent: one request
    result = await asyncio.wait_for(task, 10)

    assert result.status == TurnStatus.INTERRUPTED
    await asyncio.wait_for(cancelled.wait(), 5)
    closed = host.of_kind(EventKind.COMMAND_COMPLETED)
    assert closed and closed[-1].payload == CommandEnded(
        item_id="c1",
        item_type="commandExecution",
        status="interrupted",
        synthetic=True,
        command="sleep 99",
        exit_code=None,
    )
    interrupts = [m for m in run.received() if m.get("method") == "turn/interrupt"]
    assert len(interrupts) == 1
    assert interrupts[0]["params"] == {"threadId": "th-1", "turnId": "tu-1"}
    await session.interrupt()  # no turn: no-op


async def test_missing_turn_completed_falls_back_to_thread_read(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("thread/status/changed", threadId="th-1", status={"type": "idle"}),
            {
                "expect": "thread/read",
                "result": {
                    "thread": {"id": "th-1", "turns": [{"id": "tu-1", "status": "completed"}]}
                },
            },
        ]
    )
    session = await run.backend.start_session(host)
    result = await asyncio.wait_for(session.run_turn("x"), 10)
    assert result.status == TurnStatus.COMPLETED


async def test_failed_turn_reports_the_error(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note(
                "error",
                threadId="th-1",
                turnId="tu-1",
                willRetry=True,
                error={"message": "Reconnecting... 1/5"},
            ),
            turn_completed(status="failed", error={"message": "stream disconnected"}),
        ]
    )
    session = await run.backend.start_session(host)
    result = await session.run_turn("x")
    assert result.status == TurnStatus.FAILED and result.error == "stream disconnected"
    err = host.of_kind(EventKind.ERROR)[0]
    assert err.payload.will_retry is True and "Reconnecting" in err.message


async def test_turn_timeout_interrupts_and_fails(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            {"expect": "turn/interrupt", "result": {}},
            turn_completed(status="interrupted"),
        ],
        turn_timeout_ms=300,
    )
    session = await run.backend.start_session(host)
    result = await asyncio.wait_for(session.run_turn("x"), 10)
    assert result.status == TurnStatus.FAILED and "turn_timeout" in (result.error or "")
    assert host.kinds()[-1] == EventKind.TURN_FAILED
    assert any(m.get("method") == "turn/interrupt" for m in run.received())


async def test_turn_timeout_is_a_silence_interval_reset_by_every_output(fake_codex, host):
    # The turn streams for about 2 s, well past the 1.5 s setting, but never falls silent
    # for long: it must complete (§10.6), not be cut at 1.5 s.
    streaming = []
    for n in range(20):
        streaming += [
            {"sleep": 0.1},
            note("item/agentMessage/delta", threadId="th-1", itemId="m1", delta=f"{n} "),
        ]
    run = fake_codex([*HANDSHAKE, turn_start(), *streaming, turn_completed()], turn_timeout_ms=1500)
    session = await run.backend.start_session(host)
    result = await asyncio.wait_for(session.run_turn("x"), 30)
    assert result.status == TurnStatus.COMPLETED, result.error
    assert not any(m.get("method") == "turn/interrupt" for m in run.received())


async def test_resume_and_fallback(fake_codex, workspace):
    resumed = fake_codex(
        [
            HANDSHAKE[0],
            HANDSHAKE[1],
            {
                "expect": "thread/resume",
                "result": {"thread": {"id": "th-old"}, "model": "gpt-5.1-codex"},
            },
        ]
    )
    host = RecordingSessionHost(workspace, resume={"thread_id": "th-old"})
    session = await resumed.backend.start_session(host)
    assert session.thread_id == "th-old"
    started = host.of_kind(EventKind.SESSION_STARTED)[0].payload
    assert started.resumed is True
    assert started.model == "gpt-5.1-codex"  # the thread's model prices the run

    fallback = fake_codex(
        [
            HANDSHAKE[0],
            HANDSHAKE[1],
            {"expect": "thread/resume", "error": {"code": -32600, "message": "no rollout"}},
            HANDSHAKE[2],
        ]
    )
    host2 = RecordingSessionHost(
        workspace,
        resume={"thread_id": "gone"},
        tools=(ToolSpec("t", "d", {"type": "object"}),),
    )
    session2 = await fallback.backend.start_session(host2)
    assert session2.thread_id == "th-1" and host2.recorded["thread_id"] == "th-1"
    assert "no rollout" in host2.of_kind(EventKind.WARNING)[0].message


async def test_other_threads_are_ignored_and_escapes_pass_through(fake_codex, host):
    run = fake_codex(
        [
            *HANDSHAKE,
            turn_start(),
            note("item/agentMessage/delta", threadId="th-other", itemId="m", delta="sub-agent"),
            note(
                "item/agentMessage/delta",
                threadId="th-1",
                itemId="m",
                delta="\x1b[2J\x1b]0;t\x07ok",
            ),
            turn_completed(),
        ]
    )
    session = await run.backend.start_session(host)
    await session.run_turn("x")
    assert [e.message for e in host.of_kind(EventKind.MESSAGE_DELTA)] == ["\x1b[2J\x1b]0;t\x07ok"]


def _declined_command_script(steer: dict[str, Any] | None) -> list[dict[str, Any]]:
    item = {"type": "commandExecution", "id": "c1", "command": "make deploy", "status": "x"}
    return [
        *HANDSHAKE,
        turn_start(),
        note("item/started", threadId="th-1", item=item),
        server_request(
            0,
            "item/commandExecution/requestApproval",
            threadId="th-1",
            turnId="tu-1",
            itemId="c1",
            command="make deploy",
        ),
        *([steer] if steer else []),
        {"expect_response": 0},
        note("serverRequest/resolved", threadId="th-1", requestId=0),
        note("item/completed", threadId="th-1", item={**item, "status": "declined"}),
        turn_completed(),
    ]


async def test_operator_decline_message_is_steered_into_the_turn(fake_codex, workspace):
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message="not on a Friday")
    host = RecordingSessionHost(workspace, approve=answer)
    run = fake_codex(
        _declined_command_script({"expect": "turn/steer", "result": {"turnId": "tu-1"}})
    )
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    (steer,) = [m for m in run.received() if m.get("method") == "turn/steer"]
    assert steer["params"]["threadId"] == "th-1" and steer["params"]["expectedTurnId"] == "tu-1"
    (text,) = [i["text"] for i in steer["params"]["input"]]
    assert "declined" in text and "make deploy" in text and "not on a Friday" in text
    assert run.responses()[0]["result"] == {"decision": "decline"}  # answered after the steer
    await host.wait_for(lambda e: isinstance(e.payload, NoteDelivered))


async def test_a_rejected_steer_is_a_warning_not_a_failure(fake_codex, workspace):
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message="stop that")
    host = RecordingSessionHost(workspace, approve=answer)
    rejected = {"expect": "turn/steer", "error": {"code": -32600, "message": "no active turn"}}
    run = fake_codex(_declined_command_script(rejected))
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    warning = await host.wait_for(lambda e: e.kind == EventKind.WARNING)
    assert "not delivered" in warning.message and "no active turn" in warning.message


async def test_a_policy_decline_sends_no_steer(fake_codex, workspace):
    # only an operator's own words go to the model; a policy's reason is for the log
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message="deny mode", by="policy")
    host = RecordingSessionHost(workspace, approve=answer)
    run = fake_codex(_declined_command_script(None))
    session = await run.backend.start_session(host)
    assert (await session.run_turn("x")).status == TurnStatus.COMPLETED
    await session.close()
    assert not [m for m in run.received() if m.get("method") == "turn/steer"]


async def test_launch_is_bash_lc_of_the_command_in_the_workspace(fake_codex, host, tmp_path):
    # §10.1 / §17.5: `bash -lc <codex.command>` with the workspace as cwd. The command
    # records whether its shell is a login bash and where it runs, then becomes the fake.
    marker = tmp_path / "launched"
    probe = fake_codex([*HANDSHAKE])
    fake = probe.backend._settings().codex.command  # the fake app-server's own command line
    command = f"shopt -q login_shell && echo login > {marker} && pwd >> {marker} && exec {fake}"
    run = fake_codex([*HANDSHAKE], command=command)
    await run.backend.start_session(host)
    assert marker.read_text().splitlines() == ["login", str(host.workspace)]
