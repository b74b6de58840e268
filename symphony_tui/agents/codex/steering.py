"""The operator's messages into a codex turn in flight (``turn/steer``; docs/protocols.md
"Steering", "Approvals").

Two kinds: a message the operator sends to the running turn (:meth:`Steering.steer`), and
the note that came with the operator's denial of an approval, delivered just before the
request is answered (:meth:`Steering.deliver`, called by ``ServerRequests``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.rpc import RpcConnection, RpcError
from symphony_tui.agents.codex.turns import TurnTracker
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import NoteDelivered
from symphony_tui.text import cap


@dataclass(frozen=True)
class OperatorNote:
    """A message to deliver to the model in the running turn (``turn_id``: codex's, if known)."""

    turn_id: str | None
    text: str


class Steering:
    """Sends ``turn/steer`` for the turn in flight of ``turns``; what became of an
    operator's note is reported through ``outlet``. ``timeout_s``: how long a request (and
    the wait for the turn's id) may take."""

    def __init__(self, turns: TurnTracker, outlet: EventOutlet, timeout_s: float) -> None:
        self._turns = turns
        self._out = outlet
        self._timeout_s = timeout_s

    async def steer(self, text: str) -> bool:
        """The operator's own message into the turn in flight. False when no turn runs, or
        it ended before codex took the message; raises :class:`AgentError` when codex
        refused it for another reason or the app-server is gone (``process_exited``)."""
        turn = self._turns.turn
        if turn is None or turn.done.done():
            return False
        rpc = turn.rpc
        if rpc.is_closed:
            raise AgentError("process_exited", rpc.close_reason())
        try:
            await asyncio.wait_for(turn.id_known.wait(), self._timeout_s)
        except TimeoutError:
            return False
        params = {
            "threadId": self._turns.thread_id,
            "expectedTurnId": turn.turn_id,
            "input": [{"type": "text", "text": text}],
        }
        try:
            await rpc.request("turn/steer", params, self._timeout_s)
        except RpcError as e:
            if turn.done.done():
                return False  # the turn ended meanwhile: the caller keeps it for the next
            raise AgentError("protocol_error", f"turn/steer refused: {e.message}") from e
        return True

    async def deliver(self, rpc: RpcConnection, note: OperatorNote) -> None:
        """Deliver an operator's note to the model in the running turn, on ``rpc``.

        Codex adds steered input to the turn's next model request, so the model reads why its
        request was declined. A turn that already ended cannot be steered: that is a warning.
        """
        turn = self._turns.turn
        turn_id = note.turn_id or (turn.turn_id if turn is not None else None)
        if turn is None or turn.done.done() or turn_id is None:
            self._out.emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message="operator message not delivered: the turn had already ended",
                )
            )
            return
        params = {
            "threadId": self._turns.thread_id,
            "expectedTurnId": turn_id,
            "input": [{"type": "text", "text": note.text}],
        }
        try:
            await rpc.request("turn/steer", params, self._timeout_s)
        except (RpcError, AgentError) as e:
            self._out.emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=cap(f"operator message not delivered: {e.message}", 500),
                )
            )
            return
        self._out.emit(
            AgentEvent(
                kind=EventKind.NOTIFICATION,
                message=cap(f"sent to the agent: {note.text}", 2000),
                payload=NoteDelivered(turn_id=turn_id),
            )
        )
