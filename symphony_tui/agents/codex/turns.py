"""The turn lifecycle of a codex session (spec §10, §10.6; docs/protocols.md
"Interrupts and missing turn ends").

``turn/start`` -> TURN_STARTED once the turn id is known -> ``turn/completed`` ends it.
When ``turn/completed`` never comes, the turn still ends: after an idle
``thread/status/changed`` or an acknowledged ``turn/interrupt``, the ``thread/read``
fallback reads the persisted turn status; ``turn_timeout_ms`` of silence interrupts and
fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from symphony_tui.agents.base import AgentError, TurnResult, TurnStatus
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.core import SessionCore, Turn
from symphony_tui.agents.codex.rpc import RpcConnection, RpcError
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import TurnEnded, TurnStarted

IDLE_GRACE_S = 1.0  # after `thread/status/changed idle` without `turn/completed`
INTERRUPT_GRACE_S = 2.0  # after `turn/interrupt` was acknowledged

END_STATUS = {
    "completed": TurnStatus.COMPLETED,
    "interrupted": TurnStatus.INTERRUPTED,
    "failed": TurnStatus.FAILED,
}


class TurnLifecycle(SessionCore):
    """Runs, interrupts and ends turns; resolves each turn's waiter exactly once."""

    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        """Run one turn; returns how it ended. Raises ``AgentError`` when the process dies
        (``process_exited``) or a request gets no answer (``read_timeout``)."""
        rpc = self._live_rpc()
        if self._turn is not None and not self._turn.done.done():
            raise AgentError("protocol_error", "a turn is already running on this session")
        turn = Turn(done=asyncio.get_running_loop().create_future(), continuation=continuation)
        self._turn = turn
        params: dict[str, Any] = {
            "threadId": self._thread_id,
            "input": [{"type": "text", "text": prompt}],
            "cwd": str(self._host.workspace),
            "approvalPolicy": self._cfg.approval_policy,
        }
        if self._cfg.turn_sandbox_policy:
            params["sandboxPolicy"] = self._cfg.turn_sandbox_policy
        if self._cfg.model:
            params["model"] = self._cfg.model
        mode = self._cfg.collaboration_mode
        if mode and self._model:
            # null developer_instructions = codex's built-in instructions for the mode
            params["collaborationMode"] = {
                "mode": mode,
                "settings": {"model": self._model, "developer_instructions": None},
            }
        try:
            res = await rpc.request("turn/start", params, self._timeout_s)
        except RpcError as e:
            self._turn = None
            return TurnResult(TurnStatus.FAILED, error=f"turn/start rejected: {e.message}")
        except BaseException:
            self._turn = None
            raise
        tid = (res or {}).get("turn", {}).get("id") if isinstance(res, dict) else None
        if tid and turn.turn_id is None:
            self._set_turn_id(turn, str(tid))
        return await self._await_turn(turn, rpc)

    async def follow_turn(self) -> TurnResult:
        """Wait for the end of the turn found in flight when the session re-attached to a
        detached app-server (``thread.ThreadStart._resume_detached``), as
        :meth:`run_turn` waits for one it started. Raises ``AgentError`` like it."""
        turn = self._turn
        if turn is None:
            raise AgentError("protocol_error", "no turn in flight to follow")
        if turn.done.done():
            return turn.done.result()
        return await self._await_turn(turn, self._live_rpc())

    async def _await_turn(self, turn: Turn, rpc: RpcConnection) -> TurnResult:
        """Wait for the turn's end. ``turn_timeout_ms`` is the longest silence (§10.6):
        every output of the app-server (:attr:`RpcConnection.last_output`) starts it again,
        so a turn that keeps streaming is never cut short by it."""
        limit = self._cfg.turn_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            while not (turn.done.done() or rpc.closed.done()):
                remaining = limit - (loop.time() - max(started, rpc.last_output))
                if remaining <= 0:
                    break
                await asyncio.wait(
                    {turn.done, rpc.closed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
        except asyncio.CancelledError:
            self._abandon(turn, "cancelled")
            raise
        if turn.done.done():
            return turn.done.result()
        if rpc.closed.done():
            reason = rpc.closed.result()
            self._end_turn(turn, TurnStatus.FAILED, f"process_exited: {reason}")
            raise AgentError("process_exited", f"mid-turn: {reason}")
        # turn_timeout_ms (spec §10.6): stop the turn and report it failed; the
        # interrupted end that codex then sends is reported as this failure.
        turn.timeout_error = (
            f"turn_timeout: no output from the app-server for {self._cfg.turn_timeout_ms} ms"
        )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.interrupt(), self._timeout_s + INTERRUPT_GRACE_S)
        self._end_turn(turn, TurnStatus.FAILED, turn.timeout_error)
        return turn.done.result()

    def _set_turn_id(self, turn: Turn, turn_id: str) -> None:
        turn.turn_id = turn_id
        turn.id_known.set()
        self._session_id = f"{self._thread_id}-{turn_id}"
        if self._agent is not None:  # a restarted scheduler re-attaches to this turn
            self._host.record_session(turn_id=turn_id)
        if not turn.started_emitted:
            turn.started_emitted = True
            self._emit(
                AgentEvent(
                    kind=EventKind.TURN_STARTED,
                    message=f"turn {turn_id} started",
                    payload=TurnStarted(
                        turn_id=turn_id, thread_id=self._thread_id, continuation=turn.continuation
                    ),
                )
            )

    def _end_turn(self, turn: Turn, status: TurnStatus, error: str | None) -> None:
        """Close what the server left open, emit the end event, resolve the waiter."""
        if turn.done.done():
            return
        if turn.timeout_error and status == TurnStatus.INTERRUPTED:
            status, error = TurnStatus.FAILED, turn.timeout_error
        close_as = "completed" if status == TurnStatus.COMPLETED else status.value
        for item in list(turn.open_items.values()):
            self._emit(ev.item_closed_event(item, close_as))
        turn.open_items.clear()
        self._drop_serving()
        end = TurnEnded.of(status.value, error, turn_id=turn.turn_id)
        msg = f"turn {turn.turn_id} {status.value}" + (f": {error}" if error else "")
        self._emit(AgentEvent(kind=EventKind(end.kind_name), message=msg, payload=end))
        turn.done.set_result(TurnResult(status, turn.turn_id, error))

    def _abandon(self, turn: Turn, why: str) -> None:
        self._flush_held()  # the turn's streamed text before its end
        if not turn.done.done():
            turn.done.set_result(TurnResult(TurnStatus.FAILED, turn.turn_id, why))
        self._drop_serving()

    def _drop_serving(self) -> None:
        """Withdraw pending server requests: the host stops waiting for an answer."""
        for task in list(self._serving.values()):
            task.cancel()
        self._serving.clear()

    async def interrupt(self) -> None:
        """``turn/interrupt`` for the turn in flight; bounded by ``read_timeout_ms`` plus a
        short grace. Idempotent: concurrent calls share one attempt; no-op when idle."""
        turn = self._turn
        if turn is None or turn.done.done() or self._rpc is None or self._rpc.is_closed:
            return
        if self._interrupting is None or self._interrupting.done():
            self._interrupting = asyncio.create_task(self._interrupt(turn))
        await asyncio.shield(self._interrupting)

    async def _interrupt(self, turn: Turn) -> None:
        assert self._rpc is not None
        try:
            await asyncio.wait_for(turn.id_known.wait(), self._timeout_s)
            await self._rpc.request(
                "turn/interrupt",
                {"threadId": self._thread_id, "turnId": turn.turn_id},
                self._timeout_s,
            )
        except (AgentError, RpcError, TimeoutError) as e:
            if turn.done.done():
                return
            self._emit(AgentEvent(kind=EventKind.WARNING, message=f"turn/interrupt failed: {e}"))
        # A repeated interrupt has been seen to hang: do not wait on codex forever.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(turn.done), INTERRUPT_GRACE_S)
        if not turn.done.done():
            await self._check_persisted(turn)
        if not turn.done.done():
            self._end_turn(turn, TurnStatus.INTERRUPTED, "interrupt acknowledged; no turn end")

    async def _check_persisted(self, turn: Turn) -> None:
        """``thread/read`` fallback for a missing ``turn/completed`` (docs/protocols.md)."""
        if self._rpc is None or turn.turn_id is None or turn.done.done():
            return
        try:
            res = await self._rpc.request(
                "thread/read",
                {"threadId": self._thread_id, "includeTurns": True},
                self._timeout_s,
            )
        except (AgentError, RpcError):
            return
        for t in (res or {}).get("thread", {}).get("turns") or []:
            if isinstance(t, dict) and t.get("id") == turn.turn_id:
                status = END_STATUS.get(str(t.get("status")))
                if status is not None and not turn.done.done():
                    err = ev.error_text(t.get("error")) if t.get("error") else None
                    self._end_turn(turn, status, err)
                return

    async def _idle_fallback(self, turn: Turn) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(turn.done), IDLE_GRACE_S)
        if not turn.done.done():
            await self._check_persisted(turn)

    def _on_turn_completed(self, p: dict[str, Any]) -> None:
        turn = self._turn
        t = p.get("turn") or {}
        if turn is None or turn.done.done():
            return
        tid = t.get("id")
        if turn.turn_id is not None and tid and tid != turn.turn_id:
            return  # a late end of an earlier turn
        if turn.turn_id is None and tid:
            self._set_turn_id(turn, str(tid))
        status = END_STATUS.get(str(t.get("status")), TurnStatus.FAILED)
        error = None
        if status == TurnStatus.FAILED:
            error = ev.error_text(t.get("error")) if t.get("error") else f"turn {t.get('status')}"
        elif status == TurnStatus.INTERRUPTED:
            error = "interrupted"
        self._end_turn(turn, status, error)
