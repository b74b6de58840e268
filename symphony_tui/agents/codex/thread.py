"""Thread start and resume for a codex session (spec §10; docs/protocols.md "Handshake",
"Resume").

``thread/resume`` of the thread id the host remembers, else (or when resume is refused)
``thread/start`` with the host's dynamic tools; either way a SESSION_STARTED event.
"""

from __future__ import annotations

from typing import Any

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.core import SessionCore
from symphony_tui.agents.codex.rpc import RpcError
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import Notice, SessionStarted


class ThreadStart(SessionCore):
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
