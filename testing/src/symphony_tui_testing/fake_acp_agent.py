"""A scripted agent speaking the Agent Client Protocol on stdio, for tests and demos.

Run it as ``python -m symphony_tui_testing.fake_acp_agent`` (the ``acp.command``). Stdlib
only; one JSON-RPC 2.0 message per line (https://agentclientprotocol.com/protocol/overview).

What it does:

* ``initialize``: protocol version 1, ``loadSession`` (unless ``FAKE_ACP_NO_LOAD`` is set),
  one auth method ``token``; with ``FAKE_ACP_AUTH`` set, ``session/new`` and
  ``session/load`` fail with ``-32000`` until ``authenticate {methodId: "token"}`` came.
* ``session/new``: a new session id; ``session/load``: replays the session's history
  (``user_message_chunk`` / ``agent_message_chunk``) and answers ``{}``. History is kept
  in ``$FAKE_ACP_STATE`` (default ``<cwd>/.fake-acp``), so a new process can load it.
* ``session/prompt``: scripted from the prompt's text (words may be combined):

  - ``THINK``: an ``agent_thought_chunk`` first; ``PLAN``: a ``plan`` of two entries;
  - ``RUN <cmd>``: an ``execute`` tool call that asks ``session/request_permission``
    (allow once / always, reject once / always) and, allowed, completes with ``exit_code``
    0 and the command echoed as output (nothing is run);
  - ``EDIT <path>``: an ``edit`` tool call that asks permission, then writes the file
    through ``fs/write_text_file`` and completes with a ``diff`` of it;
  - ``READ <path>``: ``fs/read_text_file``; the answer quotes the content or the error;
  - ``TERM: <command line>`` (last): an ``execute`` tool call running it through
    ``terminal/create`` (with ``TERMCAP<n>``: ``outputByteLimit`` n; ``TERMCWD:<path>``:
    that ``cwd``), then ``wait_for_exit``, ``output`` and ``release``; the answer quotes
    the exit status and the output, or the error. ``TERMKILL``: a ``sleep 60`` terminal
    killed, then read;
  - ``SLOW<n>``: ``n`` message chunks 50 ms apart, stopped by ``session/cancel``;
  - ``HANG``: nothing at all until ``session/cancel``, then the ``cancelled`` answer;
  - ``ASK <method>``: a request of that method to the client; the answer quotes its error;
  - ``STOP:<reason>``: ends with that stop reason; ``NOUSAGE``: no ``usage`` in the
    answer (else ``inputTokens`` 100 + turn, ``outputTokens`` 10 per turn);
  - ``GARBAGE``: a line that is not JSON and one that is not an object first;
  - ``LONG<n>``: a message chunk of ``n`` characters first;
  - ``CRASH``: exits with status 3 in the middle of the turn;
  - otherwise: ``Hello from the fake agent. You said: <text>`` in two chunks.

``FAKE_ACP_LOG``: a file every message sent and received is appended to (JSON lines,
``{"dir": "in"|"out", "msg": ...}``), for schema checks.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]


class FakeAgent:
    def __init__(self, writer: asyncio.StreamWriter | Any) -> None:
        self.out = writer
        self.ids = 0
        self.pending: dict[Any, asyncio.Future[Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.authenticated = not os.environ.get("FAKE_ACP_AUTH")
        self.cancelled: set[str] = set()
        self.turns = 0
        self.cwd = Path.cwd()
        self.log = os.environ.get("FAKE_ACP_LOG")

    # ---------------------------------------------------------------- wire
    def _log(self, direction: str, msg: Any) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(json.dumps({"dir": direction, "msg": msg}) + "\n")

    def send(self, msg: dict[str, Any]) -> None:
        msg = {"jsonrpc": "2.0", **msg}
        self._log("out", msg)
        self.out.write((json.dumps(msg) + "\n").encode())

    def raw(self, line: str) -> None:
        self.out.write((line + "\n").encode())

    def update(self, sid: str, update: dict[str, Any]) -> None:
        self.send({"method": "session/update", "params": {"sessionId": sid, "update": update}})

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """A request to the client; raises RuntimeError with its error message."""
        self.ids += 1
        rid = self.ids
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.send({"id": rid, "method": method, "params": params})
        return await fut

    def on_message(self, msg: dict[str, Any]) -> None:
        self._log("in", msg)
        if "method" not in msg:
            fut = self.pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(RuntimeError(str(msg["error"].get("message"))))
                else:
                    fut.set_result(msg.get("result"))
            return
        method, params = msg["method"], msg.get("params") or {}
        if "id" not in msg:
            if method == "session/cancel":
                self.cancelled.add(str(params.get("sessionId")))
            return
        task = asyncio.ensure_future(self._serve(msg["id"], method, params))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _serve(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        try:
            result = await self.handle(method, params)
        except AgentFailure as e:
            self.send({"id": rid, "error": {"code": e.code, "message": e.message}})
            return
        self.send({"id": rid, "result": result})

    # ---------------------------------------------------------------- methods
    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": not os.environ.get("FAKE_ACP_NO_LOAD"),
                    "promptCapabilities": {"image": False, "audio": False},
                },
                "authMethods": [{"id": "token", "name": "Token", "description": None}],
            }
        if method == "authenticate":
            if params.get("methodId") != "token":
                raise AgentFailure(-32602, f"unknown auth method {params.get('methodId')!r}")
            self.authenticated = True
            return {}
        if method in ("session/new", "session/load"):
            if not self.authenticated:
                raise AgentFailure(-32000, "Authentication required")
            self.cwd = Path(str(params.get("cwd")))
            if method == "session/new":
                sid = f"fake-{uuid.uuid4().hex[:12]}"
                self._history(sid).parent.mkdir(parents=True, exist_ok=True)
                self._history(sid).write_text("")
                return {"sessionId": sid}
            sid = str(params.get("sessionId"))
            if not self._history(sid).is_file():
                raise AgentFailure(-32602, f"unknown session {sid}")
            for line in self._history(sid).read_text().splitlines():
                role, text = json.loads(line)
                kind = "user_message_chunk" if role == "user" else "agent_message_chunk"
                self.update(sid, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})
            return {}
        if method == "session/prompt":
            return await self.prompt(str(params.get("sessionId")), params.get("prompt") or [])
        raise AgentFailure(-32601, f"method not found: {method}")

    def _history(self, sid: str) -> Path:
        state = os.environ.get("FAKE_ACP_STATE") or str(self.cwd / ".fake-acp")
        return Path(state) / f"{sid}.jsonl"

    def _remember(self, sid: str, role: str, text: str) -> None:
        with self._history(sid).open("a") as f:
            f.write(json.dumps([role, text]) + "\n")

    async def prompt(self, sid: str, blocks: list[Any]) -> dict[str, Any]:
        if not self._history(sid).is_file():
            raise AgentFailure(-32602, f"unknown session {sid}")
        self.turns += 1
        self.cancelled.discard(sid)
        text = " ".join(str(b.get("text")) for b in blocks if isinstance(b, dict))
        self._remember(sid, "user", text)
        words = text.split()
        answer = await self._script(sid, text, words)
        if answer is None:
            return {"stopReason": "cancelled"}
        self._remember(sid, "agent", answer)
        reason = "end_turn"
        for w in words:
            if w.startswith("STOP:"):
                reason = w[5:]
        out: dict[str, Any] = {"stopReason": reason}
        if "NOUSAGE" not in words:
            inp, outp = 100 + self.turns, 10
            out["usage"] = {"inputTokens": inp, "outputTokens": outp, "totalTokens": inp + outp}
        return out

    async def _script(self, sid: str, text: str, words: list[str]) -> str | None:
        if "GARBAGE" in words:
            self.raw("this is not json")
            self.raw("[1, 2, 3]")
        for w in words:
            if w.startswith("LONG") and w[4:].isdigit():
                self.update(
                    sid,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "y" * int(w[4:])},
                    },
                )
        if "CRASH" in words:
            await self.out.drain()
            os._exit(3)
        if "THINK" in words:
            for piece in ("Let me ", "think."):
                self.update(
                    sid,
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": piece},
                    },
                )
        if "TERM:" in text or "TERMKILL" in words:
            return self._say(sid, await self._terminal(sid, text, words))
        if "PLAN" in words:
            entries = [
                {"content": "look around", "priority": "high", "status": "completed"},
                {"content": "change things", "priority": "medium", "status": "in_progress"},
            ]
            self.update(sid, {"sessionUpdate": "plan", "entries": entries})
        for i, w in enumerate(words):
            arg = words[i + 1] if i + 1 < len(words) else ""
            if w == "RUN":
                said = await self._run(sid, arg)
                if said is None:
                    return None
                return self._say(sid, said)
            if w == "EDIT":
                said = await self._edit(sid, arg)
                if said is None:
                    return None
                return self._say(sid, said)
            if w == "READ":
                try:
                    got = await self.ask("fs/read_text_file", {"sessionId": sid, "path": arg})
                    return self._say(sid, f"read {len(got['content'])} characters")
                except RuntimeError as e:
                    return self._say(sid, f"read failed: {e}")
            if w == "HANG":
                while sid not in self.cancelled:
                    await asyncio.sleep(0.02)
                return None
            if w == "ASK":
                try:
                    await self.ask(arg, {"sessionId": sid})
                    return self._say(sid, f"{arg} answered")
                except RuntimeError as e:
                    return self._say(sid, f"{arg} failed: {e}")
            if w.startswith("SLOW"):
                n = int(w[4:] or "10")
                for k in range(n):
                    if sid in self.cancelled:
                        return None
                    self.update(
                        sid,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": f"word{k} "},
                        },
                    )
                    await self.out.drain()
                    await asyncio.sleep(0.05)
                return "slow answer"
        return self._say(sid, f"Hello from the fake agent. You said: {text[:80]}")

    async def _terminal(self, sid: str, text: str, words: list[str]) -> str:
        killing = "TERMKILL" in words
        params: dict[str, Any] = {
            "sessionId": sid,
            "command": "sleep 60" if killing else text.split("TERM:", 1)[1].strip(),
        }
        for w in words:
            if w.startswith("TERMCAP"):
                params["outputByteLimit"] = int(w[7:])
            if w.startswith("TERMCWD:"):
                params["cwd"] = w[8:]
        try:
            tid = (await self.ask("terminal/create", params))["terminalId"]
        except RuntimeError as e:
            return f"terminal failed: {e}"
        call = {"toolCallId": f"call-{tid}", "title": params["command"], "kind": "execute"}
        content = [{"type": "terminal", "terminalId": tid}]
        self.update(
            sid, {"sessionUpdate": "tool_call", **call, "status": "in_progress", "content": content}
        )
        ref = {"sessionId": sid, "terminalId": tid}
        if killing:
            await self.ask("terminal/kill", ref)
        status = await self.ask("terminal/wait_for_exit", ref)
        out = await self.ask("terminal/output", ref)
        await self.ask("terminal/release", ref)
        self._status(sid, call["toolCallId"], "completed")
        return (
            f"terminal exit {status.get('exitCode')} signal {status.get('signal')} "
            f"truncated {out['truncated']}: {out['output']}"
        )

    def _say(self, sid: str, text: str) -> str:
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            self.update(
                sid,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": piece},
                },
            )
        return text

    def _status(self, sid: str, call_id: str, status: str, **more: Any) -> None:
        update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
        self.update(sid, {**update, **more})

    async def _asked(self, sid: str, call: dict[str, Any]) -> str | None:
        """Report the tool call, ask permission: the option kind chosen (a rejection
        fails the call), or None when the turn was cancelled."""
        self.update(sid, {"sessionUpdate": "tool_call", **call, "status": "pending"})
        kind = await self._permit(sid, call)
        if kind is not None and not kind.startswith("allow"):
            self._status(sid, call["toolCallId"], "failed")
        return kind

    async def _permit(self, sid: str, call: dict[str, Any]) -> str | None:
        """The option kind chosen, or None when the turn was cancelled."""
        res = await self.ask(
            "session/request_permission", {"sessionId": sid, "toolCall": call, "options": OPTIONS}
        )
        outcome = res.get("outcome") or {}
        if outcome.get("outcome") != "selected":
            return None
        kinds: dict[Any, str] = {o["optionId"]: o["kind"] for o in OPTIONS}
        return kinds.get(outcome.get("optionId"), "reject_once")

    async def _run(self, sid: str, cmd: str) -> str | None:
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        call = {
            "toolCallId": call_id,
            "title": cmd,
            "kind": "execute",
            "rawInput": {"command": cmd},
        }
        kind = await self._asked(sid, call)
        if kind is None:
            return None
        if not kind.startswith("allow"):
            return f"the command was rejected ({kind})"
        self._status(sid, call_id, "in_progress")
        out = f"ran {cmd}"
        self._status(
            sid,
            call_id,
            "completed",
            content=[{"type": "content", "content": {"type": "text", "text": out}}],
            rawOutput={"exit_code": 0, "output": out},
        )
        return f"Command finished: {out}"

    async def _edit(self, sid: str, name: str) -> str | None:
        path = str(self.cwd / name)
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        call = {
            "toolCallId": call_id,
            "title": f"edit {name}",
            "kind": "edit",
            "locations": [{"path": path}],
            "rawInput": {"path": path},
        }
        kind = await self._asked(sid, call)
        if kind is None:
            return None
        if not kind.startswith("allow"):
            return f"the edit was rejected ({kind})"
        try:
            old = (await self.ask("fs/read_text_file", {"sessionId": sid, "path": path}))["content"]
        except RuntimeError:
            old = ""
        new = old + "edited by the fake agent\n"
        try:
            await self.ask("fs/write_text_file", {"sessionId": sid, "path": path, "content": new})
        except RuntimeError as e:
            self._status(sid, call_id, "failed")
            return f"write failed: {e}"
        diff = {"type": "diff", "path": path, "oldText": old or None, "newText": new}
        self._status(sid, call_id, "completed", content=[diff])
        lines = len(list(difflib.unified_diff(old.splitlines(), new.splitlines())))
        return f"Edited {name} ({lines} diff lines)"


class AgentFailure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    agent = FakeAgent(writer)
    while True:
        line = await reader.readline()
        if not line:
            break
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(msg, dict):
            agent.on_message(msg)


if __name__ == "__main__":
    asyncio.run(main())
