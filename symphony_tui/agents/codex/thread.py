"""Thread start and resume for a codex session (spec §10; docs/protocols.md "Handshake",
"Resume").

``thread/resume`` of the thread id the host remembers, else (or when resume is refused)
``thread/start`` with the host's dynamic tools; either way a SESSION_STARTED event.

Re-attaching to a detached app-server an earlier scheduler left running
(:meth:`ThreadStart._resume_detached`): the recorded turn is made the session's turn in
flight before ``thread/resume`` (so what codex sends from then on, a re-sent pending
approval or ``turn/completed``, lands on it), then ``thread/turns/list`` says what happened
while nobody was attached: the turn's items are replayed as ``item/completed`` (one still
running as ``item/started``) and a turn that ended meanwhile ends here with its persisted
status.
"""

from __future__ import annotations

import asyncio
from typing import Any

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.core import Turn
from symphony_tui.agents.codex.rpc import RpcError
from symphony_tui.agents.codex.turns import END_STATUS, TurnLifecycle
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import Notice, SessionStarted, TurnStarted

#: Turns asked of ``thread/turns/list`` when re-attaching (newest first).
TURNS_LISTED = 5


class ThreadStart(TurnLifecycle):
    """Opens (or resumes) the session's thread once the handshake is done."""

    async def _start_thread(self) -> dict[str, Any]:
        assert self._rpc is not None
        common: dict[str, Any] = {
            "cwd": str(self._host.workspace),
            "approvalPolicy": self._cfg.approval_policy,
            "sandbox": self._cfg.thread_sandbox,
        }
        if self._cfg.model:
            common["model"] = self._cfg.model
        previous = self._host.resume.get("thread_id")
        if previous:
            try:
                res = await self._rpc.request(
                    "thread/resume",
                    {"threadId": str(previous), **common, "excludeTurns": True},
                    self._timeout_s,
                )
                self._emit_session(res["thread"], resumed=True)
                self._note_model(res)
                return res["thread"]
            except (RpcError, KeyError, TypeError) as e:
                self._emit(
                    AgentEvent(
                        kind=EventKind.WARNING,
                        message=f"cannot resume thread {previous}; starting a new one ({e})",
                        payload=Notice(notice="resume_failed", thread_id=str(previous)),
                    )
                )
        tools = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema,
            }
            for t in self._host.tools
        ]
        params = dict(common)
        if tools:
            params["dynamicTools"] = tools
        try:
            res = await self._rpc.request("thread/start", params, self._timeout_s)
            thread = res["thread"]
            self._note_model(res)
        except RpcError as e:
            raise AgentError("handshake_failed", f"thread/start rejected: {e.message}") from None
        except (KeyError, TypeError) as e:
            raise AgentError("protocol_error", f"thread/start result without thread: {e}") from e
        self._emit_session(thread, resumed=False)
        return thread

    def _note_model(self, res: Any) -> None:
        if self._model is None and isinstance(res, dict) and isinstance(res.get("model"), str):
            self._model = res["model"]

    def _emit_session(self, thread: dict[str, Any], *, resumed: bool) -> None:
        tid = str(thread.get("id"))
        verb = "resumed" if resumed else "started"
        self._emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=f"codex thread {tid} {verb} (pid {self.pid})",
                payload=SessionStarted(thread_id=tid, resumed=resumed, pid=self.pid),
            )
        )

    async def _resume_detached(self) -> None:
        """Re-attach to the recorded thread and turn of a detached app-server (see the
        module docstring). Raises ``AgentError`` / ``RpcError``."""
        assert self._rpc is not None
        resume = self._host.resume
        thread_id = resume.get("thread_id")
        if not thread_id:
            raise AgentError("reattach_failed", "the manifest records no thread id")
        self._thread_id = str(thread_id)
        recorded = resume.get("turn_id")
        turn = Turn(done=asyncio.get_running_loop().create_future(), started_emitted=True)
        if recorded:
            turn.turn_id = str(recorded)
            turn.id_known.set()
            self._session_id = f"{self._thread_id}-{recorded}"
        self._turn = turn
        res = await self._rpc.request(
            "thread/resume", {"threadId": self._thread_id, "excludeTurns": True}, self._timeout_s
        )
        thread = res["thread"] if isinstance(res, dict) else {}
        self._note_model(res)
        status = thread.get("status") if isinstance(thread, dict) else None
        flags = (status or {}).get("activeFlags") if isinstance(status, dict) else None
        listed = await self._rpc.request(
            "thread/turns/list",
            {"threadId": self._thread_id, "limit": TURNS_LISTED, "itemsView": "full"},
            self._timeout_s,
        )
        turns = [t for t in (listed or {}).get("data") or [] if isinstance(t, dict)]
        found = next((t for t in turns if recorded and t.get("id") == recorded), None)
        if found is None and turns and turns[0].get("status") == "inProgress":
            found = turns[0]  # newest first: started, its id not recorded yet
        if found is None:
            # no turn of this attempt to follow: the attempt is retried, which resumes
            # the thread and starts one
            raise AgentError("reattach_failed", f"thread {self._thread_id} has no turn in flight")
        if turn.turn_id is None:
            turn.turn_id = str(found.get("id"))
            turn.id_known.set()
            self._session_id = f"{self._thread_id}-{turn.turn_id}"
        self._emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=(
                    f"codex thread {self._thread_id} re-attached (pid {self.pid}, "
                    f"turn {turn.turn_id} {found.get('status')}"
                    + (f", {', '.join(map(str, flags))}" if flags else "")
                    + ")"
                ),
                payload=SessionStarted(
                    thread_id=self._thread_id, resumed=True, pid=self.pid, state="re-attached"
                ),
            )
        )
        self._host.record_session(thread_id=self._thread_id, turn_id=turn.turn_id)
        self._emit(
            AgentEvent(
                kind=EventKind.TURN_STARTED,
                message=f"turn {turn.turn_id} adopted after a scheduler restart",
                payload=TurnStarted(turn_id=turn.turn_id, thread_id=self._thread_id, adopted=True),
            )
        )
        items = [i for i in found.get("items") or [] if isinstance(i, dict)]
        for item in items:
            if item.get("type") != "userMessage" and not turn.done.done():
                # one still running (a command waiting for its approval) is open, not done
                running = item.get("status") in ("inProgress", "pending")
                self._on_notification(
                    "item/started" if running else "item/completed",
                    {"threadId": self._thread_id, "turnId": turn.turn_id, "item": item},
                )
        ended = END_STATUS.get(str(found.get("status")))
        if ended is not None and not turn.done.done():
            error = None
            if ended is not TurnStatus.COMPLETED:
                error = ev.error_text(found.get("error")) if found.get("error") else ended.value
            self._end_turn(turn, ended, error)
