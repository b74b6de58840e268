"""Server requests and operator notes of a codex session (docs/protocols.md "Approvals").

Each server request (approval, user input, dynamic tool call) is served in its own task by
:class:`~symphony_tui.agents.codex.server_requests.ServerRequests`; an operator's note
attached to the answer is delivered first with ``turn/steer``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.core import SessionCore
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection, RpcError
from symphony_tui.agents.codex.server_requests import METHOD_NOT_FOUND, OperatorNote, Unsupported
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import NoteDelivered


class RequestServing(SessionCore):
    """Answers the server's requests and steers operator notes into the running turn."""

    def _on_request(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        # What the agent streamed before asking goes first (held deltas included).
        self._flush_held()
        # Served in a task whose first step runs now: an approval or a question is with
        # the host (the operator sees it) before the reader goes on, not a turn later.
        task = self._spawn_now(self._serve(rid, method, params))
        if not task.done():
            self._serving[rid] = task

    async def _serve(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        rpc = self._rpc
        assert rpc is not None
        try:
            try:
                result = await self._requests.handle(rid, method, params)
            except Unsupported:
                await rpc.respond_error(rid, METHOD_NOT_FOUND, f"method not supported: {method}")
                return
            except Exception as e:
                await rpc.respond_error(rid, -32603, f"client error: {e}")
                return
            note = self._requests.take_note(rid)
            if note is not None:
                # Steer first, while the turn still waits on this request: the note is then
                # in the turn before the model's next step, whatever the server does next.
                await self._steer(rpc, note)
            await rpc.respond(rid, result)
        except AgentError:
            pass  # the process is gone; nothing left to answer
        finally:
            self._serving.pop(rid, None)
            self._requests.take_note(rid)  # not delivered when cancelled: do not keep it

    async def steer(self, text: str) -> bool:
        """The operator's own message into the turn in flight (``turn/steer``, as the
        notes above). False when no turn runs, or it ended before codex took the message;
        raises :class:`AgentError` when codex refused it for another reason."""
        turn = self._turn
        if turn is None or turn.done.done():
            return False
        rpc = self._live_rpc()
        try:
            await asyncio.wait_for(turn.id_known.wait(), self._timeout_s)
        except TimeoutError:
            return False
        params = {
            "threadId": self._thread_id,
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

    async def _steer(self, rpc: RpcConnection, note: OperatorNote) -> None:
        """Deliver an operator's message to the model in the running turn (``turn/steer``).

        Codex adds steered input to the turn's next model request, so the model reads why its
        request was declined. A turn that already ended cannot be steered: that is a warning.
        """
        turn = self._turn
        turn_id = note.turn_id or (turn.turn_id if turn is not None else None)
        if turn is None or turn.done.done() or turn_id is None:
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message="operator message not delivered: the turn had already ended",
                )
            )
            return
        params = {
            "threadId": self._thread_id,
            "expectedTurnId": turn_id,
            "input": [{"type": "text", "text": note.text}],
        }
        try:
            await rpc.request("turn/steer", params, self._timeout_s)
        except (RpcError, AgentError) as e:
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=ev.cap(f"operator message not delivered: {e.message}", 500),
                )
            )
            return
        self._emit(
            AgentEvent(
                kind=EventKind.NOTIFICATION,
                message=ev.cap(f"sent to the agent: {note.text}", 2000),
                payload=NoteDelivered(turn_id=turn_id),
            )
        )
