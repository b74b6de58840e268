"""The ``steer`` command: the operator's message into the running turn, else with the next
turn, else reported as not delivered (docs/protocols.md "Steering")."""

from __future__ import annotations

import asyncio

from symphony_tui.agents.base import AgentError, TurnResult, TurnStatus
from symphony_tui.domain import EventKind
from symphony_tui.domain.commands import Steer
from symphony_tui.domain.payloads import NoteDelivered

from .conftest import make_issue


def notes(h) -> list:
    return [e for e in h.orch.events_since(0) if isinstance(e.payload, NoteDelivered)]


async def test_a_message_mid_turn_reaches_the_session_and_the_transcript(make_harness):
    async def listen(session, prompt, turn):
        await session.steer_arrived.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=listen, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    result = await h.orch.send(Steer(issue_id="ABC-1", text="  use the staging bucket  "))
    await h.settle()

    assert result.ok, result.message
    assert "running turn" in result.message
    assert h.backend.sessions[0].steered == ["use the staging bucket"]
    (note,) = notes(h)
    assert note.issue_id == "id-1" and note.payload.steered and not note.payload.queued
    assert note.message == "sent to the agent: use the staging bucket"


async def test_between_turns_the_message_goes_with_the_next_turn(make_harness):
    gate = asyncio.Event()

    async def first_waits(session, prompt, turn):
        if turn == 1:
            await gate.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=first_waits, front="agent:\n  max_turns: 2\n")
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    session.in_turn = False  # the turn is over on the agent's side: nothing to steer
    result = await h.orch.send(Steer(issue_id="id-1", text="also update the changelog"))
    assert result.ok and "next turn" in result.message
    gate.set()
    await h.settle()

    assert session.turns == 2
    assert session.prompts[1].startswith("A message from the operator:\nalso update the changelog")
    assert "Continue working on ABC-1" in session.prompts[1]
    (note,) = notes(h)
    assert note.payload.queued


async def test_a_queued_message_with_no_turn_left_is_reported_not_delivered(make_harness):
    gate = asyncio.Event()

    async def only_turn(session, prompt, turn):
        session.in_turn = False
        await gate.wait()
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=only_turn, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    result = await h.orch.send(Steer(issue_id="id-1", text="too late"))
    assert result.ok
    gate.set()
    await h.settle()

    assert not notes(h)
    warnings = [e for e in h.orch.events_since(0) if e.kind is EventKind.WARNING]
    assert any("not delivered" in w.message and w.issue_id == "id-1" for w in warnings)


async def test_steer_is_refused_without_a_running_worker(make_harness):
    h = make_harness([])
    await h.start()
    result = await h.orch.send(Steer(issue_id="id-9", text="hello"))
    assert not result.ok and "no running worker" in result.message


async def test_a_backend_refusal_is_a_failed_result(make_harness):
    async def listen(session, prompt, turn):
        async def refuse(text: str) -> bool:
            raise AgentError("protocol_error", "turn/steer refused: expected another turn")

        session.steer = refuse
        return await session.wait_interrupt()

    h = make_harness([make_issue(1)], script=listen)
    await h.start()
    await h.settle()
    result = await h.orch.send(Steer(issue_id="id-1", text="hello"))
    assert not result.ok
    assert "not delivered" in result.message and "expected another turn" in result.message
    assert not notes(h)
