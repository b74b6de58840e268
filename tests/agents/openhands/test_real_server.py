"""The OpenHands backend against the real agent-server 1.58.2 and the fake model.

Covers the issue's "Done when" list: a full run to ``finished`` with token totals equal to
the fake model's usage; an accept and a reject answered through the host; an interrupt
ending the turn as cancelled; a dropped event socket that reconnects without losing an
event; a console restart (managed server stopped and started again) that re-attaches to
the recorded conversation and asks for the pending approval again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import httpx
import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.agents.openhands import OpenHandsBackend, OpenHandsSession
from symphony_tui.agents.openhands.client_tools import ACK, DESCRIPTION_NOTE, RESULTS_HEADER
from symphony_tui.agents.openhands.server import ManagedServer
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.domain import ApprovalAnswer, ApprovalDecision, ApprovalRequest, EventKind
from symphony_tui.domain.payloads import ServerStatus
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.openhands_env import isolated_env, openhands_settings, server_command
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

from ..cutting_proxy import CuttingProxy, websocket_upgrade

pytestmark = pytest.mark.real_openhands

KEY_ENV = "SYMPHONY_TEST_OH_KEY"
QUICK = StreamOptions(readiness_timeout_s=30, backoff_initial_s=0.1, backoff_max_s=1.0)


def _usage_wo_cost(usage) -> dict:
    return usage.model_dump(exclude={"cost_usd"})


def backend_for(
    server: ManagedServer,
    model: FakeModelServer,
    *,
    policy: str = "AlwaysConfirm",
    base_url: str | None = None,
    ws_auth: str = "first_frame",
) -> OpenHandsBackend:
    settings = openhands_settings(
        model.url,
        base_url=base_url or server.base_url,
        key_env=KEY_ENV,
        ws_auth=ws_auth,
        confirmation_policy=policy,
    )
    return OpenHandsBackend(lambda: settings, env={KEY_ENV: server.api_key}, stream_options=QUICK)


async def run_turns(
    backend: OpenHandsBackend, host: RecordingSessionHost, *prompts: str
) -> tuple[OpenHandsSession, list[TurnResult]]:
    """Start a session, run one turn per prompt (the later ones continuations), close."""
    try:
        session = await backend.start_session(host)
        results = [await session.run_turn(p, continuation=i > 0) for i, p in enumerate(prompts)]
    finally:
        await backend.aclose()
    return session, results


async def server_events(server: ManagedServer, cid: str) -> list[dict]:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"X-Session-API-Key": server.api_key}, trust_env=False
    ) as c:
        items: list[dict] = []
        page = None
        while True:
            params = {"limit": 100, **({"page_id": page} if page else {})}
            body = (await c.get(f"/api/conversations/{cid}/events/search", params=params)).json()
            items += body["items"]
            page = body.get("next_page_id")
            if not page:
                return items


async def server_status(server: ManagedServer, cid: str) -> str:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"X-Session-API-Key": server.api_key}, trust_env=False
    ) as c:
        return (await c.get(f"/api/conversations/{cid}")).json()["execution_status"]


async def test_full_run_finishes_with_token_totals_of_the_model(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model, policy="NeverConfirm", ws_auth="query")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-1"))
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo hello > greeting.txt")
        assert result.status == TurnStatus.COMPLETED, result
        second = await session.run_turn("Thanks, now summarize.", continuation=True)
        assert second.status == TurnStatus.COMPLETED, second
    finally:
        await backend.aclose()
    assert (tmp_path / "greeting.txt").read_text() == "hello\n"
    assert host.recorded["conversation_id"] == session.conversation_id
    assert host.recorded["server_url"] == oh_server.base_url
    assert host.recorded["ws_auth"] == "query"
    assert host.recorded["backend"] == "openhands"
    last = host.of_kind(EventKind.TOKEN_USAGE)[-1].payload.usage.model_dump()
    assert {k: v for k, v in last.items() if k != "cost_usd"} == _usage_wo_cost(
        fake_model.usage_total
    )
    assert fake_model.usage_total.total_tokens > 0
    kinds = host.kinds()
    assert kinds.count(EventKind.TURN_COMPLETED) == 2
    assert EventKind.COMMAND_STARTED in kinds and EventKind.COMMAND_COMPLETED in kinds
    assert host.approvals == []


async def test_accept_runs_the_action(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model, ws_auth="header")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-2"), approve=ApprovalDecision.ACCEPT)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo accepted > a.txt")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert (tmp_path / "a.txt").read_text() == "accepted\n"
    (req,) = host.approvals
    assert req.command == "echo accepted > a.txt"
    assert req.backend == "openhands" and req.kind.value == "confirmation"
    assert req.id == f"oh-2:{req.details['action_id']}"


async def test_reject_with_reason_ends_as_the_operators_decision(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model)
    answer = ApprovalAnswer(decision=ApprovalDecision.DECLINE, message="not in this repo")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-3"), approve=answer)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo rejected > r.txt")
        events = await server_events(oh_server, session.conversation_id)
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.FAILED
    assert result.error == "rejected by operator: not in this repo"
    assert host.of_kind(EventKind.TURN_CANCELLED)[-1].payload.outcome == "rejected_by_operator"
    assert not (tmp_path / "r.txt").exists()
    (reject,) = [e for e in events if e["kind"] == "UserRejectObservation"]
    assert reject["rejection_reason"] == "not in this repo"


async def test_accept_for_session_switches_to_never_confirm(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model)
    host = RecordingSessionHost(
        tmp_path, issue=make_issue("OH-4"), approve=ApprovalDecision.ACCEPT_FOR_SESSION
    )
    session, (first, second) = await run_turns(
        backend, host, "SHELL: echo one > one.txt", "SHELL: echo two > two.txt"
    )
    assert (first.status, second.status) == (TurnStatus.COMPLETED, TurnStatus.COMPLETED)
    assert len(host.approvals) == 1  # the second command ran without asking
    assert session.policy == "NeverConfirm"
    assert (tmp_path / "two.txt").exists()


async def test_interrupt_ends_the_turn_as_cancelled(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model, policy="NeverConfirm")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-5"))
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SLOW200 take your time"))
        await host.wait_for(lambda e: getattr(e.payload, "status", None) == "running")
        await session.interrupt()
        result = await asyncio.wait_for(turn, 30)
        status = await server_status(oh_server, session.conversation_id)
        events = await server_events(oh_server, session.conversation_id)
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED
    assert host.of_kind(EventKind.TURN_CANCELLED)[-1].payload.outcome == "cancelled"
    assert status == "paused"
    assert any(e["kind"] == "InterruptEvent" for e in events)
    assert not any(e["kind"] == "PauseEvent" for e in events)  # /interrupt, not /pause


async def test_dropped_socket_reconnects_and_loses_no_event(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    assert oh_server.base_url is not None
    async with CuttingProxy(oh_server.base_url, websocket_upgrade) as proxy:
        backend = backend_for(oh_server, fake_model, policy="NeverConfirm", base_url=proxy.url)
        host = RecordingSessionHost(tmp_path, issue=make_issue("OH-6"))
        try:
            session = await backend.start_session(host)
            turn = asyncio.create_task(session.run_turn("SHELL: sleep 2; echo survived"))
            await host.wait_for(EventKind.COMMAND_STARTED)
            proxy.block = True
            proxy.drop()
            # Everything after the command started happens while the socket is down.
            cid = session.conversation_id
            async with asyncio.timeout(60):
                while await server_status(oh_server, cid) != "finished":
                    await asyncio.sleep(0.2)
            assert not turn.done()
            proxy.block = False
            result = await asyncio.wait_for(turn, 60)
            events = await server_events(oh_server, cid)
        finally:
            await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert session.stream.reconnects >= 1
    assert {e["id"] for e in events} <= session.stream.log.ids
    reported = [
        e.payload.wire_id for e in host.events if getattr(e.payload, "wire_id", None) is not None
    ]
    assert len(reported) == len(set(reported))
    completed = host.of_kind(EventKind.COMMAND_COMPLETED)
    assert [e.message for e in completed] == ["survived"]
    assert any(getattr(e.payload, "notice", None) == "reconnected" for e in host.events)


async def test_console_restart_reattaches_and_asks_again(
    oh_venv: Path, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """Managed mode: the backend starts its own server; closing it stops the server."""
    settings = openhands_settings(fake_model.url, command=server_command(oh_venv))
    state = tmp_path / "state"
    work = tmp_path / "OH-7"
    work.mkdir()
    parked: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()

    def never(_req: ApprovalRequest) -> asyncio.Future[ApprovalAnswer]:
        return parked  # the operator never answers before the console goes away

    env = isolated_env(tmp_path / "home")
    first = OpenHandsBackend(lambda: settings, env=env, state_dir=state, stream_options=QUICK)
    host1 = RecordingSessionHost(work, issue=make_issue("OH-7"), approve=never)
    try:
        session1 = await first.start_session(host1)
        assert first.server is not None and first.server.pid == session1.pid
        pgid = first.server.pid
        turn = asyncio.create_task(session1.run_turn("SHELL: echo after-restart > r.txt"))
        await host1.wait_for(EventKind.APPROVAL_REQUESTED)
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await turn
    finally:
        await first.aclose()
    assert first.server is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # the whole process group is gone

    second = OpenHandsBackend(lambda: settings, env=env, state_dir=state, stream_options=QUICK)
    host2 = RecordingSessionHost(
        work, issue=make_issue("OH-7"), approve=ApprovalDecision.ACCEPT, resume=host1.recorded
    )
    try:
        session2 = await second.start_session(host2)
        started = host2.of_kind(EventKind.SESSION_STARTED)[0]
        assert started.payload.resumed is True
        assert started.payload.state == "waiting_for_confirmation"
        assert started.payload.pending_approvals == 1
        result = await session2.run_turn("this prompt is not sent while an action waits")
    finally:
        await second.aclose()
    assert session2.conversation_id == session1.conversation_id
    assert [a.id for a in host2.approvals] == [a.id for a in host1.approvals]
    assert result.status == TurnStatus.COMPLETED, result
    assert (work / "r.txt").read_text() == "after-restart\n"
    assert "not sent" not in str([r["body"] for r in fake_model.requests])


async def test_interrupt_while_waiting_for_confirmation_rejects_and_cancels(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """``/interrupt`` leaves a waiting conversation waiting, so the backend rejects instead."""
    backend = backend_for(oh_server, fake_model)
    parked: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-8"), approve=lambda _r: parked)
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SHELL: echo never > n.txt"))
        await host.wait_for(EventKind.APPROVAL_REQUESTED)
        await session.interrupt()
        result = await asyncio.wait_for(turn, 30)
        status = await server_status(oh_server, session.conversation_id)
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.INTERRUPTED
    assert status == "idle"
    assert not (tmp_path / "n.txt").exists()


async def test_client_tool_runs_through_the_host_without_asking_the_operator(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """``symphony_set_issue_state`` is a conversation ``client_tool``: the agent's call is
    confirmed by the backend itself (AlwaysConfirm) and runs through ``host.call_tool``
    before the turn returns."""
    backend = backend_for(oh_server, fake_model)
    parked: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-9"), approve=lambda _r: parked)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn('TOOL: symphony_set_issue_state {"state": "Done"}')
        events = await server_events(oh_server, session.conversation_id)
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert host.approvals == []
    assert host.tool_calls == [("symphony_set_issue_state", {"state": "Done"})]
    (obs,) = [e for e in events if e["kind"] == "ObservationEvent"]
    assert obs["observation"]["kind"] == "ClientToolObservation"


async def test_a_client_tool_result_reaches_the_model_with_the_next_message(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """The server answers the call itself with a fixed acknowledgement (1.58.2 cannot take
    a client's result back): the tool's description says so, and the result is in the
    model's first request of the next turn."""
    backend = backend_for(oh_server, fake_model, policy="NeverConfirm")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-11"))
    _session, (first, second) = await run_turns(
        backend, host, 'TOOL: symphony_set_issue_state {"state": "Done"}', "What did the tool say?"
    )
    assert (first.status, second.status) == (TurnStatus.COMPLETED, TurnStatus.COMPLETED)
    # The model's requests: the tool call, the text after its acknowledgement, then turn 2.
    assert [r["decision"]["kind"] for r in fake_model.requests] == ["tool", "text", "text"]
    body = fake_model.requests[2]["body"]
    (tool,) = [t for t in body["tools"] if t["function"]["name"] == "symphony_set_issue_state"]
    assert tool["function"]["description"].endswith(DESCRIPTION_NOTE)
    acks = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["content"][0]["text"] for m in acks] == [ACK]
    last_user = body["messages"][-1]
    assert last_user["role"] == "user"
    assert last_user["content"][0]["text"] == (
        f"{RESULTS_HEADER}\n"
        '- symphony_set_issue_state {"state": "Done"}: ok: OH-11 moved to Done\n'
        "\nWhat did the tool say?"
    )


async def test_a_model_failure_names_the_model_error(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """The model answers HTTP 500: the turn's reason is the run's ``ConversationErrorEvent``
    (which reaches the socket after ``execution_status: error``), on one line; the next
    turn runs again."""
    backend = backend_for(oh_server, fake_model, policy="NeverConfirm")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-12"))
    fake_model.fail_next(500)
    _session, (failed, again) = await run_turns(backend, host, "hello", "hello again")
    assert failed.status == TurnStatus.FAILED
    assert failed.error is not None
    assert failed.error.startswith("LLMServiceUnavailableError: ")
    assert failed.error.endswith("fake failure 500")
    assert host.of_kind(EventKind.TURN_FAILED)[0].message == failed.error
    assert [r["status"] for r in fake_model.requests] == [500, 200]
    assert again.status == TurnStatus.COMPLETED, again


async def test_a_policy_decline_is_not_reported_as_the_operators_decision(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model)
    answer = ApprovalAnswer(
        decision=ApprovalDecision.DECLINE, message="approvals are denied by policy", by="policy"
    )
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-10"), approve=answer)
    try:
        session = await backend.start_session(host)
        result = await session.run_turn("SHELL: echo denied > d.txt")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.FAILED
    assert result.error == "rejected by policy: approvals are denied by policy"
    assert not host.of_kind(EventKind.TURN_CANCELLED)
    assert host.of_kind(EventKind.TURN_FAILED)[-1].payload.outcome == "declined"
    assert not (tmp_path / "d.txt").exists()


async def test_steer_mid_run_reaches_the_models_next_request(
    oh_server: ManagedServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    backend = backend_for(oh_server, fake_model, policy="NeverConfirm")
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-9"))
    try:
        session = await backend.start_session(host)
        turn = asyncio.create_task(session.run_turn("SLOW10 take your time"))
        await host.wait_for(lambda e: getattr(e.payload, "status", None) == "running")
        while not fake_model.requests:
            await asyncio.sleep(0.05)
        assert await session.steer("STEERED: please also update the changelog")
        result = await asyncio.wait_for(turn, 60)
        status = await server_status(oh_server, session.conversation_id)
        after = await session.steer("between turns")
    finally:
        await backend.aclose()
    assert result.status == TurnStatus.COMPLETED, result
    assert "STEERED" not in str(fake_model.requests[0]["body"])
    later = [str(r["body"]) for r in fake_model.requests[1:]]
    assert any("please also update the changelog" in body for body in later)
    assert status == "finished"
    assert after is False  # no turn in flight: the caller keeps it for the next turn
    # The server ran again for the message: the turn ended on the rerun's end, not on the
    # first run's (nor on the session's fallback when no rerun comes).
    statuses = [e.payload.status for e in host.events if isinstance(e.payload, ServerStatus)]
    first_end = statuses.index("finished")
    assert "running" in statuses[first_end:], statuses
    assert statuses[-1] == "finished", statuses
