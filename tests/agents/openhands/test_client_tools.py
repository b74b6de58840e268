"""The scheduler's client tools on a conversation: what the agent is told about them, and
their results handed over with the session's next message (recorded 1.58.2 frames, no
server; the server itself cannot take a result back, see ``client_tools``)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError, ToolSpec, TurnStatus
from symphony_tui.agents.openhands.client_tools import (
    ACK,
    DESCRIPTION_NOTE,
    RESULTS_HEADER,
    client_tool_specs,
)
from symphony_tui.domain import EventKind
from symphony_tui_testing.session_host import SET_STATE_TOOL, RecordingSessionHost, make_issue

from .fake_server import status_ev
from .session_harness import deliver, frames, make_session, run_turn, start_turn

CALL = '- symphony_set_issue_state {"state": "Done"}'


def test_descriptions_say_the_reply_is_only_an_acknowledgement() -> None:
    text_schema = ToolSpec("free_text", "Takes a string.", {"type": "string"})
    (spec,) = client_tool_specs([SET_STATE_TOOL, text_schema])  # the server takes objects only
    assert spec["name"] == SET_STATE_TOOL.name
    assert spec["parameters"] == SET_STATE_TOOL.input_schema
    assert spec["description"] == SET_STATE_TOOL.description + DESCRIPTION_NOTE
    assert ACK in DESCRIPTION_NOTE and "next user message" in DESCRIPTION_NOTE


async def test_a_tool_result_comes_with_the_next_message_once(tmp_path: Path) -> None:
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-21"))
    session, client = make_session(host)
    first = await run_turn(session, client, frames("client_tool_call"), "move it")
    assert first.status == TurnStatus.COMPLETED
    assert host.tool_calls == [("symphony_set_issue_state", {"state": "Done"})]

    second = await start_turn(session, client, "Continue.")
    ok = f"{CALL}: ok: OH-21 moved to Done"
    assert client.messages[1] == f"{RESULTS_HEADER}\n{ok}\n\nContinue."
    await deliver(session, [status_ev(91, "running"), status_ev(92, "finished")])
    assert (await asyncio.wait_for(second, 5)).status == TurnStatus.COMPLETED

    third = await start_turn(session, client, "Again.")
    await session.close()
    with pytest.raises(AgentError, match="session closed"):
        await third
    assert client.messages[2] == "Again."


async def test_a_failed_call_is_a_warning_and_its_error_reaches_the_agent(tmp_path: Path) -> None:
    host = RecordingSessionHost(tmp_path, issue=make_issue("OH-22"))
    session, client = make_session(host)
    recorded = copy.deepcopy(frames("client_tool_call"))
    for f in recorded:
        if f["kind"] == "ActionEvent":
            f["action"]["state"] = " "
    await run_turn(session, client, recorded, "move it")
    (warning,) = host.of_kind(EventKind.WARNING)
    assert warning.message == "symphony_set_issue_state failed: `state` must be a non-empty string"
    second = await start_turn(session, client, "Continue.")
    await session.close()
    with pytest.raises(AgentError, match="session closed"):
        await second
    failed = '- symphony_set_issue_state {"state": " "}: failed: `state` must be a non-empty string'
    assert client.messages[1].splitlines()[1] == failed
