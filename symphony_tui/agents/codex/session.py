"""One codex app-server process driving one thread for one issue (spec §10; docs/protocols.md).

Lifecycle: :meth:`CodexSession.open` launches ``bash -lc <codex.command>`` in the workspace,
does the handshake (``initialize`` -> ``initialized`` -> ``thread/resume`` or
``thread/start``) and records the thread id with the host. :meth:`run_turn` sends
``turn/start`` and turns notifications into events until ``turn/completed``.
:meth:`close` kills the whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from symphony_tui import __version__
from symphony_tui.agents.base import AgentError, SessionHost, TurnResult, TurnStatus
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.process import StderrTail, kill_group, launch
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection, RpcError
from symphony_tui.agents.codex.server_requests import (
    METHOD_NOT_FOUND,
    OperatorNote,
    ServerRequests,
    Unsupported,
)
from symphony_tui.config.settings import CodexSettings
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import (
    AgentTrouble,
    ItemNote,
    NoteDelivered,
    Notice,
    RateLimitReport,
    SessionStarted,
    TokenReport,
    TurnDiff,
    TurnEnded,
    TurnStarted,
)

CLIENT_NAME = "symphony-tui"
CLIENT_VERSION = __version__
IDLE_GRACE_S = 1.0  # after `thread/status/changed idle` without `turn/completed`
INTERRUPT_GRACE_S = 2.0  # after `turn/interrupt` was acknowledged

_END_STATUS = {
    "completed": TurnStatus.COMPLETED,
    "interrupted": TurnStatus.INTERRUPTED,
    "failed": TurnStatus.FAILED,
}
_WARNING_METHODS = ("warning", "configWarning", "deprecationNotice", "guardianWarning")


@dataclass
class _Turn:
    """The turn in flight: its id once known, open items, and how it ended."""

    done: asyncio.Future[TurnResult]
    turn_id: str | None = None
    started_emitted: bool = False
    open_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    id_known: asyncio.Event = field(default_factory=asyncio.Event)
    timeout_error: str | None = None  # set when turn_timeout_ms expired
    continuation: bool = False


class CodexSession:
    """An :class:`~symphony_tui.agents.base.AgentSession` over the codex app-server.

    ``sent``: optional list that records every JSON-RPC message written (tests validate
    them against the binary's schema).
    """

    def __init__(
        self,
        host: SessionHost,
        settings: CodexSettings,
        env: Mapping[str, str],
        *,
        sent: list[dict[str, Any]] | None = None,
        on_close: Callable[[CodexSession], None] | None = None,
    ) -> None:
        self._host = host
        self._on_close = on_close
        self._cfg = settings
        self._env = dict(env)
        self._sent = sent
        self._timeout_s = settings.read_timeout_ms / 1000
        self._proc: asyncio.subprocess.Process | None = None
        self._rpc: RpcConnection | None = None
        self._stderr = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        self._thread_id: str | None = None
        self._model: str | None = settings.model  # the thread's model, for collaborationMode
        self._session_id: str | None = None
        self._turn: _Turn | None = None
        self._early_tokens: dict[str, Any] | None = None  # totals seen before the thread id
        self._requests = ServerRequests(host, self._files_of)
        self._serving: dict[RequestId, asyncio.Task[None]] = {}
        self._file_items: dict[str, tuple[str, ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._interrupting: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ facts
    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr.lines)

    # ------------------------------------------------------------------ start
    async def open(self) -> None:
        """Launch and handshake. Raises ``AgentError`` (launch_failed, read_timeout,
        handshake_failed, process_exited); the process is killed on failure."""
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    async def _open(self) -> None:
        cmd = self._cfg.command
        proc = await launch(cmd, self._host.workspace, self._env)
        self._proc = proc
        assert proc.stdout and proc.stdin and proc.stderr
        self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))
        self._rpc = RpcConnection(
            proc.stdout,
            proc.stdin,  # type: ignore[arg-type]  # a StreamWriter
            on_notification=self._on_notification,
            on_request=self._on_request,
            on_malformed=self._on_malformed,
            on_eof=self._describe_exit,
            sent=self._sent,
        )
        self._rpc.start()
        try:
            await self._rpc.request(
                "initialize",
                {
                    "clientInfo": {
                        "name": CLIENT_NAME,
                        "title": "Symphony TUI",
                        "version": CLIENT_VERSION,
                    },
                    "capabilities": {"experimentalApi": True},
                },
                self._timeout_s,
            )
        except AgentError as e:
            if e.code == "process_exited":
                # A command that is not found exits before (or while) we write the first
                # request: the write fails with a pipe error that says nothing. The exit code
                # and stderr tail are what the operator needs.
                why = e.message if self._rpc.is_closed else await self._describe_exit()
                raise AgentError("launch_failed", f"{cmd!r}: {why}") from None
            raise
        except RpcError as e:
            raise AgentError("handshake_failed", f"initialize rejected: {e.message}") from None
        await self._rpc.notify("initialized")
        thread = await self._start_thread()
        self._thread_id = str(thread["id"])
        early, self._early_tokens = self._early_tokens, None
        if early is not None and early.get("threadId") in (None, self._thread_id):
            self._on_tokens(early)
        self._host.record_session(thread_id=self._thread_id, backend="codex")

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

    async def _describe_exit(self) -> str:
        """Called at stdout EOF: the exit code and the stderr tail, as one line."""
        code: int | None = None
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                code = await asyncio.wait_for(self._proc.wait(), 2.0)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        msg = "codex app-server exited" + (f" with code {code}" if code is not None else "")
        tail = self._stderr.summary()
        return f"{msg}: {tail}" if tail else msg

    # ------------------------------------------------------------------ turns
    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        """Run one turn; returns how it ended. Raises ``AgentError`` when the process dies
        (``process_exited``) or a request gets no answer (``read_timeout``)."""
        rpc = self._live_rpc()
        if self._turn is not None and not self._turn.done.done():
            raise AgentError("protocol_error", "a turn is already running on this session")
        turn = _Turn(done=asyncio.get_running_loop().create_future(), continuation=continuation)
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

    async def _await_turn(self, turn: _Turn, rpc: RpcConnection) -> TurnResult:
        limit = self._cfg.turn_timeout_ms / 1000
        try:
            await asyncio.wait(
                {turn.done, rpc.closed}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
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
            f"turn_timeout: no turn/completed within {self._cfg.turn_timeout_ms} ms"
        )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.interrupt(), self._timeout_s + INTERRUPT_GRACE_S)
        self._end_turn(turn, TurnStatus.FAILED, turn.timeout_error)
        return turn.done.result()

    def _set_turn_id(self, turn: _Turn, turn_id: str) -> None:
        turn.turn_id = turn_id
        turn.id_known.set()
        self._session_id = f"{self._thread_id}-{turn_id}"
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

    def _end_turn(self, turn: _Turn, status: TurnStatus, error: str | None) -> None:
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

    def _abandon(self, turn: _Turn, why: str) -> None:
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

    async def _interrupt(self, turn: _Turn) -> None:
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

    async def _check_persisted(self, turn: _Turn) -> None:
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
                status = _END_STATUS.get(str(t.get("status")))
                if status is not None and not turn.done.done():
                    err = ev.error_text(t.get("error")) if t.get("error") else None
                    self._end_turn(turn, status, err)
                return

    async def _idle_fallback(self, turn: _Turn) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(turn.done), IDLE_GRACE_S)
        if not turn.done.done():
            await self._check_persisted(turn)

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        """Kill the process group, stop reading, release pending work. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        turn = self._turn
        if turn is not None:
            self._abandon(turn, "session closed")
        for t in list(self._tasks):
            t.cancel()
        if self._proc is not None:
            await kill_group(self._proc)
        if self._rpc is not None:
            await self._rpc.aclose()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task

    # ------------------------------------------------------------------ wire in
    def _live_rpc(self) -> RpcConnection:
        if self._rpc is None or self._closed:
            raise AgentError("process_exited", "session is closed")
        if self._rpc.is_closed:
            raise AgentError("process_exited", self._rpc.close_reason())
        return self._rpc

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _emit(self, event: AgentEvent) -> None:
        """Stamp the session id and the server's time on ``event`` and hand it to the host.

        Every event passed here was built by this session for this call and nobody else
        holds it yet, so the stamps are written into it before it is published instead of
        copying it (a copy per agent line was a seventh of the scheduler's CPU under a
        flood; issue 11): the event is still built once and immutable once emitted."""
        update: dict[str, Any] = {}
        if self._session_id and event.session_id is None:
            update["session_id"] = self._session_id
        emitted = self._rpc.emitted_at if self._rpc is not None else None
        if event.at is None and emitted is not None:
            update["at"] = emitted  # the server's clock for what it notified
        if update:
            _stamp_unpublished(event, update)
        with contextlib.suppress(Exception):
            self._host.emit(event)

    def _on_malformed(self, reason: str) -> None:
        self._emit(AgentEvent(kind=EventKind.MALFORMED, message=ev.cap(reason, 500)))

    def _files_of(self, item_id: str) -> tuple[str, ...]:
        return self._file_items.get(item_id, ())

    def _on_request(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        task = self._spawn(self._serve(rid, method, params))
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

    def _on_notification(self, method: str, p: dict[str, Any]) -> None:
        tid = p.get("threadId")
        if tid is not None and self._thread_id is not None and tid != self._thread_id:
            return  # another thread (a sub-agent): not this session's story
        turn = self._turn
        if method == "turn/started":
            t = p.get("turn") or {}
            if turn is not None and turn.turn_id is None and t.get("id"):
                self._set_turn_id(turn, str(t["id"]))
        elif method == "item/started":
            item = p.get("item") or {}
            if item.get("type") == "fileChange":
                paths = tuple(str(c.get("path")) for c in item.get("changes") or [])
                self._file_items[str(item.get("id"))] = paths
            if turn is not None and item.get("id") and item.get("type") != "userMessage":
                turn.open_items[str(item["id"])] = item
            self._emit_opt(ev.item_event(item, "started"))
        elif method == "item/completed":
            item = p.get("item") or {}
            if turn is not None:
                turn.open_items.pop(str(item.get("id")), None)
            self._emit_opt(ev.item_event(item, "completed"))
        elif method == "item/agentMessage/delta":
            self._emit(
                AgentEvent(
                    kind=EventKind.MESSAGE_DELTA,
                    message=ev.cap(p.get("delta")),
                    payload=ItemNote(item_id=_opt_str(p.get("itemId"))),
                )
            )
        elif method in ("item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
            # A MESSAGE_DELTA flagged ``reasoning``: keeps a long think from looking
            # stalled and lets the console show it; the completed item is REASONING.
            self._emit(
                AgentEvent(
                    kind=EventKind.MESSAGE_DELTA,
                    message=ev.cap(p.get("delta")),
                    payload=ItemNote(
                        item_id=_opt_str(p.get("itemId")),
                        reasoning=True,
                        summary=method.endswith("summaryTextDelta"),
                    ),
                )
            )
        elif method == "item/commandExecution/outputDelta":
            self._emit(
                AgentEvent(
                    kind=EventKind.COMMAND_OUTPUT,
                    message=ev.cap(p.get("delta")),
                    payload=ItemNote(item_id=_opt_str(p.get("itemId"))),
                )
            )
        elif method == "turn/plan/updated":
            self._emit(ev.plan_event(p))
        elif method == "turn/diff/updated":
            diff = ev.cap(p.get("diff"))
            self._emit(
                AgentEvent(
                    kind=EventKind.NOTIFICATION, message="diff updated", payload=TurnDiff(diff=diff)
                )
            )
        elif method == "thread/tokenUsage/updated":
            self._on_tokens(p)
        elif method == "account/rateLimits/updated":
            limits = ev.rate_limits(p.get("rateLimits") if isinstance(p, dict) else None)
            self._emit(
                AgentEvent(
                    kind=EventKind.RATE_LIMITS,
                    message="rate limits updated",
                    payload=RateLimitReport(rate_limits=limits),
                )
            )
        elif method == "error":
            retry = bool(p.get("willRetry"))
            self._emit(
                AgentEvent(
                    kind=EventKind.ERROR,
                    message=ev.error_text(p.get("error")),
                    payload=AgentTrouble(will_retry=retry, turn_id=_opt_str(p.get("turnId"))),
                )
            )
        elif method in _WARNING_METHODS:
            text = p.get("message") or p.get("summary") or p.get("details") or method
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=ev.cap(text, 2000),
                    payload=Notice(notice=method),
                )
            )
        elif method == "turn/completed":
            self._on_turn_completed(p)
        elif method == "thread/status/changed":
            status = p.get("status") or {}
            if status.get("type") == "idle" and turn is not None and not turn.done.done():
                self._spawn(self._idle_fallback(turn))
        elif method == "serverRequest/resolved":
            task = self._serving.pop(p.get("requestId"), None)
            if task is not None:
                task.cancel()  # codex settled it (e.g. the turn was interrupted)

    def _emit_opt(self, event: AgentEvent | None) -> None:
        if event is not None:
            self._emit(event)

    def _on_tokens(self, p: dict[str, Any]) -> None:
        """Absolute thread totals -> TOKEN_USAGE. Totals reported before this session's
        first turn are the restored totals of a resumed thread (``attached``: a baseline,
        not new usage). codex sends them before its ``thread/resume`` answer, so they are
        held until the thread is known and emitted after SESSION_STARTED."""
        if self._thread_id is None:
            self._early_tokens = p
            return
        usage = p.get("tokenUsage") or {}
        total = ev.token_usage(usage.get("total"))
        last = ev.token_usage(usage.get("last"))
        window = usage.get("modelContextWindow")
        report = TokenReport(
            usage=total,
            last=last,
            model_context_window=window if isinstance(window, int) else None,
            turn_id=_opt_str(p.get("turnId")),
            attached=self._turn is None,
        )
        self._emit(
            AgentEvent(
                kind=EventKind.TOKEN_USAGE,
                message=f"tokens: {total.total_tokens} total ({last.total_tokens} last)",
                payload=report,
            )
        )

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
        status = _END_STATUS.get(str(t.get("status")), TurnStatus.FAILED)
        error = None
        if status == TurnStatus.FAILED:
            error = ev.error_text(t.get("error")) if t.get("error") else f"turn {t.get('status')}"
        elif status == TurnStatus.INTERRUPTED:
            error = "interrupted"
        self._end_turn(turn, status, error)


def _stamp_unpublished(event: AgentEvent, update: dict[str, Any]) -> None:
    """Set fields of a frozen event that no one else references yet (see ``_emit``)."""
    event.__dict__.update(update)
    event.__pydantic_fields_set__.update(update)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
