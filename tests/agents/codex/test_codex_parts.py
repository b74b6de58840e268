"""The parts of a codex session work from their explicit inputs alone: JSON-RPC lines fed
to an ``RpcConnection`` go through the notification decoder and the turn tracker to the
host through the event outlet, with no process and no ``CodexSession``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.eager import SessionTasks
from symphony_tui.agents.codex.notifications import Notifications
from symphony_tui.agents.codex.rpc import RpcConnection
from symphony_tui.agents.codex.turns import PendingRequests, TurnTracker
from symphony_tui.config.settings import CodexSettings
from symphony_tui.domain import EventKind
from symphony_tui_testing.session_host import RecordingSessionHost

STAMP = 1_796_000_000_123


def _line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg) + "\n").encode()


class ScriptedPeer:
    """The writer side of the connection: records what is sent and answers a request by
    feeding the reader the lines ``answers[method](request_id)`` gives."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        answers: dict[str, Callable[[int], list[dict[str, Any]]]],
    ) -> None:
        self._reader = reader
        self._answers = answers
        self.sent: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        msg = json.loads(data)
        self.sent.append(msg)
        answer = self._answers.get(msg.get("method"))
        if answer is not None:
            for reply in answer(msg["id"]):
                self._reader.feed_data(_line(reply))

    async def drain(self) -> None:
        return None


def _turn_lines(rid: int) -> list[dict[str, Any]]:
    return [
        {"id": rid, "result": {"turn": {"id": "tu-1", "status": "inProgress"}}},
        {
            "method": "turn/started",
            "params": {"threadId": "th-1", "turn": {"id": "tu-1", "status": "inProgress"}},
        },
        {
            "method": "item/agentMessage/delta",
            "params": {"threadId": "th-1", "turnId": "tu-1", "itemId": "m1", "delta": "Hel"},
            "emittedAtMs": STAMP,
        },
        {
            "method": "item/agentMessage/delta",
            "params": {"threadId": "th-sub", "turnId": "tu-9", "itemId": "s1", "delta": "sub"},
        },
        {
            "method": "turn/completed",
            "params": {"threadId": "th-1", "turn": {"id": "tu-1", "status": "completed"}},
        },
    ]


async def test_wire_lines_become_host_events_through_the_parts(tmp_path):
    host = RecordingSessionHost(tmp_path, tools=())
    outlet = EventOutlet(host)
    pending = PendingRequests()
    turns = TurnTracker(host, CodexSettings(), outlet, pending, record_turns=False)
    notes = Notifications(turns, outlet, pending, SessionTasks(), {})
    reader = asyncio.StreamReader()
    peer = ScriptedPeer(
        reader,
        {
            "thread/start": lambda rid: [{"id": rid, "result": {"thread": {"id": "th-1"}}}],
            "turn/start": _turn_lines,
        },
    )
    rpc = RpcConnection(
        reader,
        peer,  # type: ignore[arg-type]  # the writer's write and drain are all it uses
        on_notification=notes.handle,
        on_request=lambda *_: None,
        on_malformed=notes.malformed,
    )
    outlet.clock = rpc
    rpc.start()
    try:
        await turns.open(rpc, pid=None)
        result = await turns.run(rpc, "hi", continuation=False)
    finally:
        await rpc.aclose()

    assert result.status == TurnStatus.COMPLETED and result.turn_id == "tu-1"
    assert [m.get("method") for m in peer.sent] == ["thread/start", "turn/start"]
    kinds = [e.kind for e in host.events]
    assert kinds == [
        EventKind.SESSION_STARTED,
        EventKind.TURN_STARTED,
        EventKind.MESSAGE_DELTA,
        EventKind.TURN_COMPLETED,
    ]
    (delta,) = host.of_kind(EventKind.MESSAGE_DELTA)  # the sub-agent's is not this thread's
    assert delta.message == "Hel" and delta.session_id == "th-1-tu-1"
    assert delta.at == datetime.fromtimestamp(STAMP / 1000, tz=UTC)
