"""The HTTP API (spec §13.7 extension) and the remote port the console attaches with."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime

import httpx
import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.client import RemoteError, RemotePort
from symphony_tui.api.server import ApiServer
from symphony_tui.domain import AgentEvent, ApprovalKind, ApprovalRequest, EventKind
from symphony_tui.domain.commands import Approve
from symphony_tui.scheduler.history.transcripts import ENTRY_OVERHEAD, TRANSCRIPT_OVERHEAD
from tests.scheduler.conftest import make_issue


async def asking(session, prompt, turn):
    await session.host.request_approval(
        ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make deploy")
    )
    return TurnResult(TurnStatus.COMPLETED)


@pytest.fixture
async def served(make_harness):
    h = make_harness(
        [make_issue(1), make_issue(2, state="Backlog")],
        script=asking,
        front="agent:\n  max_turns: 1\n",
    )
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as client:
        yield h, api, client
    await api.stop()


async def test_api_binds_loopback_and_serves_state(served):
    _h, api, client = served
    assert api.host == "127.0.0.1" and api.port
    r = await client.get("/api/v1/state")
    assert r.status_code == 200
    body = r.json()
    assert body["counts"] == {"running": 1, "retrying": 0}
    assert body["running"][0]["issue_identifier"] == "ABC-1"
    assert set(body) >= {
        "generated_at",
        "counts",
        "running",
        "retrying",
        "codex_totals",
        "rate_limits",
    }


async def test_issue_endpoint_and_404_envelope(served):
    _h, _api, client = served
    r = await client.get("/api/v1/ABC-1")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "running" and body["running"]["issue_identifier"] == "ABC-1"
    assert body["approvals"][0]["command"] == "make deploy"
    assert any(e["event"] == "dispatch" for e in body["recent_events"])
    missing = await client.get("/api/v1/NOPE-9")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {"code": "issue_not_found", "message": "unknown issue NOPE-9"}
    }


async def test_refresh_is_202_and_wrong_methods_are_405(served):
    _h, _api, client = served
    r = await client.post("/api/v1/refresh")
    assert r.status_code == 202
    assert r.json()["queued"] is True and r.json()["operations"] == ["poll", "reconcile"]
    assert (await client.post("/api/v1/state")).status_code == 405
    assert (await client.get("/api/v1/refresh")).status_code == 405
    assert (await client.delete("/api/v1/ABC-1")).json()["error"]["code"] == "method_not_allowed"


async def test_commands_endpoint_answers_an_approval(served):
    h, _api, client = served
    r = await client.post("/api/v1/commands", json=Approve(approval_id="ap-1").model_dump())
    assert r.status_code == 200 and r.json()["ok"] is True
    await h.settle()
    assert "ABC-1" in h.orch.completed
    # valid, but nothing is pending under that id any more: 409, with the reason
    again = await client.post("/api/v1/commands", json=Approve(approval_id="ap-1").model_dump())
    assert again.status_code == 409
    body = again.json()
    assert body["ok"] is False and body["error"]["code"] == "command_rejected"
    assert "no pending approval" in body["message"]
    bad = await client.post("/api/v1/commands", json={"type": "launch_missiles"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_command"
    junk = await client.post(
        "/api/v1/commands", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert junk.status_code == 400


async def test_remote_port_mirrors_snapshot_events_and_sends_commands(served):
    h, api, _client = served
    remote = RemotePort(api.url, control=api.control_token)
    try:
        await remote.refresh_once()
        assert remote.snapshot().running[0].issue_identifier == "ABC-1"
        assert remote.snapshot().approvals[0].id == "ap-1"
        assert remote.events_since(0) and remote.events_since(0)[-1].seq == h.orch.events.last_seq
        assert remote.events_since(0, issue_id="id-1") == []  # asked for: fetched next round
        await remote.refresh_once()
        assert [e.seq for e in remote.events_since(0, issue_id="id-1")] == [
            e.seq for e in h.orch.events_since(0, issue_id="id-1")
        ]
        result = await remote.send(Approve(approval_id="ap-1"))
        assert result.ok
        again = await remote.send(Approve(approval_id="ap-1"))
        assert not again.ok and "no pending approval" in again.message
    finally:
        await remote.close()


async def test_remote_port_reports_an_unreachable_scheduler():
    remote = RemotePort("http://127.0.0.1:9")
    with pytest.raises(RemoteError):
        await remote.refresh_once()
    result = await remote.send(Approve(approval_id="x"))
    assert not result.ok and "unreachable" in result.message
    await remote.close()


def test_cli_port_beats_server_port(tmp_path):
    from symphony_tui.cli import _api_server
    from symphony_tui.runtime import build_runtime
    from tests.scheduler.conftest import write_workflow

    path = write_workflow(tmp_path, "server:\n  port: 4567\n")
    runtime = build_runtime(path, lock=False, events_path=tmp_path / "e.jsonl")
    assert _api_server(runtime, None)._bind_port == 4567
    assert _api_server(runtime, 0)._bind_port == 0
    plain = write_workflow(tmp_path, "")
    assert (
        _api_server(build_runtime(plain, lock=False, events_path=tmp_path / "f.jsonl"), None)
        is None
    )


async def test_unknown_routes_and_bad_commands_get_json_errors_that_say_what_is_wrong(served):
    _h, _api, client = served
    r = await client.get("/api/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    bad = await client.post("/api/v1/commands", json={"type": "approve"})
    assert bad.status_code == 400
    assert "approval_id" in bad.json()["error"]["message"]
    for limit in ("0", "-1", "many"):
        events = await client.get("/api/v1/events", params={"limit": limit})
        assert events.status_code == 400 and events.json()["error"]["code"] == "invalid_query"
    capped = await client.get("/api/v1/events", params={"limit": "999999"})
    assert capped.status_code == 200


async def test_remote_port_starts_over_when_the_scheduler_restarted(served):
    h, api, _client = served
    remote = RemotePort(api.url, control=api.control_token)
    try:
        await remote.refresh_once()
        assert remote.events_since(0)
        remote._last_seq = 10_000  # as if the old process had numbered that far
        remote._snapshot = remote._snapshot.model_copy(update={"started_at": None})
        h.orch.events.append(
            AgentEvent(kind=EventKind.NOTIFICATION, message="new", at=datetime.now(UTC))
        )
        await remote.refresh_once()
        # numbered by the new process; what the old one handed out is not taken again
        assert [e.message for e in remote.events_since(0)] == ["new"]
        assert remote.events_since(0)[-1].seq == h.orch.events.last_seq
    finally:
        await remote.close()


async def test_browser_pages_cannot_drive_the_api(served):
    """Cross-site writes and DNS rebinding: a page in the operator's browser can reach
    127.0.0.1, so Host must be loopback, a foreign Origin is refused, and a body must be
    JSON (which a page cannot send cross-site without a preflight we never answer)."""
    _h, _api, client = served
    body = '{"type": "pause_dispatch", "paused": true}'
    evil_origin = await client.post(
        "/api/v1/commands",
        content=body,
        headers={"Origin": "http://evil.example", "Content-Type": "application/json"},
    )
    assert evil_origin.status_code == 403
    rebound = await client.get("/api/v1/snapshot", headers={"Host": "attacker.example:8080"})
    assert rebound.status_code == 403
    plain = await client.post(
        "/api/v1/commands", content=body, headers={"Content-Type": "text/plain"}
    )
    assert plain.status_code == 415
    assert not _h.orch.dispatch_paused
    ok = await client.post(
        "/api/v1/commands",
        content=body,
        headers={"Origin": f"http://127.0.0.1:{_api.port}", "Content-Type": "application/json"},
    )
    assert ok.status_code == 200 and _h.orch.dispatch_paused


async def test_commands_accept_an_issue_identifier(served):
    h, _api, client = served
    r = await client.post("/api/v1/commands", json={"type": "stop", "issue_id": "ABC-1"})
    assert r.json()["ok"] is True, r.json()
    await h.settle()
    assert "id-1" not in h.orch.running


async def test_remote_port_reads_what_an_issues_transcript_dropped(served):
    h, api, client = served
    history = h.orch.events
    # room for three of the five 100-character messages beside the transcript itself
    history.transcripts.budget_bytes = TRANSCRIPT_OVERHEAD + 3 * (ENTRY_OVERHEAD + 100)
    for i in range(5):
        history.append(
            AgentEvent(kind=EventKind.MESSAGE, message=f"{i:03}" * 33 + "x"), issue_id="id-1"
        )
    dropped = h.orch.transcript_gap("id-1")
    assert dropped.events >= 2
    answer = await client.get("/api/v1/events", params={"issue_id": "id-1"})
    assert answer.headers["X-Transcript-Dropped-Events"] == str(dropped.events)
    assert "X-Transcript-Dropped-Events" not in (await client.get("/api/v1/events")).headers
    remote = RemotePort(api.url, control=api.control_token)
    try:
        assert remote.transcript_gap("id-1").events == 0  # nothing read yet
        remote.events_since(0, issue_id="id-1")  # asked for: fetched next round
        await remote.refresh_once()
        gap = remote.transcript_gap("id-1")
        assert (gap.events, gap.bytes, gap.event_file) == (
            dropped.events,
            dropped.bytes,
            dropped.event_file,
        )
    finally:
        await remote.close()
    # the client's own bounded copy of a transcript counts what it drops too
    small = RemotePort(api.url, control=api.control_token)
    try:
        small.events_since(0, issue_id="id-1")
        await small.refresh_once()
        small._transcripts["id-1"] = deque(maxlen=2)  # as if 2 were its bound
        await small.refresh_once()
        kept = len(h.orch.events_since(0, issue_id="id-1"))
        assert kept > 2, kept
        assert len(small.events_since(0, issue_id="id-1")) == 2
        assert small.transcript_gap("id-1").events == dropped.events + kept - 2
    finally:
        await small.close()
