"""The OpenCode backend against the real ``opencode serve`` 1.18.33 and the fake model.

Covers: a full run with token totals equal to the fake model's usage; a permission accepted
(the command runs) and rejected with a message (the model reads it and the turn goes on);
a question answered through the host; an interrupt mid-answer and one while a permission is
pending (no permission left behind); a dropped event stream that reconnects and loses no
event; a backend restart that re-attaches to the recorded session (an answer cut short by
the crash is gone); a model failure and an unknown model; and the managed
server's process group gone after close.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import Counter
from pathlib import Path

import httpx
import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.opencode import OpenCodeBackend
from symphony_tui.agents.opencode.server import ManagedServer
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    EventKind,
)
from symphony_tui.domain.payloads import NoteDelivered
from symphony_tui_testing.opencode_env import opencode_settings, server_command
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

from ..cutting_proxy import CuttingProxy, event_stream_request

pytestmark = pytest.mark.real_opencode

QUICK = StreamOptions(readiness_timeout_s=30, backoff_initial_s=0.1, backoff_max_s=0.5)
PASSWORD_ENV = "SYMPHONY_TEST_OC_PASSWORD"


def _no_cost(usage: dict) -> dict:
    return {k: v for k, v in usage.items() if k != "cost_usd"}


def make_backend(
    tmp: Path,
    env: dict,
    *,
    server: ManagedServer | None = None,
    command: str | None = None,
    model: str | None = "fake/fake-model",
) -> OpenCodeBackend:
    """A backend on the shared ``server`` (``base_url`` + password) or managing its own
    (``command``; its state under ``tmp``)."""
    if server is not None:
        settings = opencode_settings(
            base_url=server.base_url, password_env=PASSWORD_ENV, model=model
        )
        env = {**env, PASSWORD_ENV: server.password}
    else:
        settings = opencode_settings(command=command, model=model, workspace_root=tmp / "ws")
    return OpenCodeBackend(
        lambda: settings, env=env, state_dir=tmp / "oc-state", stream_options=QUICK
    )


def make_host(tmp: Path, identifier: str = "OC-1", **kw) -> RecordingSessionHost:
    ws = tmp / "ws" / identifier
    ws.mkdir(parents=True, exist_ok=True)
    return RecordingSessionHost(ws, issue=make_issue(identifier), **kw)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def pending_permissions(base_url: str, password: str, directory: str) -> list[dict]:
    async with httpx.AsyncClient(
        base_url=base_url, auth=("opencode", password), trust_env=False
    ) as c:
        return (await c.get("/permission", params={"directory": directory})).json()


async def test_full_run_completes_with_token_totals_of_the_model(
    tmp_path, oc_env, oc_bin, fake_model
):
    """Managed mode: the backend starts its own server and ends its process group."""
    backend = make_backend(tmp_path, oc_env, command=server_command(oc_bin))
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        assert backend.server is not None
        pgid = backend.server.pid
        first = await session.run_turn("Say hello.")
        second = await session.run_turn("And again.", continuation=True)
    finally:
        await backend.aclose()
    assert first.status == TurnStatus.COMPLETED, first
    assert second.status == TurnStatus.COMPLETED, second
    assert pgid is not None and not group_alive(pgid)
    assert host.recorded["session_id"] == session.session_id
    assert host.recorded["backend"] == "opencode"
    assert host.recorded["directory"] == str(host.workspace.resolve())
    assert host.recorded["server_url"].startswith("http://127.0.0.1:")
    last = host.of_kind(EventKind.TOKEN_USAGE)[-1].payload.usage
    assert fake_model.usage_total.total_tokens > 0
    assert _no_cost(last.model_dump()) == _no_cost(fake_model.usage_total.model_dump())
    messages = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert messages == [
        "Hello from the fake model. You said: Say hello.",
        "Hello from the fake model. You said: And again.",
    ]
    deltas = "".join(e.message for e in host.of_kind(EventKind.MESSAGE_DELTA))
    assert deltas == "".join(messages)
    assert host.kinds().count(EventKind.TURN_COMPLETED) == 2
    # Each model request carried the model named in the settings.
    assert {r["body"]["model"] for r in fake_model.requests} == {"fake-model"}


async def test_an_accepted_permission_runs_the_command(tmp_path, oc_env, oc_server, fake_model):
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo hi > made.txt")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert (host.workspace / "made.txt").read_text() == "hi\n"
    [request] = host.approvals
    assert request.kind is ApprovalKind.COMMAND
    assert request.command == "echo hi > made.txt"
    assert request.id.startswith(f"{host.issue.id}:per_")
    [done] = host.of_kind(EventKind.COMMAND_COMPLETED)
    assert done.payload.exit_code == 0 and done.payload.command == "echo hi > made.txt"
    assert len(host.of_kind(EventKind.COMMAND_STARTED)) == 1


async def test_a_rejection_with_a_message_reaches_the_model_and_the_turn_goes_on(
    tmp_path, oc_env, oc_server, fake_model
):
    note = "Do not write files here; use ls instead"
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message=note, by="operator")
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path, approve=answer)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo no > nope.txt")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert not (host.workspace / "nope.txt").exists()
    last_request = json.dumps(fake_model.requests[-1]["body"]["messages"])
    assert note in last_request
    assert note in host.of_kind(EventKind.MESSAGE)[-1].message
    assert any(isinstance(e.payload, NoteDelivered) for e in host.events)


async def test_a_rejection_without_a_message_stops_the_turn_as_the_operators_decision(
    tmp_path, oc_env, oc_server, fake_model
):
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, by="operator")
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path, approve=answer)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo no > nope.txt")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.FAILED
    assert result.error == "rejected by operator: rejected by the operator"
    [end] = host.of_kind(EventKind.TURN_CANCELLED)
    assert end.payload.outcome == "rejected_by_operator"
    assert len(fake_model.requests) == 1


async def test_a_question_is_answered_through_the_host(tmp_path, oc_env, oc_server, fake_model):
    ask = {
        "questions": [
            {
                "question": "Which colour?",
                "header": "Colour",
                "options": [
                    {"label": "red", "description": "warm"},
                    {"label": "blue", "description": "cold"},
                ],
            }
        ]
    }

    def pick_blue(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers={"0": ("blue",)})

    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path, approve=pick_blue)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn(f"TOOL: question {json.dumps(ask)}")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    [request] = host.approvals
    assert request.kind is ApprovalKind.USER_INPUT
    assert [o.label for o in request.questions[0].options] == ["red", "blue"]
    assert "blue" in json.dumps(fake_model.requests[-1]["body"]["messages"][-1])


async def test_an_interrupt_mid_answer_ends_the_turn_as_interrupted(
    tmp_path, oc_env, oc_server, fake_model
):
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SLOW400 please"))
        await host.wait_for(EventKind.MESSAGE_DELTA, timeout=60)
        await session.interrupt()
        result = await asyncio.wait_for(turn, 10)
        # The session is usable again: the next turn completes.
        again = await session.run_turn("Say hello.")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED, result
    assert again.status == TurnStatus.COMPLETED, again
    assert host.of_kind(EventKind.TURN_CANCELLED)[0].payload.outcome == "cancelled"


async def test_an_interrupt_while_a_permission_is_pending_leaves_none_behind(
    tmp_path, oc_env, oc_server, fake_model
):
    never = asyncio.get_running_loop().create_future()

    async def wait_forever(request: ApprovalRequest) -> ApprovalAnswer:
        return await never

    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path, approve=wait_forever)
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SHELL: echo pending"))
        await host.wait_for(EventKind.APPROVAL_REQUESTED, timeout=60)
        server = oc_server
        assert server.base_url is not None
        directory = str(host.workspace.resolve())
        assert len(await pending_permissions(server.base_url, server.password, directory)) == 1
        await session.interrupt()
        result = await asyncio.wait_for(turn, 10)
        left = await pending_permissions(server.base_url, server.password, directory)
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED, result
    assert left == []
    assert session.pending.ids == frozenset()


async def test_a_dropped_stream_reconnects_and_loses_no_event(
    tmp_path, oc_env, oc_server, fake_model
):
    assert oc_server.base_url is not None
    async with CuttingProxy(oc_server.base_url, event_stream_request) as proxy:
        settings = opencode_settings(base_url=proxy.url, password_env=PASSWORD_ENV)
        backend = OpenCodeBackend(
            lambda: settings,
            env={**oc_env, PASSWORD_ENV: oc_server.password},
            stream_options=QUICK,
        )
        host = make_host(tmp_path)
        try:
            session = await backend.start_session(host)
            turn = asyncio.create_task(session.run_turn("SHELL: sleep 1; echo survived"))
            await host.wait_for(EventKind.APPROVAL_RESOLVED, timeout=60)
            # Cut the stream and keep it down until the turn is over on the server: the
            # command's end, the answer and the turn's end reach the session only through
            # reconciliation.
            proxy.block = True
            proxy.drop()
            await until_idle(oc_server, session.session_id or "", str(host.workspace.resolve()))
            assert not turn.done(), "the turn ended without the stream"
            proxy.block = False
            result = await asyncio.wait_for(turn, 30)
        finally:
            await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    notices = [getattr(e.payload, "notice", None) for e in host.events]
    assert "reconnecting" in notices and "reconnected" in notices
    streamed = (EventKind.MESSAGE_DELTA, EventKind.COMMAND_OUTPUT)
    parts = Counter(
        (e.kind, e.payload.item_id)
        for e in host.events
        if getattr(e.payload, "item_id", None) is not None and e.kind not in streamed
    )
    assert all(n == 1 for n in parts.values()), parts
    [done] = host.of_kind(EventKind.COMMAND_COMPLETED)
    assert done.payload.output == "survived\n" and done.payload.exit_code == 0
    assert host.of_kind(EventKind.MESSAGE)[-1].message.endswith("survived")
    last = host.of_kind(EventKind.TOKEN_USAGE)[-1].payload.usage
    assert _no_cost(last.model_dump()) == _no_cost(fake_model.usage_total.model_dump())


async def until_idle(server: ManagedServer, session_id: str, directory: str) -> None:
    """Poll the server (bounded) until the session is idle with its last message closed."""
    params = {"directory": directory}
    async with (
        httpx.AsyncClient(
            base_url=server.base_url or "", auth=("opencode", server.password), trust_env=False
        ) as c,
        asyncio.timeout(60),
    ):
        while True:
            msgs = (await c.get(f"/session/{session_id}/message", params=params)).json()
            status = (await c.get("/session/status", params=params)).json()
            if session_id not in status and msgs[-1]["info"]["time"].get("completed"):
                return
            await asyncio.sleep(0.1)


async def test_a_restarted_backend_reattaches_to_the_recorded_session(
    tmp_path, oc_env, oc_bin, fake_model
):
    command = server_command(oc_bin)
    first_backend = make_backend(tmp_path, oc_env, command=command)
    first = make_host(tmp_path)
    try:
        session = await first_backend.start_session(first)
        done = await session.run_turn("Say hello.")
        assert done.status == TurnStatus.COMPLETED
        # The server dies in the middle of an answer: that message stays open for ever.
        turn = asyncio.create_task(session.run_turn("SLOW400 please"))
        await first.wait_for(EventKind.MESSAGE_DELTA, timeout=60)
        assert first_backend.server is not None and first_backend.server.pid is not None
        os.killpg(first_backend.server.pid, signal.SIGKILL)
    finally:
        await first_backend.aclose()
    with pytest.raises(AgentError):  # the session closed under the turn
        await asyncio.wait_for(turn, 10)
    before = first.of_kind(EventKind.TOKEN_USAGE)[-1].payload.usage

    second_backend = make_backend(tmp_path, oc_env, command=command)
    second = make_host(tmp_path, resume=dict(first.recorded))
    try:
        again = await second_backend.start_session(second)
        result = await again.run_turn("And again.", continuation=True)
    finally:
        await second_backend.aclose()
    assert again.session_id == session.session_id
    started = second.of_kind(EventKind.SESSION_STARTED)[0]
    assert started.payload.resumed is True
    # Measured on 1.18.33: a SIGKILL mid-answer loses that turn's messages (they never
    # reached storage), so nothing is left open; the unit tests cover an open one.
    assert started.payload.interrupted_messages == 0
    assert result.status == TurnStatus.COMPLETED, result
    usage = second.of_kind(EventKind.TOKEN_USAGE)
    assert usage[0].payload.attached is True and usage[0].payload.usage == before
    assert _no_cost(usage[-1].payload.usage.model_dump()) == _no_cost(
        fake_model.usage_total.model_dump()
    )


async def test_a_failing_model_is_retried_by_the_server_and_reported(
    tmp_path, oc_env, oc_server, fake_model
):
    fake_model.model.fail_next(500)
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("Say hello.")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    [retry] = [e for e in host.of_kind(EventKind.ERROR) if getattr(e.payload, "will_retry", None)]
    assert "fake failure 500" in retry.message


async def test_an_unknown_model_fails_the_turn_with_the_servers_reason(
    tmp_path, oc_env, oc_server, fake_model
):
    backend = make_backend(tmp_path, oc_env, server=oc_server, model="nope/missing")
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("Say hello.")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.FAILED
    assert result.error is not None and result.error.startswith("UnknownError: Model not found")
    assert "\n" not in result.error
    assert fake_model.requests == []


async def test_steer_mid_answer_reaches_the_models_next_request(
    tmp_path, oc_env, oc_server, fake_model
):
    backend = make_backend(tmp_path, oc_env, server=oc_server)
    host = make_host(tmp_path)
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SLOW40 please"))
        await host.wait_for(EventKind.MESSAGE_DELTA, timeout=60)
        assert await session.steer("STEERED: please also update the changelog")
        result = await asyncio.wait_for(turn, 60)
        after = await session.steer("between turns")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    bodies = [json.dumps(r["body"]) for r in fake_model.requests]
    first = next(i for i, b in enumerate(bodies) if "SLOW40" in b)
    assert "STEERED" not in bodies[first]
    assert any("please also update the changelog" in b for b in bodies[first + 1 :])
    assert after is False  # no turn in flight: the caller keeps it for the next turn
