"""The demo app-server: the codex methods a Symphony client uses (docs/protocols.md
"Codex app-server").

Handles ``initialize`` / ``initialized`` (once per connection), ``thread/start`` (records
``dynamicTools``), ``thread/resume`` (in memory, else from the thread file under ``cwd``),
``thread/read``, ``thread/turns/list`` (newest first, each turn with its items),
``turn/start`` (answers ``{turn{id, status:"inProgress"}}`` and then streams the turn) and
``turn/interrupt`` (``{}``, then ``turn/completed`` with ``interrupted``). Anything else gets
JSON-RPC error -32601; bad params get -32602; requests before ``initialize`` and conflicting
ones (a second turn while one runs) get -32600, as codex uses for invalid requests.

On a socket (docs/protocols.md "Codex app-server over a socket") a connection follows the
threads it started or resumed; ``thread/resume`` of a thread whose turn runs answers its
live status (``active`` with ``activeFlags`` such as ``waitingOnApproval``) and then sends
the thread's unanswered requests again, with their ids, to that connection.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from symphony_tui import __version__
from symphony_tui.demo.directives import parse_directives
from symphony_tui.demo.threads import (
    APPROVAL_POLICIES,
    SANDBOXES,
    DemoThread,
    TurnRecord,
    find_saved,
    new_id,
)
from symphony_tui.demo.transport import EndOfInput, Incoming, Transport, note
from symphony_tui.demo.turn import TurnScript, cancel_and_wait

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _params(p: Any) -> dict[str, Any]:
    if p is None:
        return {}
    if not isinstance(p, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: expected an object")
    return p


def _str_param(p: dict[str, Any], key: str) -> str:
    value = p.get(key)
    if not isinstance(value, str) or not value:
        raise RpcError(INVALID_PARAMS, f"Invalid params: missing field `{key}`")
    return value


def _prompt_text(p: dict[str, Any]) -> str:
    items = p.get("input")
    if not isinstance(items, list):
        raise RpcError(INVALID_PARAMS, "Invalid params: missing field `input`")
    texts = [i["text"] for i in items if isinstance(i, dict) and isinstance(i.get("text"), str)]
    return "\n".join(texts)


def _platform_os() -> str:
    return {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)


class DemoAppServer:
    """One agent process: its threads and their running turn tasks."""

    def __init__(self, transport: Transport, speed: float) -> None:
        self.t = transport
        self.speed = speed
        #: The connection that sent ``initialize`` (a new connection starts uninitialized).
        self.initialized_peer: int | None = None
        self.threads: dict[str, DemoThread] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.scripts: dict[str, TurnScript] = {}

    async def serve(self) -> None:
        """Handle messages until EOF (or the task is cancelled by a signal)."""
        try:
            while True:
                try:
                    msg = await self.t.read()
                except EndOfInput:
                    return
                self.handle(msg)
        finally:
            self.t.fail_pending()
            for task in list(self.tasks.values()):
                await cancel_and_wait(task)

    def handle(self, msg: Incoming) -> None:
        if msg.id is None:
            if msg.method not in ("initialized", "exit"):
                note(f"ignoring notification {msg.method!r}")
            return
        handler = getattr(self, "_m_" + msg.method.replace("/", "_"), None)
        try:
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {msg.method}")
            if self.initialized_peer != msg.peer and msg.method != "initialize":
                raise RpcError(INVALID_REQUEST, "Not initialized")
            handler(msg, _params(msg.params))
        except RpcError as err:
            self.t.respond_error(msg.id, err.code, err.message, msg.peer)

    # -- methods ---------------------------------------------------------------------------

    def _m_initialize(self, req: Incoming, p: dict[str, Any]) -> None:
        if self.initialized_peer == req.peer:
            raise RpcError(INVALID_REQUEST, "Already initialized")
        self.initialized_peer = req.peer
        client = p.get("clientInfo") if isinstance(p.get("clientInfo"), dict) else {}
        codex_home = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
        self._respond(
            req,
            {
                "userAgent": f"{client.get('name') or 'client'}/symphony-demo-agent {__version__}"
                f" ({platform.system()} {platform.release()}; {platform.machine()})",
                "codexHome": codex_home,
                "platformFamily": "windows" if sys.platform == "win32" else "unix",
                "platformOs": _platform_os(),
            },
        )

    def _m_thread_start(self, req: Incoming, p: dict[str, Any]) -> None:
        cwd = Path(p.get("cwd") or os.getcwd()).expanduser()
        cwd = cwd if cwd.is_absolute() else Path.cwd() / cwd
        if not cwd.is_dir():
            raise RpcError(INVALID_REQUEST, f"cwd is not a directory: {cwd}")
        policy = p.get("approvalPolicy") or "on-request"
        if not (policy in APPROVAL_POLICIES or (isinstance(policy, dict) and "granular" in policy)):
            raise RpcError(INVALID_REQUEST, f"Invalid request: unknown approvalPolicy {policy!r}")
        sandbox = p.get("sandbox") or "workspace-write"
        if sandbox not in SANDBOXES:
            raise RpcError(INVALID_REQUEST, f"Invalid request: unknown sandbox {sandbox!r}")
        tools = []
        for spec in p.get("dynamicTools") or []:
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                tools.append(spec["name"])
        thread = DemoThread(
            id=new_id(),
            cwd=cwd.resolve(),
            approval_policy=policy,
            sandbox=sandbox,
            tools=tuple(tools),
        )
        self.threads[thread.id] = thread
        self._save(thread)
        self.t.subscribe(req.peer, thread.id)
        self._respond(req, thread.session_result())
        self.t.notify("thread/started", {"thread": thread.to_wire()})

    def _m_thread_resume(self, req: Incoming, p: dict[str, Any]) -> None:
        thread_id = _str_param(p, "threadId")
        thread = self.threads.get(thread_id)
        if thread is None:
            cwd = Path(p.get("cwd") or os.getcwd())
            path = find_saved(thread_id, cwd)
            if path is None:
                raise RpcError(INVALID_REQUEST, f"no rollout found for thread id {thread_id}")
            try:
                thread = DemoThread.load(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise RpcError(INVALID_REQUEST, f"unreadable thread {thread_id}: {exc}") from exc
            self.threads[thread.id] = thread
        if isinstance(p.get("dynamicTools"), list):
            names = [s.get("name") for s in p["dynamicTools"] if isinstance(s, dict)]
            thread.tools = tuple(n for n in names if isinstance(n, str))
        if p.get("approvalPolicy") in APPROVAL_POLICIES:
            thread.approval_policy = p["approvalPolicy"]
        if p.get("sandbox") in SANDBOXES:
            thread.sandbox = p["sandbox"]
        self.t.subscribe(req.peer, thread.id)
        self._respond(req, thread.session_result(include_turns=not p.get("excludeTurns")))
        self.t.resend_pending(req.peer, thread.id)

    def _m_thread_read(self, req: Incoming, p: dict[str, Any]) -> None:
        thread = self._thread(p)
        self._respond(req, {"thread": thread.to_wire(include_turns=bool(p.get("includeTurns")))})

    def _m_thread_turns_list(self, req: Incoming, p: dict[str, Any]) -> None:
        thread = self._thread(p)
        limit = p.get("limit")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise RpcError(INVALID_PARAMS, "Invalid params: `limit` must be an integer >= 0")
        view = p.get("itemsView") or "summary"
        if view not in ("notLoaded", "summary", "full"):
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown itemsView {view!r}")
        ascending = p.get("sortDirection") == "asc"
        turns = list(thread.turns) if ascending else list(reversed(thread.turns))
        cursor = p.get("cursor")
        if cursor is not None:  # the last turn of the previous page
            ids = [t.id for t in turns]
            if cursor not in ids:
                raise RpcError(INVALID_PARAMS, f"Invalid params: unknown cursor {cursor!r}")
            turns = turns[ids.index(cursor) + 1 :]
        page = turns if limit is None else turns[:limit]
        more = len(page) < len(turns)
        self._respond(
            req,
            {
                "data": [t.to_wire(items_view=view) for t in page],
                "nextCursor": page[-1].id if more and page else None,
                "backwardsCursor": None,  # paging back is not served
            },
        )

    def _m_turn_start(self, req: Incoming, p: dict[str, Any]) -> None:
        thread = self._thread(p)
        prompt = _prompt_text(p)
        if thread.id in self.tasks:
            raise RpcError(INVALID_REQUEST, "a turn is already in progress on this thread")
        policy = p.get("approvalPolicy")
        if policy in APPROVAL_POLICIES or isinstance(policy, dict):
            thread.approval_policy = policy
        thread.directives = thread.directives.merged(parse_directives(prompt))
        if not thread.preview:
            thread.preview = prompt[:200]
        turn = TurnRecord(id=new_id())
        thread.turns.append(turn)
        self._save(thread)  # a process killed mid-turn resumes with this turn interrupted
        self._respond(req, {"turn": turn.to_wire()})
        script = TurnScript(self.t, thread, turn, prompt, thread.directives, self.speed)
        task = asyncio.get_running_loop().create_task(self._run_turn(script))
        self.tasks[thread.id] = task
        self.scripts[thread.id] = script

    def _m_turn_steer(self, req: Incoming, p: dict[str, Any]) -> None:
        thread = self._thread(p)
        active = thread.active_turn
        script = self.scripts.get(thread.id)
        if active is None or script is None or thread.id not in self.tasks:
            raise RpcError(INVALID_REQUEST, "no active turn to steer")
        if p.get("expectedTurnId") != active.id:
            raise RpcError(
                INVALID_REQUEST, f"expected turn {p.get('expectedTurnId')} is not active"
            )
        script.steer(_prompt_text(p))
        self._respond(req, {"turnId": active.id})

    def _m_turn_interrupt(self, req: Incoming, p: dict[str, Any]) -> None:
        thread = self._thread(p)
        turn_id = p.get("turnId")
        task = self.tasks.get(thread.id)
        self._respond(req, {})
        active = thread.active_turn
        if task is not None and active is not None and turn_id in (None, active.id):
            task.cancel()

    # -- helpers ---------------------------------------------------------------------------

    def _respond(self, req: Incoming, result: Any) -> None:
        self.t.respond(req.id, result, req.peer)

    def _thread(self, p: dict[str, Any]) -> DemoThread:
        thread_id = _str_param(p, "threadId")
        thread = self.threads.get(thread_id)
        if thread is None:
            raise RpcError(INVALID_REQUEST, f"thread not found: {thread_id}")
        return thread

    def _save(self, thread: DemoThread) -> None:
        try:
            thread.save()
        except OSError as exc:
            note(f"could not save thread {thread.id}: {exc}")

    async def _run_turn(self, script: TurnScript) -> None:
        thread, turn = script.thread, script.turn
        started = time.monotonic()
        script._status("active")
        self.t.notify("turn/started", {"threadId": thread.id, "turn": turn.to_wire()})
        try:
            status, error = await script.run()
        except asyncio.CancelledError:
            status, error = "interrupted", None
        except Exception as exc:  # a bug in the script must still end the turn
            note(f"turn failed: {exc!r}")
            status, error = "failed", f"demo agent error: {exc}"
        turn.status = status
        turn.error = error
        turn.completed_at = int(time.time())
        turn.duration_ms = int((time.monotonic() - started) * 1000)
        self.tasks.pop(thread.id, None)
        self.scripts.pop(thread.id, None)
        self._save(thread)
        self.t.notify("turn/completed", {"threadId": thread.id, "turn": turn.to_wire()})
        if script.pending_request is not None:
            # As observed with codex: the pending request resolves after turn/completed.
            self.t.forget(script.pending_request)
            self.t.notify(
                "serverRequest/resolved",
                {"threadId": thread.id, "requestId": script.pending_request},
            )
        script._status("idle")
