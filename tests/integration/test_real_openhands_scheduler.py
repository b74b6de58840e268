"""Issue "OpenHands backend" through the scheduler (headless path): ``build_runtime`` + the
Orchestrator drive the real agent-server 1.58.2 against the fake model.

* a full run to ``finished``: the agent runs a command, then moves its issue to Done with the
  ``symphony_set_issue_state`` client tool; the scheduler's token totals equal the fake
  model's usage;
* a dropped event socket (cut by a proxy and kept down until the conversation finished)
  reconnects, and the transcript holds every server event exactly once;
* a model call that fails (HTTP 500) ends the attempt with the model's error as its reason,
  and the retry finishes the issue.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter

import httpx
import pytest

from symphony_tui.agents.openhands.translate import translate
from symphony_tui.domain import EventKind
from symphony_tui.headless import run_headless
from symphony_tui.runtime import build_runtime
from symphony_tui.workspaces.manifest import read_manifest
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.openhands_env import openhands_server
from tests.helpers import until
from tests.real_programs import require_openhands

from ..agents.cutting_proxy import CuttingProxy, websocket_upgrade
from .real_openhands_project import IDENTIFIER, make_project

pytestmark = pytest.mark.real_openhands

KEY_ENV = "SYMPHONY_E2E_OH_KEY"


async def test_headless_run_finishes_with_the_models_token_totals(tmp_path):
    with FakeModelServer() as fake:
        project = make_project(
            tmp_path, fake, description="SHELL: echo hello > greeting.txt", approvals="auto"
        )
        runtime = build_runtime(
            project.workflow, env=project.env, lock=False, events_path=tmp_path / "events.jsonl"
        )
        out = io.StringIO()
        code = await asyncio.wait_for(
            run_headless(runtime, exit_when_idle=True, out=out), timeout=150
        )
        totals = runtime.orchestrator.snapshot().totals
        expected = fake.usage_total
    state = json.loads(out.getvalue().strip().splitlines()[-1])
    assert code == 0
    assert state["completed"] == [IDENTIFIER]
    assert state["counts"] == {"running": 0, "retrying": 0}
    assert (project.workspace / "greeting.txt").read_text() == "hello\n"
    assert "state: Done" in project.issues_file.read_text()
    assert expected.total_tokens > 0
    assert totals.model_dump(exclude={"cost_usd"}) == expected.model_dump(exclude={"cost_usd"})
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    kinds = [e["kind"] for e in events]
    assert kinds.count("turn_completed") == 2  # the command turn, then the tracker-tool turn
    assert "approval_resolved" in kinds  # AlwaysConfirm asked; `approvals: auto` accepted
    assert any(
        e["kind"] == "tracker" and "moved to Done by the agent" in e["message"] for e in events
    )
    session = read_manifest(project.workspace)["session"]
    assert session["backend"] == "openhands" and session["conversation_id"]
    assert session["server_url"].startswith("http://127.0.0.1:")
    assert session["ws_auth"] == "first_frame"


async def test_a_failed_model_call_is_the_attempts_error_and_the_retry_finishes(tmp_path):
    with FakeModelServer() as fake:
        fake.fail_next(500)
        project = make_project(
            tmp_path, fake, description="Say hello.", approvals="auto", max_retry_backoff_ms=200
        )
        runtime = build_runtime(
            project.workflow, env=project.env, lock=False, events_path=tmp_path / "events.jsonl"
        )
        out = io.StringIO()
        code = await asyncio.wait_for(
            run_headless(runtime, exit_when_idle=True, out=out), timeout=150
        )
        statuses = [r["status"] for r in fake.requests]
    assert code == 0
    assert json.loads(out.getvalue().strip().splitlines()[-1])["completed"] == [IDENTIFIER]
    assert statuses[0] == 500 and set(statuses[1:]) == {200}
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    ended = [e for e in events if e["kind"] == "run_ended"]
    assert [e["payload"]["status"] for e in ended] == ["failed", "succeeded"]
    error = ended[0]["payload"]["error"]
    assert error.startswith("LLMServiceUnavailableError: ") and error.endswith("fake failure 500")
    assert ended[0]["message"] == f"{IDENTIFIER} ended: failed ({error})"


async def _server_events(base_url: str, key: str, cid: str) -> list[dict]:
    async with httpx.AsyncClient(
        base_url=base_url, headers={"X-Session-API-Key": key}, trust_env=False
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


async def _status(base_url: str, key: str, cid: str) -> str:
    async with httpx.AsyncClient(
        base_url=base_url, headers={"X-Session-API-Key": key}, trust_env=False
    ) as c:
        return (await c.get(f"/api/conversations/{cid}")).json()["execution_status"]


async def test_dropped_socket_reconnects_and_the_transcript_loses_no_event(tmp_path):
    require_openhands()
    async with (
        openhands_server(tmp_path / "oh-state") as server,
        CuttingProxy(server.base_url, websocket_upgrade) as proxy,
    ):
        with FakeModelServer() as fake:
            project = make_project(
                tmp_path,
                fake,
                description="SHELL: sleep 2; echo survived",
                approvals="auto",
                base_url=proxy.url,
                key_env=KEY_ENV,
                env={KEY_ENV: server.api_key},
            )
            runtime = build_runtime(
                project.workflow, env=project.env, lock=False, events_path=tmp_path / "ev.jsonl"
            )
            orch = runtime.orchestrator
            out = io.StringIO()
            headless = asyncio.create_task(run_headless(runtime, exit_when_idle=True, out=out))
            try:
                seen = []

                def command_started() -> bool:
                    seen[:] = orch.events_since(0, limit=100_000)
                    return any(e.kind is EventKind.COMMAND_STARTED for e in seen)

                await until(command_started, 90.0)
                cid = next(e.session_id for e in seen if e.kind is EventKind.SESSION_STARTED)
                # Cut the socket and keep it down until the conversation is over: everything
                # after the command started reaches the scheduler only through reconciliation.
                proxy.block = True
                proxy.drop()
                async with asyncio.timeout(90):
                    while await _status(server.base_url, server.api_key, cid) != "finished":
                        await asyncio.sleep(0.2)
                assert orch.snapshot().running, "the turn ended without the socket"
                proxy.block = False
                code = await asyncio.wait_for(headless, 150)
            finally:
                if not headless.done():
                    headless.cancel()
                    await runtime.close()
            events = orch.events_since(0, limit=100_000)
            wire = await _server_events(server.base_url, server.api_key, cid)
    assert code == 0
    assert json.loads(out.getvalue().strip().splitlines()[-1])["completed"] == [IDENTIFIER]
    notices = [getattr(e.payload, "notice", None) for e in events]
    assert "reconnecting" in notices and "reconnected" in notices
    reported = Counter(
        e.payload.wire_id for e in events if getattr(e.payload, "wire_id", None) is not None
    )
    expected = [w["id"] for w in wire if translate(w) is not None]
    assert expected and all(reported[i] == 1 for i in expected), (
        f"missing or repeated: {[i for i in expected if reported[i] != 1]}"
    )
    assert set(reported) <= {w["id"] for w in wire}
    done = [e.message for e in events if e.kind is EventKind.COMMAND_COMPLETED]
    assert done == ["survived"]
