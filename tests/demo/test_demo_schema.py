"""Everything the demo agent sends validates against the real codex 0.171 protocol schema.

The schema comes from the pinned binary (``codex app-server generate-json-schema``), so a
drift between the demo agent and codex shows up here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.real_programs import require_codex

from .conftest import AgentClient, tool_ok

pytestmark = pytest.mark.real_codex


@pytest.fixture(scope="module")
def schema_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    codex = require_codex()
    out = tmp_path_factory.mktemp("codex-schema")
    home = tmp_path_factory.mktemp("codex-home")
    env = {
        **os.environ,
        "CODEX_HOME": str(home),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _validate_union(union: dict[str, Any], msg: dict[str, Any]) -> None:
    """Validate ``msg`` against the branch of a ``ServerNotification`` / ``ServerRequest``
    union whose ``method`` matches (a plain oneOf gives unreadable errors)."""
    branches = [
        b for b in union["oneOf"] if msg["method"] in b["properties"]["method"].get("enum", [])
    ]
    assert branches, f"{msg['method']} is not a codex 0.171 method"
    schema = {**branches[0], "definitions": union["definitions"]}
    if "properties" in union:  # top-level extras such as emittedAtMs
        schema["properties"] = {**union["properties"], **schema["properties"]}
    jsonschema.Draft7Validator(schema).validate(msg)


def _validate_file(path: Path, value: Any) -> None:
    jsonschema.Draft7Validator(_load(path)).validate(value)


async def test_transcript_matches_the_codex_schema(schema_dir: Path, tmp_path: Path) -> None:
    notifications = _load(schema_dir / "ServerNotification.json")
    requests = _load(schema_dir / "ServerRequest.json")
    ws = tmp_path / "DEMO-S"
    ws.mkdir()
    agent = await AgentClient.start(ws)
    try:
        init = await agent.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        _validate_file(schema_dir / "v1" / "InitializeResponse.json", init)
        await agent.send({"method": "initialized"})
        started = await agent.request(
            "thread/start",
            {"cwd": str(ws), "approvalPolicy": "on-request", "sandbox": "workspace-write"},
        )
        _validate_file(schema_dir / "v2" / "ThreadStartResponse.json", started)
        thread_id = started["thread"]["id"]
        # A thread without the tool, and one with it, so both endings are covered.
        with_tool = await agent.handshake_thread(ws)

        def answer(msg: dict[str, Any]) -> Any:
            if msg["method"].endswith("requestApproval"):
                return {"decision": "accept"}
            return tool_ok(msg)

        turn = await agent.request(
            "turn/start",
            {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: fail-once]"}]},
        )
        _validate_file(schema_dir / "v2" / "TurnStartResponse.json", turn)
        await agent.until(lambda m: m.get("method") == "turn/completed")
        texts = ["[demo: approval, escape-sample, two-turns, teleport]", "Continue."]
        for text in texts:
            await agent.turn(with_tool, text, answer)
        await agent.turn(thread_id, "again, no tool")
        pending = await agent.request(
            "turn/start",
            {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
        )
        await agent.until(lambda m: m.get("method") == "item/commandExecution/requestApproval")
        waiting = await agent.request(
            "thread/resume", {"threadId": thread_id, "excludeTurns": True}
        )
        _validate_file(schema_dir / "v2" / "ThreadResumeResponse.json", waiting)
        assert waiting["thread"]["status"] == {
            "type": "active",
            "activeFlags": ["waitingOnApproval"],
        }
        interrupted = await agent.request(
            "turn/interrupt", {"threadId": thread_id, "turnId": pending["turn"]["id"]}
        )
        _validate_file(schema_dir / "v2" / "TurnInterruptResponse.json", interrupted)
        await agent.until(lambda m: m.get("method") == "turn/completed")
        read = await agent.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        _validate_file(schema_dir / "v2" / "ThreadReadResponse.json", read)
        resumed = await agent.request("thread/resume", {"threadId": thread_id})
        _validate_file(schema_dir / "v2" / "ThreadResumeResponse.json", resumed)
        for view in ("full", "summary", "notLoaded"):
            listed = await agent.request(
                "thread/turns/list", {"threadId": with_tool, "limit": 2, "itemsView": view}
            )
            _validate_file(schema_dir / "v2" / "ThreadTurnsListResponse.json", listed)
        assert [t["status"] for t in listed["data"]] == ["completed", "completed"]
        full = await agent.request(
            "thread/turns/list", {"threadId": with_tool, "itemsView": "full"}
        )
        kinds = {i["type"] for t in full["data"] for i in t["items"]}
        assert {"userMessage", "commandExecution", "fileChange", "dynamicToolCall"} <= kinds
    finally:
        assert await agent.close() == 0

    seen: set[str] = set()
    for msg in agent.transcript:
        if "method" not in msg:
            continue
        seen.add(msg["method"])
        if "id" in msg:
            _validate_union(requests, msg)
        else:
            assert isinstance(msg.get("emittedAtMs"), int)
            _validate_union(notifications, msg)
    assert {
        "thread/started",
        "thread/status/changed",
        "turn/started",
        "turn/completed",
        "item/started",
        "item/completed",
        "item/agentMessage/delta",
        "item/commandExecution/outputDelta",
        "item/reasoning/summaryTextDelta",
        "thread/tokenUsage/updated",
        "account/rateLimits/updated",
        "serverRequest/resolved",
        "turn/diff/updated",
        "error",
        "warning",
        "item/commandExecution/requestApproval",
        "item/tool/call",
    } <= seen
