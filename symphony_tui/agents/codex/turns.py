"""The thread and the turns of a codex session (spec §10, §10.6; docs/protocols.md
"Handshake", "Resume", "Interrupts and missing turn ends").

:class:`TurnTracker` opens the thread once the handshake is done: ``thread/resume`` of the
thread id the host remembers, else (or when resume is refused) ``thread/start`` with the
host's dynamic tools; either way a SESSION_STARTED event. Re-attaching to a detached
app-server an earlier scheduler left running (:meth:`TurnTracker.adopt`): the recorded turn
is made the turn in flight before ``thread/resume`` (so what codex sends from then on, a
re-sent pending approval or ``turn/completed``, lands on it), then ``thread/turns/list``
says what happened while nobody was attached (the caller replays it,
``Notifications.replay``).

Turns: ``turn/start`` -> TURN_STARTED once the turn id is known -> ``turn/completed`` ends
it. When ``turn/completed`` never comes, the turn still ends: after an idle
``thread/status/changed`` or an acknowledged ``turn/interrupt``, the ``thread/read``
fallback reads the persisted turn status; ``turn_timeout_ms`` of silence interrupts and
fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost, TurnResult, TurnStatus
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection, RpcError
from symphony_tui.config.settings import CodexSettings
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import Notice, SessionStarted, TurnEnded, TurnStarted

IDLE_GRACE_S = 1.0  # after `thread/status/changed idle` without `turn/completed`
INTERRUPT_GRACE_S = 2.0  # after `turn/interrupt` was acknowledged
#: Turns asked of ``thread/turns/list`` when re-attaching (newest first).
TURNS_LISTED = 5

END_STATUS = {
    "completed": TurnStatus.COMPLETED,
    "interrupted": TurnStatus.INTERRUPTED,
    "failed": TurnStatus.FAILED,
}


@dataclass
class Turn:
    """The turn in flight on connection ``rpc``: its id once known, open items, and how it
    ended (``done``, resolved exactly once)."""

    rpc: RpcConnection
    done: asyncio.Future[TurnResult]
    turn_id: str | None = None
    started_emitted: bool = False
    open_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    id_known: asyncio.Event = field(default_factory=asyncio.Event)
    timeout_error: str | None = None  # set when turn_timeout_ms expired
    continuation: bool = False


class PendingRequests:
    """The server's requests being answered: JSON-RPC id -> the task serving it. A turn's
    end withdraws them (the host stops waiting for an answer)."""

    def __init__(self) -> None:
        self._serving: dict[RequestId, asyncio.Future[Any]] = {}

    def add(self, rid: RequestId, task: asyncio.Future[Any]) -> None:
        self._serving[rid] = task

    def finished(self, rid: RequestId) -> None:
        """Request ``rid`` was answered (or given up): forget it."""
        self._serving.pop(rid, None)

    def settle(self, rid: Any) -> None:
        """Codex settled request ``rid`` itself (``serverRequest/resolved``, e.g. the turn
        was interrupted): stop serving it."""
        task = self._serving.pop(rid, None)
        if task is not None:
            task.cancel()

    def withdraw(self) -> None:
        """Stop serving every pending request."""
        for task in list(self._serving.values()):
            task.cancel()
        self._serving.clear()


class TurnTracker:
    """The session's thread (id, model) and its turn in flight; resolves each turn's
    waiter exactly once.

    Events go out through ``outlet`` (whose ``session_id`` this tracker sets, as
    ``<thread>-<turn>``); session facts go to ``host.record_session``, the turn id too when
    ``record_turns`` (a detached app-server, which a restarted scheduler re-attaches to);
    ``pending`` server requests are withdrawn when a turn ends. Requests are sent on the
    connection given to :meth:`open` / :meth:`adopt` / :meth:`run`, which each turn keeps.
    """

    def __init__(
        self,
        host: SessionHost,
        settings: CodexSettings,
        outlet: EventOutlet,
        pending: PendingRequests,
        *,
        record_turns: bool,
    ) -> None:
        self._host = host
        self._cfg = settings
        self._out = outlet
        self._pending = pending
        self._record_turns = record_turns
        self._timeout_s = settings.read_timeout_ms / 1000
        self.thread_id: str | None = None
        self.model: str | None = settings.model  # the thread's model, for collaborationMode
        #: The latest turn (in flight until its ``done`` is resolved); None before the first.
        self.turn: Turn | None = None
        self._interrupting: asyncio.Task[None] | None = None
        #: ``environments`` for ``thread/start`` and ``turn/start`` (an exec-server on a
        #: worker host: agents/codex/exec_server.py); None: codex's default, this machine.
        self.environments: list[dict[str, str]] | None = None

    # ------------------------------------------------------------------ thread
    async def open(self, rpc: RpcConnection, pid: int | None) -> dict[str, Any]:
        """Resume or start the thread (``pid``: the app-server's, for the message) and
        return it. Raises ``AgentError`` (handshake_failed, protocol_error)."""
        common: dict[str, Any] = {
            "cwd": str(self._host.workspace),
            "approvalPolicy": self._cfg.approval_policy,
            "sandbox": self._cfg.thread_sandbox,
        }
        if self._cfg.model:
            common["model"] = self._cfg.model
        previous = self._host.resume.get("thread_id")
        thread: dict[str, Any] | None = None
        if previous:
            try:
                res = await rpc.request(
                    "thread/resume",
                    {"threadId": str(previous), **common, "excludeTurns": True},
                    self._timeout_s,
                )
                self._note_model(res)
                self._emit_session(res["thread"], pid, resumed=True)
                thread = res["thread"]
            except (RpcError, KeyError, TypeError) as e:
                self._out.emit(
                    AgentEvent(
                        kind=EventKind.WARNING,
                        message=f"cannot resume thread {previous}; starting a new one ({e})",
                        payload=Notice(notice="resume_failed", thread_id=str(previous)),
                    )
                )
        if thread is None:
            thread = await self._start(rpc, common, pid)
        self.thread_id = str(thread["id"])
        return thread

    async def _start(
        self, rpc: RpcConnection, common: dict[str, Any], pid: int | None
    ) -> dict[str, Any]:
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
        if self.environments is not None:
            params["environments"] = self.environments
        try:
            res = await rpc.request("thread/start", params, self._timeout_s)
            thread: dict[str, Any] = res["thread"]
            self._note_model(res)
        except RpcError as e:
            raise AgentError("handshake_failed", f"thread/start rejected: {e.message}") from None
        except (KeyError, TypeError) as e:
            raise AgentError("protocol_error", f"thread/start result without thread: {e}") from e
        self._emit_session(thread, pid, resumed=False)
        return thread

    def _note_model(self, res: Any) -> None:
        if self.model is None and isinstance(res, dict) and isinstance(res.get("model"), str):
            self.model = res["model"]

    def _emit_session(self, thread: dict[str, Any], pid: int | None, *, resumed: bool) -> None:
        tid = str(thread.get("id"))
        verb = "resumed" if resumed else "started"
        self._out.emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=f"codex thread {tid} {verb} (pid {pid})",
                payload=SessionStarted(thread_id=tid, resumed=resumed, pid=pid, model=self.model),
            )
        )

    async def adopt(self, rpc: RpcConnection, pid: int | None) -> dict[str, Any]:
        """Re-attach to the recorded thread and turn of a detached app-server (see the
        module docstring): the turn found in flight becomes :attr:`turn` and is returned as
        ``thread/turns/list`` gave it (its items, its status). Raises ``AgentError`` /
        ``RpcError``."""
        resume = self._host.resume
        thread_id = resume.get("thread_id")
        if not thread_id:
            raise AgentError("reattach_failed", "the manifest records no thread id")
        self.thread_id = str(thread_id)
        recorded = resume.get("turn_id")
        turn = Turn(rpc, asyncio.get_running_loop().create_future(), started_emitted=True)
        if recorded:
            turn.turn_id = str(recorded)
            turn.id_known.set()
            self._out.session_id = f"{self.thread_id}-{recorded}"
        self.turn = turn
        res = await rpc.request(
            "thread/resume", {"threadId": self.thread_id, "excludeTurns": True}, self._timeout_s
        )
        thread = res["thread"] if isinstance(res, dict) else {}
        self._note_model(res)
        status = thread.get("status") if isinstance(thread, dict) else None
        flags = (status or {}).get("activeFlags") if isinstance(status, dict) else None
        listed = await rpc.request(
            "thread/turns/list",
            {"threadId": self.thread_id, "limit": TURNS_LISTED, "itemsView": "full"},
            self._timeout_s,
        )
        turns = [t for t in (listed or {}).get("data") or [] if isinstance(t, dict)]
        found = next((t for t in turns if recorded and t.get("id") == recorded), None)
        if found is None and turns and turns[0].get("status") == "inProgress":
            found = turns[0]  # newest first: started, its id not recorded yet
        if found is None:
            # no turn of this attempt to follow: the attempt is retried, which resumes
            # the thread and starts one
            raise AgentError("reattach_failed", f"thread {self.thread_id} has no turn in flight")
        if turn.turn_id is None:
            turn.turn_id = str(found.get("id"))
            turn.id_known.set()
            self._out.session_id = f"{self.thread_id}-{turn.turn_id}"
        self._out.emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=(
                    f"codex thread {self.thread_id} re-attached (pid {pid}, "
                    f"turn {turn.turn_id} {found.get('status')}"
                    + (f", {', '.join(map(str, flags))}" if flags else "")
                    + ")"
                ),
                payload=SessionStarted(
                    thread_id=self.thread_id,
                    resumed=True,
                    pid=pid,
                    state="re-attached",
                    model=self.model,
                ),
            )
        )
        self._host.record_session(thread_id=self.thread_id, turn_id=turn.turn_id)
        self._out.emit(
            AgentEvent(
                kind=EventKind.TURN_STARTED,
                message=f"turn {turn.turn_id} adopted after a scheduler restart",
                payload=TurnStarted(turn_id=turn.turn_id, thread_id=self.thread_id, adopted=True),
            )
        )
        return found

    # ------------------------------------------------------------------ turns
    async def run(self, rpc: RpcConnection, prompt: str, *, continuation: bool) -> TurnResult:
        """Run one turn on ``rpc``; returns how it ended. Raises ``AgentError`` when the
        process dies (``process_exited``) or a request gets no answer (``read_timeout``)."""
        if self.turn is not None and not self.turn.done.done():
            raise AgentError("protocol_error", "a turn is already running on this session")
        turn = Turn(rpc, asyncio.get_running_loop().create_future(), continuation=continuation)
        self.turn = turn
        params: dict[str, Any] = {
            "threadId": self.thread_id,
            "input": [{"type": "text", "text": prompt}],
            "cwd": str(self._host.workspace),
            "approvalPolicy": self._cfg.approval_policy,
        }
        if self._cfg.turn_sandbox_policy:
            params["sandboxPolicy"] = self._cfg.turn_sandbox_policy
        if self.environments is not None:
            params["environments"] = self.environments
        if self._cfg.model:
            params["model"] = self._cfg.model
        mode = self._cfg.collaboration_mode
        if mode and self.model:
            # null developer_instructions = codex's built-in instructions for the mode
            params["collaborationMode"] = {
                "mode": mode,
                "settings": {"model": self.model, "developer_instructions": None},
            }
        try:
            res = await rpc.request("turn/start", params, self._timeout_s)
        except RpcError as e:
            self.turn = None
            return TurnResult(TurnStatus.FAILED, error=f"turn/start rejected: {e.message}")
        except BaseException:
            self.turn = None
            raise
        tid = (res or {}).get("turn", {}).get("id") if isinstance(res, dict) else None
        if tid and turn.turn_id is None:
            self.set_turn_id(turn, str(tid))
        return await self.wait(turn)

    async def wait(self, turn: Turn) -> TurnResult:
        """Wait for the turn's end. ``turn_timeout_ms`` is the longest silence (§10.6):
        every output of the app-server (:attr:`RpcConnection.last_output`) starts it again,
        so a turn that keeps streaming is never cut short by it."""
        if turn.done.done():
            return turn.done.result()
        rpc = turn.rpc
        limit = self._cfg.turn_timeout_ms / 1000
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            while not (turn.done.done() or rpc.closed.done()):
                remaining = limit - (loop.time() - max(started, rpc.last_output))
                if remaining <= 0:
                    break
                waited: set[asyncio.Future[Any]] = {turn.done, rpc.closed}
                await asyncio.wait(waited, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.abandon(turn, "cancelled")
            raise
        if turn.done.done():
            return turn.done.result()
        if rpc.closed.done():
            reason = rpc.closed.result()
            self.end(turn, TurnStatus.FAILED, f"process_exited: {reason}")
            raise AgentError("process_exited", f"mid-turn: {reason}")
        # turn_timeout_ms (spec §10.6): stop the turn and report it failed; the
        # interrupted end that codex then sends is reported as this failure.
        turn.timeout_error = (
            f"turn_timeout: no output from the app-server for {self._cfg.turn_timeout_ms} ms"
        )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.interrupt(), self._timeout_s + INTERRUPT_GRACE_S)
        self.end(turn, TurnStatus.FAILED, turn.timeout_error)
        return turn.done.result()

    def set_turn_id(self, turn: Turn, turn_id: str) -> None:
        """The server named the turn: stamp it on events, record it, emit TURN_STARTED once."""
        turn.turn_id = turn_id
        turn.id_known.set()
        self._out.session_id = f"{self.thread_id}-{turn_id}"
        if self._record_turns:  # a restarted scheduler re-attaches to this turn
            self._host.record_session(turn_id=turn_id)
        if not turn.started_emitted:
            turn.started_emitted = True
            self._out.emit(
                AgentEvent(
                    kind=EventKind.TURN_STARTED,
                    message=f"turn {turn_id} started",
                    payload=TurnStarted(
                        turn_id=turn_id, thread_id=self.thread_id, continuation=turn.continuation
                    ),
                )
            )

    def end(self, turn: Turn, status: TurnStatus, error: str | None) -> None:
        """Close what the server left open, emit the end event, resolve the waiter."""
        if turn.done.done():
            return
        if turn.timeout_error and status == TurnStatus.INTERRUPTED:
            status, error = TurnStatus.FAILED, turn.timeout_error
        close_as = "completed" if status == TurnStatus.COMPLETED else status.value
        for item in list(turn.open_items.values()):
            self._out.emit(ev.item_closed_event(item, close_as))
        turn.open_items.clear()
        self._pending.withdraw()
        end = TurnEnded.of(status.value, error, turn_id=turn.turn_id)
        msg = f"turn {turn.turn_id} {status.value}" + (f": {error}" if error else "")
        self._out.emit(AgentEvent(kind=EventKind(end.kind_name), message=msg, payload=end))
        turn.done.set_result(TurnResult(status, turn.turn_id, error))

    def abandon(self, turn: Turn, why: str) -> None:
        """The session stops waiting for ``turn`` (closed, or its waiter cancelled)."""
        self._out.flush()  # the turn's streamed text before its end
        if not turn.done.done():
            turn.done.set_result(TurnResult(TurnStatus.FAILED, turn.turn_id, why))
        self._pending.withdraw()

    async def interrupt(self) -> None:
        """``turn/interrupt`` for the turn in flight; bounded by ``read_timeout_ms`` plus a
        short grace. Idempotent: concurrent calls share one attempt; no-op when idle."""
        turn = self.turn
        if turn is None or turn.done.done() or turn.rpc.is_closed:
            return
        if self._interrupting is None or self._interrupting.done():
            self._interrupting = asyncio.create_task(self._interrupt(turn))
        await asyncio.shield(self._interrupting)

    async def _interrupt(self, turn: Turn) -> None:
        try:
            await asyncio.wait_for(turn.id_known.wait(), self._timeout_s)
            await turn.rpc.request(
                "turn/interrupt",
                {"threadId": self.thread_id, "turnId": turn.turn_id},
                self._timeout_s,
            )
        except (AgentError, RpcError, TimeoutError) as e:
            if turn.done.done():
                return
            self._out.emit(
                AgentEvent(kind=EventKind.WARNING, message=f"turn/interrupt failed: {e}")
            )
        # A repeated interrupt has been seen to hang: do not wait on codex forever.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(turn.done), INTERRUPT_GRACE_S)
        if not turn.done.done():
            await self.check_persisted(turn)
        if not turn.done.done():
            self.end(turn, TurnStatus.INTERRUPTED, "interrupt acknowledged; no turn end")

    async def check_persisted(self, turn: Turn) -> None:
        """``thread/read`` fallback for a missing ``turn/completed`` (docs/protocols.md)."""
        if turn.turn_id is None or turn.done.done():
            return
        try:
            res = await turn.rpc.request(
                "thread/read",
                {"threadId": self.thread_id, "includeTurns": True},
                self._timeout_s,
            )
        except (AgentError, RpcError):
            return
        for t in (res or {}).get("thread", {}).get("turns") or []:
            if isinstance(t, dict) and t.get("id") == turn.turn_id:
                status = END_STATUS.get(str(t.get("status")))
                if status is not None and not turn.done.done():
                    err = ev.error_text(t.get("error")) if t.get("error") else None
                    self.end(turn, status, err)
                return

    async def idle_fallback(self, turn: Turn) -> None:
        """The thread went idle: give ``turn/completed`` :data:`IDLE_GRACE_S`, then read
        the persisted status."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(turn.done), IDLE_GRACE_S)
        if not turn.done.done():
            await self.check_persisted(turn)

    def completed(self, p: dict[str, Any]) -> None:
        """``turn/completed``: end the turn in flight with the status it carries."""
        turn = self.turn
        t = p.get("turn") or {}
        if turn is None or turn.done.done():
            return
        tid = t.get("id")
        if turn.turn_id is not None and tid and tid != turn.turn_id:
            return  # a late end of an earlier turn
        if turn.turn_id is None and tid:
            self.set_turn_id(turn, str(tid))
        status = END_STATUS.get(str(t.get("status")), TurnStatus.FAILED)
        error = None
        if status == TurnStatus.FAILED:
            error = ev.error_text(t.get("error")) if t.get("error") else f"turn {t.get('status')}"
        elif status == TurnStatus.INTERRUPTED:
            error = "interrupted"
        self.end(turn, status, error)
