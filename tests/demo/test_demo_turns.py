"""One turn of the demo agent per directive, driven over raw JSON-RPC lines."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from .conftest import AgentClient, items, methods, tool_ok


def _decide(word: str):
    def answer(msg: dict[str, Any]) -> Any:
        if msg["method"] == "item/commandExecution/requestApproval":
            return {"decision": word}
        return tool_ok(msg)

    return answer


async def test_plain_turn_streams_runs_writes_and_moves_the_issue(
    agent: AgentClient, workspace: Path
) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "Issue DEMO-9: do it")
    seq = methods(msgs)
    assert seq[0] == "thread/status/changed"
    assert seq[1] == "turn/started"
    assert seq[-1] == "turn/completed"
    assert msgs[-1]["params"]["turn"]["status"] == "completed"
    # Every notification carries a top-level emittedAtMs.
    notes = [m for m in msgs if "method" in m and "id" not in m]
    assert all(isinstance(m["emittedAtMs"], int) for m in notes)

    # The message was streamed: the deltas add up to the completed text.
    done_msgs = items(msgs, "item/completed", "agentMessage")
    first = done_msgs[0]
    deltas = [
        m["params"]["delta"]
        for m in msgs
        if m.get("method") == "item/agentMessage/delta" and m["params"]["itemId"] == first["id"]
    ]
    assert len(deltas) > 1
    assert "".join(deltas) == first["text"]
    assert items(msgs, "item/completed", "reasoning")[0]["summary"]

    # The command really ran in the workspace.
    (cmd,) = items(msgs, "item/completed", "commandExecution")
    assert cmd["command"] == "ls -la" and cmd["exitCode"] == 0 and cmd["status"] == "completed"
    assert "README.md" in cmd["aggregatedOutput"]
    assert cmd["cwd"] == str(workspace.resolve())
    out = "".join(
        m["params"]["delta"] for m in msgs if m.get("method") == "item/commandExecution/outputDelta"
    )
    assert out == cmd["aggregatedOutput"]

    # The file really appeared, with a diff in the item.
    (change,) = items(msgs, "item/completed", "fileChange")
    notes_file = workspace / "NOTES-DEMO-9.md"
    assert notes_file.is_file()
    assert change["status"] == "completed"
    assert change["changes"][0]["kind"] == {"type": "add"}
    assert "+# Notes for DEMO-9" in change["changes"][0]["diff"]
    assert "turn/diff/updated" in seq

    # The tool call round trip.
    (call,) = [m for m in msgs if m.get("method") == "item/tool/call"]
    assert call["params"]["tool"] == "symphony_set_issue_state"
    assert call["params"]["arguments"] == {"state": "Done"}
    assert call["params"]["threadId"] == thread_id
    resolved = [m for m in msgs if m.get("method") == "serverRequest/resolved"]
    assert [r["params"]["requestId"] for r in resolved] == [call["id"]]
    (tool_item,) = items(msgs, "item/completed", "dynamicToolCall")
    assert tool_item["success"] is True and tool_item["status"] == "completed"
    assert "moved to Done" in done_msgs[-1]["text"]

    # Rate limits once, camelCase.
    (limits,) = [m for m in msgs if m.get("method") == "account/rateLimits/updated"]
    primary = limits["params"]["rateLimits"]["primary"]
    assert {"usedPercent", "windowDurationMins", "resetsAt"} <= primary.keys()

    # Ends idle after turn/completed.
    assert msgs[-1]["method"] == "turn/completed" or seq[-1] == "turn/completed"
    tail = await agent.next()
    assert tail["method"] == "thread/status/changed"
    assert tail["params"]["status"] == {"type": "idle"}


async def test_token_totals_are_cumulative_per_thread(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    usage = []
    for text in ("first turn", "second turn"):
        msgs = await agent.turn(thread_id, text)
        usage += [
            m["params"]["tokenUsage"]
            for m in msgs
            if m.get("method") == "thread/tokenUsage/updated"
        ]
    assert len(usage) >= 8
    totals = [u["total"]["totalTokens"] for u in usage]
    assert totals == sorted(totals) and totals[0] > 0
    assert len(set(totals)) == len(totals)
    # total grows by exactly the last response each time.
    for prev, cur in itertools.pairwise(usage):
        for key in ("totalTokens", "inputTokens", "cachedInputTokens", "outputTokens"):
            assert cur["total"][key] == prev["total"][key] + cur["last"][key]
    for u in usage:
        t = u["total"]
        assert t["totalTokens"] == t["inputTokens"] + t["outputTokens"]
        assert t["cachedInputTokens"] <= t["inputTokens"]
        assert u["modelContextWindow"] > 0


async def test_approval_accept_runs_the_command(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "release it [demo: approval]", _decide("accept"))
    (req,) = [m for m in msgs if m.get("method") == "item/commandExecution/requestApproval"]
    p = req["params"]
    assert p["threadId"] == thread_id and p["cwd"] == str(workspace.resolve())
    assert "RELEASE-DEMO-9.txt" in p["command"] and p["reason"]
    assert isinstance(p["commandActions"], list)
    # Order: waitingOnApproval -> item/started -> request -> resolved -> item/completed.
    i_flag = next(
        i
        for i, m in enumerate(msgs)
        if m.get("method") == "thread/status/changed"
        and m["params"]["status"].get("activeFlags") == ["waitingOnApproval"]
    )
    i_started = next(
        i
        for i, m in enumerate(msgs)
        if m.get("method") == "item/started" and m["params"]["item"]["id"] == p["itemId"]
    )
    i_req = msgs.index(req)
    i_resolved = next(
        i
        for i, m in enumerate(msgs)
        if m.get("method") == "serverRequest/resolved" and m["params"]["requestId"] == req["id"]
    )
    i_done = next(
        i
        for i, m in enumerate(msgs)
        if m.get("method") == "item/completed" and m["params"]["item"]["id"] == p["itemId"]
    )
    assert i_flag < i_started < i_req < i_resolved < i_done
    done = msgs[i_done]["params"]["item"]
    assert done["status"] == "completed" and done["exitCode"] == 0
    assert (workspace / "RELEASE-DEMO-9.txt").read_text() == "release approved for DEMO-9\n"
    assert msgs[-1]["params"]["turn"]["status"] == "completed"


async def test_approval_decline_skips_the_command_and_goes_on(
    agent: AgentClient, workspace: Path
) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "[demo: approval]", _decide("decline"))
    req = next(m for m in msgs if m.get("method") == "item/commandExecution/requestApproval")
    done = next(
        m["params"]["item"]
        for m in msgs
        if m.get("method") == "item/completed"
        and m["params"]["item"]["id"] == req["params"]["itemId"]
    )
    assert done["status"] == "declined"
    assert not (workspace / "RELEASE-DEMO-9.txt").exists()
    assert any(m.get("method") == "item/tool/call" for m in msgs)
    assert msgs[-1]["params"]["turn"]["status"] == "completed"


async def test_approval_cancel_interrupts_the_turn(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "[demo: approval]", _decide("cancel"))
    assert msgs[-1]["params"]["turn"]["status"] == "interrupted"
    assert not (workspace / "RELEASE-DEMO-9.txt").exists()
    assert not any(m.get("method") == "item/tool/call" for m in msgs)
    assert not (workspace / "NOTES-DEMO-9.md").exists()


async def test_error_answer_to_approval_counts_as_decline(
    agent: AgentClient, workspace: Path
) -> None:
    thread_id = await agent.handshake(workspace)
    await agent.request(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "[demo: approval]"}]},
    )
    req = (await agent.until(lambda m: m.get("method") == "item/commandExecution/requestApproval"))[
        -1
    ]
    await agent.send({"id": req["id"], "error": {"code": -32000, "message": "no operator"}})
    msgs = await agent.until(lambda m: m.get("method") == "item/tool/call")
    await agent.send({"id": msgs[-1]["id"], "result": tool_ok(msgs[-1])})
    msgs += await agent.until(lambda m: m.get("method") == "turn/completed")
    declined = [
        m for m in items(msgs, "item/completed", "commandExecution") if m["status"] == "declined"
    ]
    assert len(declined) == 1
    assert msgs[-1]["params"]["turn"]["status"] == "completed"


async def test_accept_for_session_is_not_asked_again(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    first = await agent.turn(thread_id, "[demo: approval]", _decide("acceptForSession"))
    second = await agent.turn(thread_id, "again", _decide("decline"))
    asked = "item/commandExecution/requestApproval"
    assert asked in methods(first)
    assert asked not in methods(second)
    cmds = items(second, "item/completed", "commandExecution")
    assert [c["status"] for c in cmds] == ["completed", "completed"]


async def test_untrusted_asks_for_every_command_and_never_asks_none(
    tmp_path: Path,
) -> None:
    for policy, expected in (("untrusted", 2), ("never", 0)):
        ws = tmp_path / policy
        ws.mkdir()
        client = await AgentClient.start(ws)
        try:
            thread_id = await client.handshake(ws, policy=policy)
            msgs = await client.turn(thread_id, "[demo: approval]", _decide("accept"))
        finally:
            await client.close()
        asked = [m for m in msgs if m.get("method") == "item/commandExecution/requestApproval"]
        assert len(asked) == expected
        assert (ws / f"RELEASE-{policy}.txt").is_file()


async def test_fail_once_fails_the_first_attempt_only(tmp_path: Path) -> None:
    ws = tmp_path / "DEMO-4"
    ws.mkdir()
    statuses = []
    for _attempt in range(2):
        client = await AgentClient.start(ws)
        try:
            thread_id = await client.handshake(ws)
            msgs = await client.turn(thread_id, "flaky [demo: fail-once]")
        finally:
            assert await client.close() == 0
        statuses.append(msgs[-1]["params"]["turn"])
        if len(statuses) == 1:
            (err,) = [m for m in msgs if m.get("method") == "error"]
            assert err["params"]["willRetry"] is False
            assert "fail-once" in err["params"]["error"]["message"]
            assert (ws / ".symphony-demo" / "failed-once").is_file()
            assert not (ws / "NOTES-DEMO-4.md").exists()
    assert statuses[0]["status"] == "failed"
    assert "fail-once" in statuses[0]["error"]["message"]
    assert statuses[1]["status"] == "completed" and statuses[1]["error"] is None
    assert (ws / "NOTES-DEMO-4.md").is_file()


async def test_two_turns_finishes_on_the_continuation_turn(
    agent: AgentClient, workspace: Path
) -> None:
    thread_id = await agent.handshake(workspace)
    first = await agent.turn(thread_id, "big job [demo: two-turns]")
    assert first[-1]["params"]["turn"]["status"] == "completed"
    assert "item/tool/call" not in methods(first)
    # The continuation prompt does not repeat the directive: the thread remembers it.
    second = await agent.turn(thread_id, "Continue the work on the issue.")
    assert "item/tool/call" in methods(second)
    (change,) = items(second, "item/completed", "fileChange")
    assert change["changes"][0]["kind"]["type"] == "update"
    assert change["changes"][0]["diff"].startswith("--- a/NOTES-DEMO-9.md")
    assert "finished the work" in (workspace / "NOTES-DEMO-9.md").read_text()


async def test_without_the_tool_the_agent_says_so(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace, tools=[])
    msgs = await agent.turn(thread_id, "do it")
    assert not [m for m in msgs if m.get("method") == "item/tool/call"]
    last = items(msgs, "item/completed", "agentMessage")[-1]
    assert "was not advertised" in last["text"]
    assert msgs[-1]["params"]["turn"]["status"] == "completed"


async def test_a_failed_tool_call_is_reported(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)

    def refuse(msg: dict[str, Any]) -> Any:
        return {"contentItems": [{"type": "inputText", "text": "no such state"}], "success": False}

    msgs = await agent.turn(thread_id, "do it", refuse)
    (tool_item,) = items(msgs, "item/completed", "dynamicToolCall")
    assert tool_item["status"] == "failed" and tool_item["success"] is False
    assert "no such state" in items(msgs, "item/completed", "agentMessage")[-1]["text"]


async def test_escape_sample_reaches_the_wire_raw(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "[demo: escape-sample]")
    text = items(msgs, "item/completed", "agentMessage")[0]["text"]
    assert "\x1b[31mred\x1b[0m" in text and "[bold]markup[/bold]" in text
    (cmd,) = items(msgs, "item/completed", "commandExecution")
    assert "\x1b[31mred\x1b[0m" in cmd["aggregatedOutput"]


async def test_unknown_directive_gives_a_warning(agent: AgentClient, workspace: Path) -> None:
    thread_id = await agent.handshake(workspace)
    msgs = await agent.turn(thread_id, "[demo: teleport]")
    (warn,) = [m for m in msgs if m.get("method") == "warning"]
    assert "teleport" in warn["params"]["message"]
    assert msgs[-1]["params"]["turn"]["status"] == "completed"
