"""Codex protocol features against the scripted fake app-server: granted permission subsets,
plan collaboration mode on ``turn/start``, reasoning deltas and ``emittedAtMs`` stamps."""

from __future__ import annotations

from datetime import UTC, datetime

from symphony_tui.agents.codex.server_requests import granted_subset
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, ApprovalKind, EventKind
from symphony_tui_testing.session_host import RecordingSessionHost

from .conftest import HANDSHAKE, note, server_request, turn_completed, turn_start

WANTED = {
    "network": {"enabled": True},
    "fileSystem": {"write": ["/w/a", "/w/b"], "read": ["/etc/x"]},
}


def test_granted_subset_narrows_but_never_widens():
    chosen = {
        "network": {"enabled": True},
        "fileSystem": {"write": ["/w/b", "/elsewhere"], "read": []},
        "somethingElse": {"x": 1},
    }
    assert granted_subset(WANTED, chosen) == {
        "network": {"enabled": True},
        "fileSystem": {"write": ["/w/b"]},
    }
    assert granted_subset({"network": {"enabled": True}}, {"fileSystem": {"write": ["/"]}}) == {}
    assert granted_subset(WANTED, {"network": {"enabled": False}}) == {}


def _perm_request(rid: int) -> dict:
    return server_request(
        rid,
        "item/permissions/requestApproval",
        threadId="th-1",
        turnId="tu-1",
        itemId=f"p{rid}",
        cwd="/w",
        permissions=WANTED,
    )


async def test_permissions_granted_subset_and_scope(fake_codex, workspace):
    answers = iter(
        [
            ApprovalAnswer(
                decision=ApprovalDecision.ACCEPT, permissions={"network": {"enabled": True}}
            ),
            ApprovalAnswer(
                decision=ApprovalDecision.ACCEPT,
                permissions={"fileSystem": {"write": ["/w/a"]}},
                scope="session",
            ),
            ApprovalAnswer(decision=ApprovalDecision.ACCEPT_FOR_SESSION),
            ApprovalAnswer(decision=ApprovalDecision.DECLINE),
        ]
    )
    host = RecordingSessionHost(workspace, approve=lambda req: next(answers))
    steps = [*HANDSHAKE, turn_start()]
    for rid in (1, 2, 3, 4):
        steps += [_perm_request(rid), {"expect_response": rid}]
    run = fake_codex([*steps, turn_completed()])
    session = await run.backend.start_session(host)
    await session.run_turn("x")

    res = run.responses()
    assert res[1]["result"] == {"permissions": {"network": {"enabled": True}}, "scope": "turn"}
    assert res[2]["result"] == {
        "permissions": {"fileSystem": {"write": ["/w/a"]}},
        "scope": "session",
    }
    assert res[3]["result"] == {"permissions": WANTED, "scope": "session"}
    assert res[4]["result"] == {"permissions": {}, "scope": "turn"}
    assert {a.kind for a in host.approvals} == {ApprovalKind.PERMISSIONS}
    assert host.approvals[0].permissions == WANTED


async def test_plan_mode_is_sent_with_the_threads_model(fake_codex, workspace):
    handshake = [dict(s) for s in HANDSHAKE]
    handshake[-1] = {
        "expect": "thread/start",
        "result": {"thread": {"id": "th-1"}, "model": "thread-model"},
    }
    run = fake_codex([*handshake, turn_start(), turn_completed()], collaboration_mode="plan")
    session = await run.backend.start_session(RecordingSessionHost(workspace))
    await session.run_turn("plan it")
    turn = next(m for m in run.received() if m.get("method") == "turn/start")["params"]
    assert turn["collaborationMode"] == {
        "mode": "plan",
        "settings": {"model": "thread-model", "developer_instructions": None},
    }


async def test_no_collaboration_mode_unless_configured(fake_codex, workspace):
    run = fake_codex([*HANDSHAKE, turn_start(), turn_completed()])
    session = await run.backend.start_session(RecordingSessionHost(workspace))
    await session.run_turn("x")
    turn = next(m for m in run.received() if m.get("method") == "turn/start")["params"]
    assert "collaborationMode" not in turn


async def test_reasoning_deltas_and_emitted_at(fake_codex, host):
    stamp = 1_796_000_000_123
    steps = [
        *HANDSHAKE,
        turn_start(),
        {
            "send": {
                "method": "item/reasoning/summaryTextDelta",
                "params": {
                    "threadId": "th-1",
                    "turnId": "tu-1",
                    "itemId": "r1",
                    "summaryIndex": 0,
                    "delta": "thinking ",
                },
                "emittedAtMs": stamp,
            }
        },
        note(
            "item/reasoning/textDelta",
            threadId="th-1",
            turnId="tu-1",
            itemId="r1",
            contentIndex=0,
            delta="raw",
        ),
        {
            "send": {
                "method": "item/completed",
                "params": {
                    "threadId": "th-1",
                    "item": {"type": "reasoning", "id": "r1", "summary": ["thinking hard"]},
                },
                "emittedAtMs": "not a number",
            }
        },
        turn_completed(),
    ]
    run = fake_codex(steps)
    session = await run.backend.start_session(host)
    await session.run_turn("x")

    deltas = host.of_kind(EventKind.MESSAGE_DELTA)
    assert [(d.message, d.payload.reasoning, d.payload.summary) for d in deltas] == [
        ("thinking ", True, True),
        ("raw", True, False),
    ]
    assert deltas[0].at == datetime.fromtimestamp(stamp / 1000, tz=UTC)
    assert deltas[1].at is None  # no emittedAtMs: the scheduler stamps it on arrival
    (reasoning,) = host.of_kind(EventKind.REASONING)
    assert reasoning.message == "thinking hard" and reasoning.at is None


def _tokens(total: int, turn: str | None = None) -> dict:
    b = {"totalTokens": total, "inputTokens": total, "outputTokens": 0}
    return note(
        "thread/tokenUsage/updated",
        threadId="th-old",
        turnId=turn,
        tokenUsage={"total": b, "last": b},
    )


async def test_restored_totals_of_a_resumed_thread_are_a_baseline(fake_codex, workspace):
    # codex reports the restored totals BEFORE it answers thread/resume (seen with 0.171)
    run = fake_codex(
        [
            HANDSHAKE[0],
            HANDSHAKE[1],
            {"expect": "thread/resume", "no_reply": True},
            _tokens(500),
            {"send": {"id": 2, "result": {"thread": {"id": "th-old"}}}},
            turn_start(),
            _tokens(650, "tu-1"),
            note(
                "turn/completed",
                threadId="th-old",
                turn={"id": "tu-1", "status": "completed", "error": None},
            ),
        ]
    )
    host = RecordingSessionHost(workspace, resume={"thread_id": "th-old"})
    session = await run.backend.start_session(host)
    await session.run_turn("go on")

    kinds = host.kinds()
    assert kinds.index(EventKind.SESSION_STARTED) < kinds.index(EventKind.TOKEN_USAGE)
    restored, grown = host.of_kind(EventKind.TOKEN_USAGE)
    assert restored.payload.attached is True and restored.payload.usage.total_tokens == 500
    assert grown.payload.attached is False and grown.payload.usage.total_tokens == 650
