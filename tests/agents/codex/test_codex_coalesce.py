"""Streamed deltas while the host is congested (control is never starved): the
session keeps reading and joins consecutive deltas of one item into one event, text whole
and in order; an approval request written behind them is handed over after them, and
nothing of the session is reordered. No timing is measured: the order is read from what
the host recorded."""

from __future__ import annotations

import json
from itertools import groupby

import pytest

from symphony_tui.agents.base import FlowControl
from symphony_tui.agents.codex import coalesce
from symphony_tui.agents.codex.coalesce import HOLD_CHARS
from symphony_tui.domain import EventKind
from symphony_tui_testing.session_host import RecordingSessionHost

from .conftest import HANDSHAKE, note, turn_completed, turn_start


class _Behind(FlowControl):
    def congested(self) -> bool:
        return True


class CongestedHost(RecordingSessionHost):
    """A host that is always behind (the scheduler's inbox past its busy mark)."""

    flow = _Behind()


def _line(msg: dict) -> str:
    return json.dumps(msg) + "\n"


def _delta(item: str, text: str, *, reasoning: bool = False) -> str:
    method = "item/reasoning/textDelta" if reasoning else "item/agentMessage/delta"
    return _line({"method": method, "params": {"threadId": "th-1", "itemId": item, "delta": text}})


FIRST = [f"m1 part {i:03d} of the first stretch, quick fox;" for i in range(300)]
THINK = [f"r1 thought {i:02d};" for i in range(20)]
AGAIN = [f"m1 again {i:02d};" for i in range(10)]
AFTER = [f"m1 after the approval {i:02d};" for i in range(50)]

APPROVAL = {
    "id": 7,
    "method": "item/commandExecution/requestApproval",
    "params": {"threadId": "th-1", "turnId": "tu-1", "itemId": "c1", "command": "ls"},
}

#: Everything in one write: the reader gets the flood, the request and more flood at once.
FLOOD = "".join(
    [
        *(_delta("m1", t) for t in FIRST),
        *(_delta("r1", t, reasoning=True) for t in THINK),
        *(_delta("m1", t) for t in AGAIN),
        _line(APPROVAL),
        *(_delta("m1", t) for t in AFTER),
    ]
)

SCRIPT = [
    *HANDSHAKE,
    turn_start(),
    note("turn/started", threadId="th-1", turn={"id": "tu-1", "status": "inProgress"}),
    note("item/started", threadId="th-1", item={"type": "agentMessage", "id": "m1", "text": ""}),
    {"raw": FLOOD},
    {"expect_response": 7},
    turn_completed(),
]


def _deltas(events):
    return [e for e in events if e.kind is EventKind.MESSAGE_DELTA]


def _stretches(events):
    """(item id, reasoning) -> joined text, for each stretch of consecutive deltas."""
    return [
        ((key[0], key[1]), "".join(e.message for e in group))
        for key, group in groupby(
            _deltas(events), key=lambda e: (e.payload.item_id, e.payload.reasoning)
        )
    ]


@pytest.fixture
def hold_long(monkeypatch):
    # no flush by the clock: what is joined depends only on the lines, not on the machine
    monkeypatch.setattr(coalesce, "HOLD_S", 3600.0)


async def test_a_congested_host_gets_deltas_joined_whole_in_order_and_the_request_after_them(
    fake_codex, workspace, hold_long
):
    host = CongestedHost(workspace)
    run = fake_codex(SCRIPT)
    session = await run.backend.start_session(host)
    result = await session.run_turn("go")
    assert result.status.value == "completed"
    kinds = host.kinds()
    asked = kinds.index(EventKind.APPROVAL_REQUESTED)
    before, after = host.events[:asked], host.events[asked:]
    # Before the request: exactly what the agent streamed before it, whole and in order,
    # one stretch per item; far fewer events than lines, none over the hold limit.
    assert _stretches(before) == [
        (("m1", False), "".join(FIRST)),
        (("r1", True), "".join(THINK)),
        (("m1", False), "".join(AGAIN)),
    ]
    assert len(_deltas(before)) < len(FIRST) // 10
    assert all(len(e.message) <= HOLD_CHARS for e in _deltas(before))
    # After it: the rest, before the turn's end.
    assert _stretches(after) == [(("m1", False), "".join(AFTER))]
    assert kinds.index(EventKind.TURN_COMPLETED) > max(
        i for i, k in enumerate(kinds) if k is EventKind.MESSAGE_DELTA
    )
    assert run.responses()[7]["result"] == {"decision": "accept"}


async def test_a_host_that_keeps_up_gets_one_event_per_delta(fake_codex, workspace, hold_long):
    host = RecordingSessionHost(workspace)  # no congestion signal: nothing is held
    run = fake_codex(SCRIPT)
    session = await run.backend.start_session(host)
    await session.run_turn("go")
    deltas = _deltas(host.events)
    assert [e.message for e in deltas] == [*FIRST, *THINK, *AGAIN, *AFTER]


async def test_held_deltas_of_an_agent_that_goes_quiet_are_handed_over_anyway(
    fake_codex, workspace
):
    import asyncio

    host = CongestedHost(workspace)
    quiet = [
        *HANDSHAKE,
        turn_start(),
        note("turn/started", threadId="th-1", turn={"id": "tu-1", "status": "inProgress"}),
        {"raw": "".join(_delta("m1", t) for t in AGAIN)},
        {"hang": True},  # nothing more: no event, no batch boundary to hand them over
    ]
    run = fake_codex(quiet)
    session = await run.backend.start_session(host)
    turn = asyncio.ensure_future(session.run_turn("go"))
    try:
        await host.wait_for(
            lambda e: "".join(m.message for m in _deltas(host.events)) == "".join(AGAIN), timeout=30
        )
        assert len(_deltas(host.events)) < len(AGAIN)
    finally:
        await session.close()
        turn.cancel()
