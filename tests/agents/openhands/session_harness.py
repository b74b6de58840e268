"""Drive an :class:`OpenHandsSession` by hand: a recording REST stand-in and wire frames
fed straight into the session, as the event socket would deliver them.

``frames/*.json`` are frames the real agent-server 1.58.2 sent on ``WS /sockets/events``
while the fake model failed (trimmed: the system prompt, tool list and the ``full_state``
agent config are cut; every other field is as recorded):

* ``model_http_500.json`` - the model answered HTTP 500 (``fail_next(500)``);
* ``model_http_401.json`` - the model answered HTTP 401;
* ``max_iterations.json`` - a conversation created with ``max_iterations: 1`` ran a command;
* ``client_tool_call.json`` - the model called the client tool ``symphony_set_issue_state``
  ``{"state": "Done"}`` (``NeverConfirm``; the system prompt event is left out).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import TurnResult
from symphony_tui.agents.openhands.session import OpenHandsSession
from symphony_tui_testing.session_host import RecordingSessionHost

FRAMES = Path(__file__).parent / "frames"
CID = "3a5e2c4e-5b0f-4a63-9d61-8b1f3c0c2a10"


def frames(name: str) -> list[dict[str, Any]]:
    return json.loads((FRAMES / f"{name}.json").read_text())


class RecordingClient:
    """The REST calls a session makes, recorded; nothing is sent anywhere."""

    base_url = "http://127.0.0.1:9"
    api_key = None

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.sent = asyncio.Event()

    async def send_message(self, conversation_id: str, text: str, *, run: bool = True) -> None:
        self.messages.append(text)
        self.sent.set()

    async def respond_to_confirmation(self, *_a: Any, **_k: Any) -> None:
        pass

    async def interrupt(self, _cid: str) -> None:
        pass

    async def set_confirmation_policy(self, _cid: str, _kind: str) -> None:
        pass


def make_session(
    host: RecordingSessionHost, *, cause_grace_s: float = 30.0
) -> tuple[OpenHandsSession, RecordingClient]:
    client = RecordingClient()
    session = OpenHandsSession(
        host,
        client,  # type: ignore[arg-type]
        CID,
        ws_auth="none",
        cause_grace_s=cause_grace_s,
    )
    return session, client


async def deliver(session: OpenHandsSession, events: list[dict[str, Any]]) -> None:
    """Hand ``events`` to the session one by one, letting the turn loop run after each
    (the socket reader yields to the loop between frames in the same way)."""
    for event in events:
        session._on_event(event, False)
        for _ in range(3):
            await asyncio.sleep(0)


async def start_turn(
    session: OpenHandsSession, client: RecordingClient, prompt: str = "hello"
) -> asyncio.Task[TurnResult]:
    """Start a turn and return once its message is sent."""
    client.sent.clear()
    turn = asyncio.create_task(session.run_turn(prompt))
    await client.sent.wait()
    return turn


async def run_turn(
    session: OpenHandsSession,
    client: RecordingClient,
    events: list[dict[str, Any]],
    prompt: str = "hello",
) -> TurnResult:
    """One whole turn: send ``prompt``, deliver ``events``, return how the turn ended."""
    turn = await start_turn(session, client, prompt)
    await deliver(session, events)
    return await asyncio.wait_for(turn, 5)
