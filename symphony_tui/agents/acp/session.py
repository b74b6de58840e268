"""One agent process speaking the Agent Client Protocol for one issue
(https://agentclientprotocol.com/protocol/overview; docs/protocols.md "Agent Client
Protocol").

Lifecycle: :meth:`AcpSession.open` launches ``bash -lc <acp.command>`` in the workspace
(or on a worker host over ssh, agents/remote_launch.py), then ``initialize`` (protocol
version :data:`PROTOCOL_VERSION`, the client's capabilities), ``authenticate`` when
``acp.auth_method`` is set, and ``session/load`` of the session the workspace manifest
recorded (where the agent advertises ``loadSession``; the history it replays is not
reported again) or ``session/new`` (cwd = the workspace, ``acp.mcp_servers``).
:meth:`run_turn` sends ``session/prompt`` with the prompt as one text block and waits for
its answer, reporting ``session/update`` notifications on the way (:mod:`.updates`);
:meth:`interrupt` sends ``session/cancel`` and answers pending permission requests
``cancelled``; :meth:`close` ends the whole process group.

Stop reasons: ``end_turn`` completes the turn, ``cancelled`` is an interrupt (or the
``turn_timeout`` failure when ``turn_timeout_ms`` of silence sent the cancel),
``max_tokens``, ``max_turn_requests`` and ``refusal`` fail it with the reason. Usage: a
prompt answer's ``usage`` (that turn's tokens) is added to the session's totals and
reported absolute (``TOKEN_USAGE``); an agent that reports none leaves the run's usage
not reported. Framing, line limits and back-pressure are the codex reader's
(agents/codex/rpc.py), with ``"jsonrpc": "2.0"`` on every message written.

Client methods served: ``session/request_permission`` (the approvals inbox,
:mod:`.permissions`) and, for a local workspace, ``fs/read_text_file`` /
``fs/write_text_file`` inside it (:mod:`.files`; a file not found is answered
without a warning: an agent creating a file reads it first) and ``terminal/*`` running there
(:mod:`.terminals`, every terminal killed when the session closes). On a worker host
neither is offered (the files are on the host). Anything else is answered ``-32601``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.agents.acp import permissions
from symphony_tui.agents.acp.files import NOT_FOUND, MethodRefused, WorkspaceFiles
from symphony_tui.agents.acp.terminals import Terminals
from symphony_tui.agents.acp.updates import UpdateFolder
from symphony_tui.agents.base import AgentError, SessionHost, TurnResult, TurnStatus
from symphony_tui.agents.codex.process import (
    StderrTail,
    describe_exit,
    kill_group,
    launch,
    release,
)
from symphony_tui.agents.codex.rpc import LINE_LIMIT, RequestId, RpcConnection, RpcError
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.settings import AcpSettings
from symphony_tui.domain import AgentEvent, ApprovalAnswer, ApprovalDecision, EventKind, TokenUsage
from symphony_tui.domain.payloads import (
    Notice,
    SessionStarted,
    TokenReport,
    TurnEnded,
    TurnStarted,
)
from symphony_tui.domain.tokens import reported_count
from symphony_tui.text import cap, one_line

log = logging.getLogger(__name__)

#: The ACP version this client speaks (``initialize``'s ``protocolVersion``).
PROTOCOL_VERSION = 1
#: Seconds an interrupted turn gets to answer its prompt before it is ended here.
INTERRUPT_GRACE_S = 5.0
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
#: ACP's "authentication required" error code.
AUTH_REQUIRED = -32000

STOP_REASONS = {
    "end_turn": (TurnStatus.COMPLETED, None),
    "cancelled": (TurnStatus.INTERRUPTED, "cancelled"),
    "max_tokens": (TurnStatus.FAILED, "stop reason max_tokens: the agent ran out of tokens"),
    "max_turn_requests": (
        TurnStatus.FAILED,
        "stop reason max_turn_requests: the agent reached its limit of model requests",
    ),
    "refusal": (TurnStatus.FAILED, "stop reason refusal: the agent refused to go on"),
}


_REFUSED_VERB = {"fs/read_text_file": "read", "fs/write_text_file": "write"}


def refused_message(method: str, reason: str) -> str:
    """The warning for a client method this client refused the agent: what was refused
    here, not that the agent cannot do it (an agent with tools of its own may)."""
    verb = _REFUSED_VERB.get(method)
    if verb is None:
        return f"{method}: refused to serve it for the agent: {reason}"
    return (
        f"{method}: refused to {verb} for the agent: {reason} "
        f"(the agent may still {verb} it with its own tools)"
    )


class JsonRpc2(RpcConnection):
    """:class:`RpcConnection` writing JSON-RPC 2.0 messages (``"jsonrpc": "2.0"``)."""

    async def _write(self, msg: dict[str, Any]) -> None:
        await super()._write({"jsonrpc": "2.0", **msg})


def initialize_params(*, local: bool) -> dict[str, Any]:
    """``initialize``'s params: this client's protocol version and capabilities (``fs``
    methods and terminals where the workspace is local)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {
            "fs": {"readTextFile": local, "writeTextFile": local},
            "terminal": local,
        },
    }


def turn_usage(raw: Any) -> TokenUsage | None:
    """A prompt answer's ``usage`` as a :class:`TokenUsage`; None when it reports none.

    ``inputTokens`` counts the whole prompt (``cachedReadTokens`` are part of it) and
    ``outputTokens`` the answer (``thoughtTokens`` part of it)."""
    if not isinstance(raw, dict):
        return None
    inp, out = reported_count(raw.get("inputTokens")), reported_count(raw.get("outputTokens"))
    total = reported_count(raw.get("totalTokens"))
    if inp is None and out is None and total is None:
        return None
    return TokenUsage.derived(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=total,
        cached_input_tokens=reported_count(raw.get("cachedReadTokens")),
        reasoning_tokens=reported_count(raw.get("thoughtTokens")),
    )


@dataclass
class _Turn:
    number: int
    continuation: bool
    prompt: asyncio.Task[Any] | None = None
    done: asyncio.Future[TurnResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    cancel_sent: bool = False
    #: Set when the turn timeout cancels the turn: its ``cancelled`` answer is this failure.
    timeout_error: str | None = None

    @property
    def turn_id(self) -> str:
        return f"turn-{self.number}"


class AcpSession:
    """An :class:`~symphony_tui.agents.base.AgentSession` over one ACP agent process.

    ``sent``: when given, every JSON-RPC message written is appended to it (tests validate
    them against the protocol's published schema). ``remote``: the launch on a worker
    host (no ``fs/*`` then: the files are on the host). ``line_limit``: the longest line
    read, in bytes (longer ones are skipped with one ``MALFORMED`` event)."""

    def __init__(
        self,
        host: SessionHost,
        cfg: AcpSettings,
        env: dict[str, str],
        *,
        turn_timeout_ms: int,
        sent: list[dict[str, Any]] | None = None,
        remote: RemoteLaunch | None = None,
        line_limit: int = LINE_LIMIT,
        on_close: Any = None,
    ) -> None:
        self._host = host
        self._cfg = cfg
        self._env = env
        self._turn_timeout_s = turn_timeout_ms / 1000
        self._timeout_s = cfg.read_timeout_ms / 1000
        self._sent = sent
        self._remote = remote
        self._line_limit = line_limit
        self._on_close = on_close
        self._files = None if remote is not None else WorkspaceFiles(host.workspace)
        self._terminals = (
            None
            if self._files is None
            else Terminals(
                self._files, env, lambda groups: host.record_session(terminal_groups=groups)
            )
        )
        self._proc: asyncio.subprocess.Process | None = None
        self._rpc: JsonRpc2 | None = None
        self._stderr = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        self._sid: str | None = None
        self._folder = UpdateFolder(
            terminal_text=None if self._terminals is None else self._terminals.text,
            workspace=host.workspace,
        )
        self._turn: _Turn | None = None
        self._turns = 0
        self._loading = False
        self._replayed = 0
        self._usage: TokenUsage | None = None
        #: Requests of the agent being served: rpc id -> (task, method).
        self._serving: dict[RequestId, tuple[asyncio.Task[None], str]] = {}
        self._closed = False
        #: Names this launch in approval ids: the agent's request ids restart with each
        #: process (and a loaded session keeps its id), so ``<issue>:<rpc id>`` would
        #: repeat and a late answer could settle the next run's request.
        self._launch = f"acp-{secrets.token_hex(4)}"
        self.agent_info: dict[str, Any] = {}
        self.agent_capabilities: dict[str, Any] = {}
        self._auth_methods: list[str] = []
        self.host_lost: str | None = None

    # ------------------------------------------------------------------ AgentSession
    @property
    def session_id(self) -> str | None:
        return self._sid

    @property
    def thread_id(self) -> str | None:
        return self._sid

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def adoptable(self) -> bool:
        """False: the agent is this scheduler's child and ends with its session."""
        return False

    def _emit(self, event: AgentEvent) -> None:
        self._host.emit(event)

    # ------------------------------------------------------------------ start
    async def open(self) -> None:
        """Launch, initialize and open the ACP session. Raises ``AgentError``
        (``launch_failed``, ``handshake_failed``, ``read_timeout``, ``process_exited``);
        the process is ended on failure."""
        try:
            await self._open()
        except BaseException as e:
            await self.close()
            if isinstance(e, AgentError) and self.host_lost:
                e.host_lost = self.host_lost
            raise

    async def _open(self) -> None:
        cmd = self._cfg.command
        if self._remote is not None:
            try:
                proc = await self._remote.launch(cmd, self._host.workspace)
            except AgentError as e:
                self.host_lost = e.host_lost
                raise
        else:
            proc = await launch(cmd, self._host.workspace, self._env)
        self._proc = proc
        assert proc.stdout and proc.stdin and proc.stderr
        self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))
        self._rpc = JsonRpc2(
            proc.stdout,
            proc.stdin,
            on_notification=self._on_notification,
            on_request=self._on_request,
            on_malformed=self._on_malformed,
            on_eof=self._describe_exit,
            line_limit=self._line_limit,
            sent=self._sent,
            pace=self._host.flow.pace,
            hurry=self._host.flow.hurry,
        )
        self._rpc.start()
        await self._initialize(cmd)
        await self._open_session()

    async def _request(self, method: str, params: Any) -> Any:
        assert self._rpc is not None
        return await self._rpc.request(method, params, self._timeout_s)

    async def _initialize(self, cmd: str) -> None:
        params = initialize_params(local=self._files is not None)
        try:
            res = await self._request("initialize", params)
        except AgentError as e:
            if e.code == "process_exited":
                assert self._rpc is not None
                why = e.message if self._rpc.is_closed else await self._describe_exit()
                raise AgentError("launch_failed", f"{cmd!r}: {why}") from None
            raise
        except RpcError as e:
            raise AgentError("handshake_failed", f"initialize rejected: {e.message}") from None
        res = res if isinstance(res, dict) else {}
        version = res.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            raise AgentError(
                "handshake_failed",
                f"the agent speaks ACP version {version!r}; this client speaks {PROTOCOL_VERSION}",
            )
        caps = res.get("agentCapabilities")
        self.agent_capabilities = caps if isinstance(caps, dict) else {}
        info = res.get("agentInfo")
        self.agent_info = info if isinstance(info, dict) else {}
        methods = [str(m.get("id")) for m in res.get("authMethods") or [] if isinstance(m, dict)]
        self._auth_methods = methods
        wanted = self._cfg.auth_method
        if wanted:
            if wanted not in methods:
                raise AgentError(
                    "handshake_failed",
                    f"acp.auth_method {wanted!r} is not offered (the agent offers: "
                    f"{', '.join(methods) or 'none'})",
                )
            try:
                await self._request("authenticate", {"methodId": wanted})
            except RpcError as e:
                raise AgentError(
                    "handshake_failed", f"authenticate {wanted!r} refused: {e.message}"
                ) from None

    async def _open_session(self) -> None:
        resume = self._host.resume
        previous = resume.get("acp_session_id") if resume.get("backend") == "acp" else None
        resumed = False
        if previous and self.agent_capabilities.get("loadSession") is True:
            resumed = await self._load(str(previous))
        if not resumed:
            try:
                res = await self._request("session/new", self._session_params())
            except RpcError as e:
                raise AgentError("handshake_failed", self._refusal("session/new", e)) from None
            sid = res.get("sessionId") if isinstance(res, dict) else None
            if not isinstance(sid, str) or not sid:
                raise AgentError("handshake_failed", "session/new answered without a sessionId")
            self._sid = sid
        assert self._sid is not None
        self._folder.session_id = self._sid
        self._host.record_session(backend="acp", acp_session_id=self._sid, thread_id=self._sid)
        name = self.agent_info.get("name") or "agent"
        verb = "loaded" if resumed else "started"
        self._emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                message=f"ACP session {self._sid} {verb} ({one_line(name, 80)})",
                payload=SessionStarted(
                    thread_id=self._sid, session_id=self._sid, resumed=resumed, pid=self.pid
                ),
            )
        )

    def _session_params(self) -> dict[str, Any]:
        return {"cwd": str(self._host.workspace), "mcpServers": list(self._cfg.mcp_servers)}

    def _refusal(self, method: str, e: RpcError) -> str:
        if e.code == AUTH_REQUIRED:
            offered = ", ".join(self._auth_methods) or "none"
            return (
                f"{method}: the agent asks to authenticate ({e.message}); set acp.auth_method "
                f"to one of: {offered}"
            )
        return f"{method} refused: {e.message}"

    async def _load(self, previous: str) -> bool:
        """``session/load`` of ``previous``; False (with a warning) when the agent refuses."""
        self._loading, self._replayed = True, 0
        try:
            await self._request("session/load", {"sessionId": previous, **self._session_params()})
        except RpcError as e:
            if e.code == AUTH_REQUIRED:
                raise AgentError("handshake_failed", self._refusal("session/load", e)) from None
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=f"cannot load ACP session {previous}; starting a new one ({e.message})",
                    payload=Notice(notice="resume_failed", thread_id=previous),
                )
            )
            return False
        finally:
            self._loading = False
        self._sid = previous
        return True

    # ------------------------------------------------------------------ turns
    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        """Send ``session/prompt`` and wait for its answer. Raises ``AgentError``
        (``process_exited``) when the agent ends mid-turn."""
        rpc = self._rpc
        if rpc is None or rpc.is_closed or self._closed:
            raise AgentError("process_exited", rpc.close_reason() if rpc else "not open")
        if self._turn is not None and not self._turn.done.done():
            raise AgentError("protocol_error", "a turn is already running on this session")
        self._turns += 1
        turn = _Turn(self._turns, continuation)
        self._turn = turn
        self._emit(
            AgentEvent(
                kind=EventKind.TURN_STARTED,
                message=f"turn {turn.turn_id} started",
                payload=TurnStarted(
                    turn_id=turn.turn_id, thread_id=self._sid, continuation=continuation
                ),
            )
        )
        params = {"sessionId": self._sid, "prompt": [{"type": "text", "text": prompt}]}
        # the turn's own deadline is the silence below, not the request's
        turn.prompt = asyncio.ensure_future(rpc.request("session/prompt", params, 10**9))
        turn.prompt.add_done_callback(lambda task: self._prompt_answered(turn, task))
        try:
            return await self._await_turn(turn, rpc)
        except asyncio.CancelledError:
            self._end_turn(turn, TurnStatus.FAILED, "cancelled", emit=False)
            raise

    async def _await_turn(self, turn: _Turn, rpc: RpcConnection) -> TurnResult:
        """Wait for the turn's end; ``turn_timeout_ms`` is the longest silence of the agent
        (spec §10.6): every output starts it again."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        while not (turn.done.done() or rpc.closed.done()):
            remaining = self._turn_timeout_s - (loop.time() - max(started, rpc.last_output))
            if remaining <= 0:
                break
            waits: set[asyncio.Future[Any]] = {turn.done, rpc.closed}
            await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if turn.done.done():
            return turn.done.result()
        if rpc.closed.done():
            reason = rpc.closed.result()
            self._end_turn(turn, TurnStatus.FAILED, f"process_exited: {reason}")
            raise AgentError("process_exited", f"mid-turn: {reason}")
        error = f"turn_timeout: no output from the agent for {int(self._turn_timeout_s * 1000)} ms"
        turn.timeout_error = error
        with contextlib.suppress(Exception):
            await self._cancel(turn, wait=True)
        self._end_turn(turn, TurnStatus.FAILED, error)
        return turn.done.result()

    def _prompt_answered(self, turn: _Turn, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        err = task.exception()  # read even when the turn has ended: asyncio logs it else
        if turn.done.done():
            return
        if isinstance(err, RpcError):
            self._end_turn(turn, TurnStatus.FAILED, f"session/prompt failed: {err.message}")
            return
        if err is not None:  # the process ended: the turn's waiter reports it
            return
        res = task.result()
        res = res if isinstance(res, dict) else {}
        usage = turn_usage(res.get("usage"))
        if usage is not None:
            self._usage = usage if self._usage is None else self._usage + usage
            self._emit(
                AgentEvent(
                    kind=EventKind.TOKEN_USAGE,
                    message=f"{self._usage.total_tokens} tokens",
                    payload=TokenReport(usage=self._usage, last=usage, turn_id=turn.turn_id),
                )
            )
        reason = str(res.get("stopReason"))
        status, error = STOP_REASONS.get(
            reason, (TurnStatus.FAILED, f"unknown stop reason {one_line(reason, 80)!r}")
        )
        if turn.timeout_error is not None and status is not TurnStatus.COMPLETED:
            status, error = TurnStatus.FAILED, turn.timeout_error
        self._end_turn(turn, status, error)

    def _end_turn(
        self, turn: _Turn, status: TurnStatus, error: str | None, *, emit: bool = True
    ) -> None:
        """Report what the turn left open, its end, and resolve its waiter (once)."""
        if turn.done.done():
            return
        open_as = None if status == TurnStatus.COMPLETED else status.value
        for event in self._folder.flush(open_calls_as=open_as):
            self._emit(event)
        self._drop_serving()
        if emit:
            end = TurnEnded.of(status.value, error, turn_id=turn.turn_id)
            msg = f"turn {turn.turn_id} {status.value}" + (f": {error}" if error else "")
            self._emit(AgentEvent(kind=EventKind(end.kind_name), message=msg, payload=end))
        turn.done.set_result(TurnResult(status, turn.turn_id, error))
        if turn.prompt is not None and not turn.prompt.done():
            turn.prompt.cancel()

    async def interrupt(self) -> None:
        """``session/cancel`` for the turn in flight; pending permission requests are
        answered ``cancelled`` (as the protocol asks). The turn ends with the agent's
        ``cancelled`` answer, or here after :data:`INTERRUPT_GRACE_S`. No-op when idle."""
        turn = self._turn
        if turn is None or turn.done.done() or self._rpc is None or self._rpc.is_closed:
            return
        await self._cancel(turn, wait=True)
        if not turn.done.done():
            self._end_turn(turn, TurnStatus.INTERRUPTED, "interrupt sent; the agent did not answer")

    async def _cancel(self, turn: _Turn, *, wait: bool) -> None:
        assert self._rpc is not None
        if not turn.cancel_sent:
            turn.cancel_sent = True
            for rid, (task, method) in list(self._serving.items()):
                if method == "session/request_permission":
                    task.cancel()
                    self._serving.pop(rid, None)
                    with contextlib.suppress(AgentError):
                        await self._rpc.respond(rid, permissions.CANCELLED)
            try:
                await self._rpc.notify("session/cancel", {"sessionId": self._sid})
            except AgentError as e:
                self._emit(
                    AgentEvent(kind=EventKind.WARNING, message=f"session/cancel failed: {e}")
                )
        if wait:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(turn.done), INTERRUPT_GRACE_S)

    async def steer(self, text: str) -> bool:
        """ACP has no way to add input to a turn in flight: False (the caller sends the
        text with the next turn)."""
        return False

    # ------------------------------------------------------------------ from the agent
    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method != "session/update":
            return
        update = params.get("update")
        if not isinstance(update, dict) or params.get("sessionId") != self._sid:
            if self._loading and isinstance(update, dict):
                self._replayed += 1  # the history session/load replays
            return
        if self._loading:
            self._replayed += 1
            return
        for event in self._folder.update(update):
            self._emit(event)

    def _on_request(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        task = asyncio.create_task(self._serve(rid, method, params), name=f"acp-{method}")
        self._serving[rid] = (task, method)

        def served(done: asyncio.Task[None]) -> None:
            entry = self._serving.get(rid)
            if entry is not None and entry[0] is done:
                del self._serving[rid]

        task.add_done_callback(served)

    async def _serve(self, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        rpc = self._rpc
        assert rpc is not None
        try:
            if method == "session/request_permission":
                result, stop = await self._permission(rid, params)
                with contextlib.suppress(AgentError):
                    await rpc.respond(rid, result)
                turn = self._turn
                if stop and turn is not None and not turn.done.done():
                    await self._cancel(turn, wait=False)  # a cancel ends the turn
                return
            elif method == "fs/read_text_file" and self._files is not None:
                result = await self._files.read(params)
            elif method == "fs/write_text_file" and self._files is not None:
                result = await self._files.write(params)
            elif self._terminals is not None and self._terminals.handler(method) is not None:
                result = await self._terminals.handler(method)(params)
            else:
                await rpc.respond_error(rid, METHOD_NOT_FOUND, f"method not found: {method}")
                return
        except MethodRefused as e:
            if method == "fs/read_text_file" and e.code == NOT_FOUND:
                # an agent about to create a file reads it first: not worth a warning
                log.debug("%s: %s", method, e.message)
                with contextlib.suppress(AgentError):
                    await rpc.respond_error(rid, e.code, e.message)
                return
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=refused_message(method, e.message),
                    payload=Notice(notice="client_method_refused"),
                )
            )
            with contextlib.suppress(AgentError):
                await rpc.respond_error(rid, e.code, e.message)
            return
        except AgentError:
            return  # the agent is gone
        except Exception as e:  # never leave the agent waiting on a failure here
            reason = one_line(f"{method} failed: {e.__class__.__name__}: {e}", 500)
            self._emit(AgentEvent(kind=EventKind.WARNING, message=reason))
            with contextlib.suppress(AgentError):
                await rpc.respond_error(rid, INTERNAL_ERROR, reason)
            return
        with contextlib.suppress(AgentError):
            await rpc.respond(rid, result)

    async def _permission(
        self, rid: RequestId, params: dict[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """The outcome for the agent, and whether the answer also stops the turn (a
        cancel, as for codex)."""
        request = permissions.permission_request(
            f"{self._host.issue.id}:{self._launch}:{rid}", params, self._host, self._sid
        )
        try:
            answer = await self._host.request_approval(request)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # never leave the agent waiting because the host failed
            answer = ApprovalAnswer(
                decision=ApprovalDecision.DECLINE, message=f"host error: {e}", by="policy"
            )
        outcome = permissions.outcome(answer, permissions.options_of(params))
        return outcome, answer.decision == ApprovalDecision.CANCEL

    def _drop_serving(self) -> None:
        """The turn ended: withdraw the permission requests still asked (the approvals
        inbox stops waiting for an answer)."""
        for rid, (task, method) in list(self._serving.items()):
            if method == "session/request_permission":
                task.cancel()
                self._serving.pop(rid, None)

    def _on_malformed(self, reason: str) -> None:
        self._emit(AgentEvent(kind=EventKind.MALFORMED, message=cap(reason, 500)))

    async def _describe_exit(self) -> str:
        """At stdout's end: the exit code and the stderr tail, as one line."""
        msg, lost = await describe_exit(
            "ACP agent exited",
            self._proc,
            self._stderr_task,
            self._stderr,
            self._remote,
            self._cfg.command,
        )
        if lost is not None:
            self.host_lost = lost
        return msg

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        """End the process group, stop reading, release pending work. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        turn = self._turn
        if turn is not None and not turn.done.done():
            self._end_turn(turn, TurnStatus.FAILED, "session closed", emit=False)
        for task, _method in list(self._serving.values()):
            task.cancel()
        self._serving.clear()
        if self._terminals is not None:
            await self._terminals.close()
        if self._remote is not None:
            await self._remote.stop()
        if self._proc is not None:
            await kill_group(self._proc)
        if self._rpc is not None:
            await self._rpc.aclose()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
        if self._proc is not None:
            release(self._proc)
