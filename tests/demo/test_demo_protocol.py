"""The demo agent's wire behaviour: handshake, errors, bad input, interrupts, exit, resume."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from .conftest import AgentClient, RpcError, items, methods


async def _init(agent: AgentClient) -> dict:
    return await agent.request("initialize", {"clientInfo": {"name": "tests", "version": "0"}})


async def test_handshake_result_shapes(agent: AgentClient, workspace: Path) -> None:
    init = await _init(agent)
    assert init["platformFamily"] in ("unix", "windows")
    assert init["userAgent"].startswith("tests/")
    with pytest.raises(RpcError) as again:
        await _init(agent)
    assert again.value.code == -32600
    await agent.send({"method": "initialized"})
    result = await agent.request(
        "thread/start",
        {"cwd": str(workspace), "approvalPolicy": "never", "sandbox": "read-only"},
    )
    thread = result["thread"]
    assert thread["status"] == {"type": "idle"} and thread["turns"] == []
    assert thread["cwd"] == str(workspace.resolve())
    assert result["approvalPolicy"] == "never"
    assert result["sandbox"] == {"type": "readOnly", "networkAccess": False}
    note = await agent.next()
    assert note["method"] == "thread/started" and note["params"]["thread"]["id"] == thread["id"]


async def test_errors(agent: AgentClient, workspace: Path) -> None:
    with pytest.raises(RpcError) as early:
        await agent.request("thread/start", {"cwd": str(workspace)})
    assert early.value.code == -32600
    thread_id = await agent.handshake(workspace)
    with pytest.raises(RpcError) as unknown:
        await agent.request("thread/fork", {"threadId": thread_id})
    assert unknown.value.code == -32601
    with pytest.raises(RpcError) as no_input:
        await agent.request("turn/start", {"threadId": thread_id})
    assert no_input.value.code == -32602
    with pytest.raises(RpcError) as no_thread:
        await agent.request("turn/start", {"threadId": "nope", "input": []})
    assert no_thread.value.code == -32600
    with pytest.raises(RpcError) as bad_policy:
        await agent.request("thread/start", {"cwd": str(workspace), "approvalPolicy": "always"})
    assert bad_policy.value.code == -32600
    with pytest.raises(RpcError) as bad_sandbox:
        await agent.request("thread/start", {"cwd": str(workspace), "sandbox": "none"})
    assert bad_sandbox.value.code == -32600
    with pytest.raises(RpcError) as bad_cwd:
        await agent.request("thread/start", {"cwd": str(workspace / "missing")})
    assert bad_cwd.value.code == -32600
    with pytest.raises(RpcError) as bad_params:
        await agent.send({"id": 99, "method": "thread/read", "params": [1, 2]})
        await agent.request("thread/read", {"threadId": thread_id, "extra": 1})
        raise RpcError((await agent.next())["error"])
    assert bad_params.value.code == -32602


async def test_malformed_input_is_ignored_with_a_note(agent: AgentClient, workspace: Path) -> None:
    await agent.send_raw(b'this is not json\n[1,2,3]\n{"neither": true}\n\n')
    await agent.send_raw(b'{"id": 12345, "result": {}}\n')  # a response nobody asked for
    await agent.send({"method": "some/notification", "params": {}})
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "still works")
    assert msgs[-1]["params"]["turn"]["status"] == "completed"
    assert await agent.close() == 0
    err = await agent.stderr()
    assert "malformed line" in err
    assert "not a JSON object" in err
    assert "neither method nor result" in err
    assert "unknown request id 12345" in err


async def test_overlong_line_is_dropped(agent: AgentClient, workspace: Path) -> None:
    await agent.send_raw(
        b'{"id": 1, "method": "initialize", "params": {"pad": "'
        + b"x" * (11 * 1024 * 1024)
        + b'"}}\n'
    )
    thread_id = await agent.handshake(workspace)  # the padded initialize never counted
    assert thread_id
    assert await agent.close() == 0
    assert "longer than" in await agent.stderr()


async def test_eof_exits_zero_even_mid_turn(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    await agent.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
    )
    await agent.until(lambda m: m.get("method") == "item/commandExecution/requestApproval")
    assert await agent.close() == 0


async def test_eof_right_away_exits_zero(agent: AgentClient) -> None:
    assert await agent.close() == 0


async def test_sigterm_exits(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    await agent.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
    )
    await agent.until(lambda m: m.get("method") == "item/commandExecution/requestApproval")
    agent.proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(20):
        assert await agent.proc.wait() == 0


async def test_interrupt_while_an_approval_is_pending(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    started = await agent.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
    )
    turn_id = started["turn"]["id"]
    req = (await agent.until(lambda m: m.get("method") == "item/commandExecution/requestApproval"))[
        -1
    ]
    assert await agent.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
    done = (await agent.until(lambda m: m.get("method") == "turn/completed"))[-1]
    assert done["params"]["turn"]["status"] == "interrupted"
    # The pending request resolves after turn/completed (as codex does); a late answer is ignored.
    resolved = await agent.next()
    assert resolved["method"] == "serverRequest/resolved"
    assert resolved["params"]["requestId"] == req["id"]
    await agent.send({"id": req["id"], "result": {"decision": "accept"}})
    assert (await agent.next())["params"]["status"] == {"type": "idle"}
    assert not (workspace / "RELEASE-DEMO-9.txt").exists()
    # Interrupting again is harmless, and the thread takes a new turn.
    assert await agent.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
    msgs = await agent.turn(
        thread_id,
        "go on",
        lambda m: (
            {"decision": "decline"}
            if "requestApproval" in m["method"]
            else {"contentItems": [], "success": True}
        ),
    )
    assert msgs[-1]["params"]["turn"]["status"] == "completed"


async def test_interrupt_mid_stream(workspace: Path) -> None:
    agent = await AgentClient.start(workspace, speed="1")
    try:
        thread_id = await agent.handshake(workspace)
        started = await agent.request(
            "turn/start",
            {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: slow]"}]},
        )
        await agent.until(lambda m: m.get("method") == "item/agentMessage/delta")
        await agent.request(
            "turn/interrupt", {"threadId": thread_id, "turnId": started["turn"]["id"]}
        )
        msgs = await agent.until(lambda m: m.get("method") == "turn/completed")
        assert msgs[-1]["params"]["turn"]["status"] == "interrupted"
        assert "item/tool/call" not in methods(msgs)
        assert not items(msgs, "item/completed", "commandExecution")
        assert not (workspace / "NOTES-DEMO-9.md").exists()
    finally:
        assert await agent.close() == 0


async def test_one_turn_at_a_time(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    text = {"type": "text", "text": "[demo: approval]"}
    await agent.request("turn/start", {"threadId": thread_id, "input": [text]})
    with pytest.raises(RpcError) as busy:
        await agent.request("turn/start", {"threadId": thread_id, "input": [text]})
    assert busy.value.code == -32600


async def test_thread_read_and_resume_in_a_new_process(workspace: Path) -> None:
    first = await AgentClient.start(workspace)
    try:
        thread_id = await first.handshake(workspace)
        msgs = await first.turn(thread_id, "one [demo: two-turns]")
        usage = [m for m in msgs if m.get("method") == "thread/tokenUsage/updated"][-1]
        read = await first.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        assert [t["status"] for t in read["thread"]["turns"]] == ["completed"]
        bare = await first.request("thread/read", {"threadId": thread_id})
        assert bare["thread"]["turns"] == []
    finally:
        await first.close()
    saved = workspace / ".symphony-demo" / "threads" / f"{thread_id}.json"
    assert json.loads(saved.read_text())["id"] == thread_id

    second = await AgentClient.start(workspace)
    try:
        await second.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        with pytest.raises(RpcError):
            await second.request("thread/resume", {"threadId": "../../etc/passwd"})
        resumed = await second.request(
            "thread/resume", {"threadId": thread_id, "cwd": str(workspace)}
        )
        assert resumed["thread"]["id"] == thread_id
        assert len(resumed["thread"]["turns"]) == 1
        # The resumed thread remembers its directives, tools and token totals: the
        # continuation turn finishes the two-turn work with the tool.
        msgs = await second.turn(thread_id, "Continue.")
        assert "item/tool/call" in methods(msgs)
        more = next(m for m in msgs if m.get("method") == "thread/tokenUsage/updated")
        assert (
            more["params"]["tokenUsage"]["total"]["totalTokens"]
            > usage["params"]["tokenUsage"]["total"]["totalTokens"]
        )
    finally:
        await second.close()


async def test_resume_marks_a_turn_cut_short_as_interrupted(workspace: Path) -> None:
    first = await AgentClient.start(workspace)
    thread_id = await first.handshake(workspace)
    await first.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
    )
    await first.until(lambda m: m.get("method") == "item/commandExecution/requestApproval")
    first.proc.kill()
    await first.close()
    second = await AgentClient.start(workspace)
    try:
        await second.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        resumed = await second.request(
            "thread/resume", {"threadId": thread_id, "cwd": str(workspace)}
        )
        assert [t["status"] for t in resumed["thread"]["turns"]] == ["interrupted"]
    finally:
        await second.close()


async def test_turns_list_pages_newest_first(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    first = (await agent.turn(thread_id, "one"))[-1]["params"]["turn"]["id"]
    second = (await agent.turn(thread_id, "two"))[-1]["params"]["turn"]["id"]
    page = await agent.request("thread/turns/list", {"threadId": thread_id, "limit": 1})
    assert [t["id"] for t in page["data"]] == [second]
    rest = await agent.request(
        "thread/turns/list", {"threadId": thread_id, "limit": 1, "cursor": page["nextCursor"]}
    )
    assert [t["id"] for t in rest["data"]] == [first] and rest["nextCursor"] is None
    oldest = await agent.request(
        "thread/turns/list", {"threadId": thread_id, "sortDirection": "asc", "itemsView": "full"}
    )
    assert [t["id"] for t in oldest["data"]] == [first, second]
    assert oldest["data"][0]["items"][0]["content"][0]["text"] == "one"
    for bad in ({"itemsView": "some"}, {"limit": -1}, {"cursor": "nope"}):
        with pytest.raises(RpcError) as err:
            await agent.request("thread/turns/list", {"threadId": thread_id, **bad})
        assert err.value.code == -32602
