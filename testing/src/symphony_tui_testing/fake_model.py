"""A scripted OpenAI-compatible model server for driving real coding agents offline.

Stdlib only (``ThreadingHTTPServer``), bound to 127.0.0.1. Codex, OpenHands (LiteLLM) and
OpenCode all accept it (docs/protocols.md "Loopback and the fake model").

Endpoints (also accepted without the ``/v1`` prefix):

* ``POST /v1/responses`` - OpenAI Responses API; SSE when ``stream`` is true (codex).
* ``POST /v1/chat/completions`` - Chat Completions, streaming or not; a streamed answer ends
  with a usage chunk when ``stream_options.include_usage`` is set (LiteLLM, OpenCode).
* ``GET /v1/models`` - a one-model list.

The answer is scripted from the text of the LAST user message:

* ``TOOL: <name> <json-args>`` - call that function tool (matched exactly, else by suffix);
* ``SHELL: <cmd>`` - call the backend's shell tool (picked from the request's tools); with
  ``ESCALATE`` also in the text, codex's ``sandbox_permissions=require_escalated`` +
  ``justification`` are set so that codex asks for a real approval;
* ``SLOW<n>`` - stream ``n`` words, ``slow_delay`` seconds apart (interrupt tests);
* ``THINK<n>`` (with a text or slow answer, Responses API streaming only) - first stream a
  reasoning item whose summary is ``n`` words (``response.reasoning_summary_text.delta``);
* ``GODOWN`` (with any other script) - the server goes down once this answer is delivered:
  it stops listening, so the next request is refused (codex then retries for ever);
* anything else - a short text answer quoting the message.

``aliases`` (constructor) replace words of the last user message before it is scripted,
so one WORKFLOW.md continuation prompt such as ``STEP{turn}`` can drive different turns.

When the last input item is a tool result the answer is text quoting that result, so a
tool turn ends after one round trip.

Usage numbers are deterministic and differ per response (see :func:`usage_for`);
:attr:`FakeModelServer.usage_total` is the sum of what was actually delivered, so tests can
compare an agent's reported totals with it. ``chat_usage=False`` leaves usage out of every
Chat Completions answer, as a provider that reports none.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from symphony_tui.domain.tokens import TokenUsage

SHELL_TOOL_NAMES = (
    "exec_command",
    "shell_command",
    "shell",
    "local_shell",
    "bash",
    "execute_bash",
    "terminal",
)
_TOOL_RESULT_TYPES = ("function_call_output", "local_shell_call_output", "custom_tool_call_output")


# ---------------------------------------------------------------- script


@dataclass
class Decision:
    """What the fake model does for one request.

    ``kind``: ``text`` | ``slow`` | ``shell`` | ``tool``; ``down``: stop serving after it. ``tool``/``arguments`` are set for
    ``tool``; ``command``/``escalate`` for ``shell``; ``words`` for ``slow``.
    """

    kind: str
    text: str = ""
    words: list[str] = field(default_factory=list)
    command: str = ""
    escalate: bool = False
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    think: list[str] = field(default_factory=list)
    down: bool = False

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.down:
            out["down"] = True
        if self.think:
            out["think"] = len(self.think)
        if self.kind == "shell":
            out.update(command=self.command, escalate=self.escalate)
        elif self.kind == "tool":
            out.update(tool=self.tool, arguments=self.arguments)
        elif self.kind == "slow":
            out["words"] = len(self.words)
        return out


def decide(last_user: str, tool_result: str | None) -> Decision:
    """Pick the scripted answer. ``tool_result`` is not None when the last item is a result."""
    d = _decide(last_user, tool_result)
    d.down = tool_result is None and "GODOWN" in last_user
    return d


def _decide(last_user: str, tool_result: str | None) -> Decision:
    if tool_result is not None:
        return Decision("text", text=f"Tool finished. Output was: {tool_result.strip()[:200]}")
    m = re.search(r"TOOL:\s*(\S+)\s*(.*)", last_user, re.S)
    if m:
        raw = m.group(2).strip()
        try:
            args = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            args = {"input": raw}
        return Decision("tool", tool=m.group(1), arguments=args if isinstance(args, dict) else {})
    m = re.search(r"THINK(\d+)", last_user)
    think = [f"thought{i} " for i in range(int(m.group(1)))] if m else []
    m = re.search(r"SLOW(\d+)", last_user)
    if m:
        return Decision("slow", words=[f"word{i} " for i in range(int(m.group(1)))], think=think)
    if "SHELL" in last_user:
        m = re.search(r"SHELL:\s*(.+)", last_user)
        cmd = m.group(1).strip().splitlines()[0] if m else "echo hi"
        return Decision("shell", command=cmd, escalate="ESCALATE" in last_user)
    return Decision(
        "text", text=f"Hello from the fake model. You said: {last_user.strip()[:80]}", think=think
    )


def usage_for(n: int, items: int) -> TokenUsage:
    """Deterministic usage of response number ``n`` (1-based) for a request of ``items``.

    input = 100 + 10*items; cached input = 20*(n % 3); output = 10 + 2*(n % 4) + reasoning;
    reasoning = 3 on even ``n``; total = input + output.
    """
    reasoning = 3 if n % 2 == 0 else 0
    inp = 100 + 10 * items
    out = 10 + 2 * (n % 4) + reasoning
    return TokenUsage(
        input_tokens=inp,
        cached_input_tokens=min(inp, 20 * (n % 3)),
        output_tokens=out,
        reasoning_tokens=reasoning,
        total_tokens=inp + out,
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(str(p.get("text") or ""))
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return ""


def _tools_by_name(tools: Any, api: str) -> dict[str, dict[str, Any]]:
    """name -> JSON schema of parameters ({} for tools without one)."""
    out: dict[str, dict[str, Any]] = {}
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if api == "chat":
            fn = t.get("function") or {}
            if fn.get("name"):
                out[fn["name"]] = fn.get("parameters") or {}
        elif t.get("type") == "function" and t.get("name"):
            out[t["name"]] = t.get("parameters") or {}
        elif t.get("type") == "local_shell":
            out["local_shell"] = {}
        elif t.get("type") == "namespace":
            # Grouped tools (codex may namespace dynamic/MCP tools): flatten them.
            for name, schema in _tools_by_name(t.get("tools"), api).items():
                out.setdefault(name, schema)
    return out


def _shell_args(schema: dict[str, Any], cmd: str, escalate: bool) -> dict[str, Any]:
    """Arguments for a shell-like tool, filled from its JSON schema."""
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    if escalate and "sandbox_permissions" in props:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = f"The fake model wants to run `{cmd}` outside the sandbox"
    for key in ("command", "cmd"):
        if key in props:
            args[key] = ["bash", "-lc", cmd] if props[key].get("type") == "array" else cmd
            break
    for key in schema.get("required") or []:
        if key in args:
            continue
        p = props.get(key) or {}
        if "enum" in p:
            args[key] = p["enum"][0]
        elif p.get("type") == "boolean":
            args[key] = False
        elif p.get("type") in ("integer", "number"):
            args[key] = 10
        elif p.get("type") == "array":
            args[key] = []
        else:
            args[key] = f"Runs: {cmd}"
    if "security_risk" in props and "security_risk" not in args:
        enum = props["security_risk"].get("enum") or ["LOW"]
        args["security_risk"] = "LOW" if "LOW" in enum else enum[0]
    return args


@dataclass
class _Call:
    """A function call the model makes: tool name, JSON arguments, and local_shell flag."""

    name: str
    arguments: str
    local_shell: bool = False
    command: list[str] = field(default_factory=list)


def _plan_call(d: Decision, tools: dict[str, dict[str, Any]]) -> _Call | Decision:
    """Resolve a shell/tool decision against the offered tools (or fall back to text)."""
    if d.kind == "tool":
        name = d.tool if d.tool in tools else next((t for t in tools if t.endswith(d.tool)), None)
        if name is None:
            return Decision("text", text=f"No tool named {d.tool}; tools were {sorted(tools)}")
        return _Call(name, json.dumps(d.arguments))
    for name in SHELL_TOOL_NAMES:
        if name in tools:
            if name == "local_shell":
                return _Call(name, "", local_shell=True, command=["bash", "-lc", d.command])
            return _Call(name, json.dumps(_shell_args(tools[name], d.command, d.escalate)))
    return Decision("text", text=f"No shell tool offered; tools were {sorted(tools)}")


# ---------------------------------------------------------------- server


class FakeModelServer:
    """The fake model server. ``port=0`` picks a free port; ``url`` ends with ``/v1``.

    ``requests``: one dict per model request (``n``, ``path``, ``api``, ``body``,
    ``decision``, ``status``). ``usage_log``: the usage of each response actually delivered
    (a stream cut short by the client reports none). Thread-safe.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        slow_delay: float = 0.05,
        model: str = "fake-model",
        aliases: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        chat_usage: bool = True,
    ) -> None:
        self.host = host
        self.chat_usage = chat_usage
        self.aliases = dict(aliases or {})
        # Extra HTTP headers on every model answer, e.g. codex's rate-limit headers
        # (``x-codex-primary-used-percent``...), which codex turns into
        # ``account/rateLimits/updated`` for any provider.
        self.headers = dict(headers or {})
        self._want_port = port
        self.slow_delay = slow_delay
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.usage_log: list[TokenUsage] = []
        self._lock = threading.Lock()
        self._fail: list[int] = []  # statuses of the next failing requests
        self._conns: set[socket.socket] = set()  # open client connections (keep-alive too)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle
    def start(self) -> FakeModelServer:
        if self._httpd is not None:
            return self
        # After a stop, start again on the same port (the model server "comes back").
        port = self._port if self._port is not None else self._want_port
        httpd = ThreadingHTTPServer((self.host, port), _handler_for(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever, name="fake-model", kwargs={"poll_interval": 0.1}
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket, so connections are refused afterwards.
        :meth:`start` serves again on the same port; the request and usage logs go on."""
        self._stop_listening()
        # A keep-alive connection would otherwise go on being served: drop them all so
        # "the model server is down" holds for clients with connection pools too.
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _stop_listening(self) -> None:
        """Close the listening socket; connections already accepted are not touched."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- facts
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeModelServer not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def usage_total(self) -> TokenUsage:
        with self._lock:
            total = TokenUsage()
            for u in self.usage_log:
                total = total + u
            return total

    def expand(self, text: str) -> str:
        """``text`` with every alias word replaced by its script (longest alias first)."""
        for word in sorted(self.aliases, key=len, reverse=True):
            text = re.sub(rf"\b{re.escape(word)}\b", lambda _m, w=word: self.aliases[w], text)
        return text

    def fail_next(self, status: int = 500, count: int = 1) -> None:
        """Make the next ``count`` model requests answer HTTP ``status`` with an error body."""
        with self._lock:
            self._fail.extend([status] * count)

    def decisions(self) -> list[str]:
        """The decision kinds of the recorded requests, in order (handy in assertions)."""
        with self._lock:
            return [r["decision"]["kind"] for r in self.requests if r.get("decision")]

    # -- used by the handler
    def _record(self, entry: dict[str, Any]) -> tuple[int, int | None]:
        with self._lock:
            n = len(self.requests) + 1
            entry["n"] = n
            fail = self._fail.pop(0) if self._fail else None
            entry["status"] = fail or 200
            self.requests.append(entry)
            return n, fail

    def _delivered(self, usage: TokenUsage) -> None:
        with self._lock:
            self.usage_log.append(usage)

    def _undelivered(self, usage: TokenUsage) -> None:
        with self._lock:
            for i in range(len(self.usage_log) - 1, -1, -1):
                if self.usage_log[i] is usage:
                    del self.usage_log[i]
                    break


def _handler_for(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: FakeModelServer
    down_after = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._conns.add(self.connection)

    def finish(self) -> None:
        with self.owner._lock:
            self.owner._conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    # -- plumbing
    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        if status == 200:
            self._extra_headers()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _extra_headers(self) -> None:
        for name, value in self.owner.headers.items():
            self.send_header(name, value)

    def _start_sse(self) -> None:
        self.send_response(200)
        self._extra_headers()
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        p = self.path.split("?")[0].rstrip("/")
        if p in ("/v1/models", "/models"):
            m = self.owner.model
            self._json(
                {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake"}]}
            )
        elif p in ("", "/health"):
            self._json({"ok": True})
        else:
            self._json({"error": {"message": f"not found: {p}"}}, 404)

    def do_POST(self) -> None:
        p = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding"):
            self._json({"error": {"message": "compressed bodies are not supported"}}, 400)
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as e:
            self._json({"error": {"message": f"bad json: {e}"}}, 400)
            return
        try:
            self.down_after = False
            if p.endswith("/responses"):
                self._responses(p, body)
            elif p.endswith("/chat/completions"):
                self._chat(p, body)
            else:
                self._json({"error": {"message": f"not found: {p}"}}, 404)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (an interrupt); nothing was delivered
        if self.down_after:
            self.close_connection = True
            self.owner.stop()  # GODOWN: the answer is out; drop what is left

    def _final(self, usage: TokenUsage, write: Any) -> None:
        """Count ``usage`` as delivered, then write the message that carries it. Counting
        first means a client that reads the answer always sees it in ``usage_total``; a
        write that fails takes it back."""
        self.owner._delivered(usage)
        try:
            write()
        except (BrokenPipeError, ConnectionResetError):
            self.owner._undelivered(usage)
            raise

    def _admit(self, path: str, api: str, body: dict[str, Any], d: Decision) -> int | None:
        """Record the request; answer an injected failure (returns None) or return the
        request number. A ``GODOWN`` decision stops listening before the answer is out, so
        a client that asks again at once already meets a closed port."""
        n, fail = self.owner._record(
            {"path": path, "api": api, "body": body, "decision": d.summary()}
        )
        if fail:
            self._fail(fail)
            return None
        self.down_after = d.down
        if d.down:
            self.owner._stop_listening()
        return n

    def _fail(self, status: int) -> None:
        self._json({"error": {"message": f"fake failure {status}", "type": "server_error"}}, status)

    # -- Responses API (codex)
    def _responses(self, path: str, body: dict[str, Any]) -> None:
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        last_user = ""
        for it in items:
            if it.get("type", "message") == "message" and it.get("role") == "user":
                last_user = _text_of(it.get("content"))
        last = items[-1] if items else {}
        result = _text_of(last.get("output")) if last.get("type") in _TOOL_RESULT_TYPES else None
        d = decide(self.owner.expand(last_user), result)
        plan = (
            _plan_call(d, _tools_by_name(body.get("tools"), "responses"))
            if d.kind
            in (
                "shell",
                "tool",
            )
            else d
        )
        call = plan if isinstance(plan, _Call) else None
        if isinstance(plan, Decision):
            d = plan
        n = self._admit(path, "responses", body, d)
        if n is None:
            return
        usage = usage_for(n, len(items))
        wire_usage = {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens,
        }
        rid = f"resp_{n}"
        output: list[dict[str, Any]] = []
        if call is not None:
            if call.local_shell:
                output.append(
                    {
                        "type": "local_shell_call",
                        "id": f"lsc_{n}",
                        "call_id": f"call_{n}",
                        "status": "completed",
                        "action": {"type": "exec", "command": call.command},
                    }
                )
            else:
                output.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{n}",
                        "call_id": f"call_{n}",
                        "name": call.name,
                        "arguments": call.arguments,
                        "status": "completed",
                    }
                )
        if not body.get("stream"):
            words = list(self._words(d))
            if words:
                output.append(_message_item(f"msg_{n}", "".join(words)))
            reply = {
                "id": rid,
                "object": "response",
                "status": "completed",
                "model": body.get("model"),
                "output": output,
                "usage": wire_usage,
            }
            self._final(usage, lambda: self._json(reply))
            return
        self._start_sse()
        seq = 0

        def ev(obj: dict[str, Any]) -> None:
            nonlocal seq
            obj["sequence_number"] = seq
            seq += 1
            self._chunk(f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n")

        resp = {
            "id": rid,
            "object": "response",
            "status": "in_progress",
            "model": body.get("model"),
            "output": [],
        }
        ev({"type": "response.created", "response": resp})
        ev({"type": "response.in_progress", "response": resp})
        if call is None:
            mid = f"msg_{n}"
            at = 0
            if d.think:
                output.append(self._stream_reasoning(ev, f"rs_{n}", d.think))
                at = 1
            ev(
                {
                    "type": "response.output_item.added",
                    "output_index": at,
                    "item": {
                        "type": "message",
                        "id": mid,
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    },
                }
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            base = {"item_id": mid, "output_index": at, "content_index": 0}
            ev({"type": "response.content_part.added", **base, "part": part})
            full = ""
            for w in self._words(d, stream=True):
                full += w
                ev({"type": "response.output_text.delta", **base, "delta": w})
            ev({"type": "response.output_text.done", **base, "text": full})
            ev({"type": "response.content_part.done", **base, "part": dict(part, text=full)})
            item = _message_item(mid, full)
            ev({"type": "response.output_item.done", "output_index": at, "item": item})
            output.append(item)
        else:
            for i, item in enumerate(output):
                added = dict(item, status="in_progress")
                if item["type"] == "function_call":
                    added["arguments"] = ""
                ev({"type": "response.output_item.added", "output_index": i, "item": added})
                if item["type"] == "function_call":
                    base = {"item_id": item["id"], "output_index": i}
                    args = item["arguments"]
                    ev({"type": "response.function_call_arguments.delta", **base, "delta": args})
                    ev({"type": "response.function_call_arguments.done", **base, "arguments": args})
                ev({"type": "response.output_item.done", "output_index": i, "item": item})
        done = dict(resp, status="completed", output=output, usage=wire_usage)
        self._final(usage, lambda: ev({"type": "response.completed", "response": done}))
        self._end_chunks()

    def _stream_reasoning(self, ev: Any, rid: str, words: list[str]) -> dict[str, Any]:
        """Stream a reasoning item (output index 0) whose one summary part is ``words``."""
        ev(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "reasoning", "id": rid, "summary": []},
            }
        )
        base = {"item_id": rid, "output_index": 0, "summary_index": 0}
        part = {"type": "summary_text", "text": ""}
        ev({"type": "response.reasoning_summary_part.added", **base, "part": part})
        text = ""
        for w in words:
            text += w
            ev({"type": "response.reasoning_summary_text.delta", **base, "delta": w})
        ev({"type": "response.reasoning_summary_text.done", **base, "text": text})
        ev({"type": "response.reasoning_summary_part.done", **base, "part": dict(part, text=text)})
        item = {"type": "reasoning", "id": rid, "summary": [{"type": "summary_text", "text": text}]}
        ev({"type": "response.output_item.done", "output_index": 0, "item": item})
        return item

    def _words(self, d: Decision, stream: bool = False) -> Iterator[str]:
        """The text pieces of a text/slow answer (sleeping between slow words)."""
        if d.kind == "slow":
            for w in d.words:
                yield w
                time.sleep(self.owner.slow_delay)
        elif d.kind == "text":
            yield from re.findall(r"\S+\s*", d.text)

    # -- Chat Completions (LiteLLM, OpenCode)
    def _chat(self, path: str, body: dict[str, Any]) -> None:
        msgs = body.get("messages") or []
        last_user = ""
        for m in msgs:
            if isinstance(m, dict) and m.get("role") == "user":
                last_user = _text_of(m.get("content"))
        last = msgs[-1] if msgs else {}
        result = _text_of(last.get("content")) if last.get("role") == "tool" else None
        d = decide(self.owner.expand(last_user), result)
        plan = (
            _plan_call(d, _tools_by_name(body.get("tools"), "chat"))
            if d.kind
            in (
                "shell",
                "tool",
            )
            else d
        )
        call = plan if isinstance(plan, _Call) and not plan.local_shell else None
        if isinstance(plan, Decision):
            d = plan
        n = self._admit(path, "chat", body, d)
        if n is None:
            return
        usage = usage_for(n, len(msgs))
        wire_usage = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        }
        cid = f"chatcmpl-{n}"
        created = int(time.time())
        model = body.get("model") or self.owner.model
        tool_call = None
        if call is not None:
            tool_call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
        if not body.get("stream"):
            text = "".join(self._words(d))
            msg: dict[str, Any] = {"role": "assistant", "content": None if tool_call else text}
            if tool_call:
                msg["tool_calls"] = [tool_call]
            reply = {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": msg,
                        "finish_reason": "tool_calls" if tool_call else "stop",
                    }
                ],
                "usage": wire_usage,
            }
            if not self.owner.chat_usage:
                del reply["usage"]
                self._json(reply)
                return
            self._final(usage, lambda: self._json(reply))
            return
        self._start_sse()
        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            obj = dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            self._chunk(f"data: {json.dumps(obj)}\n\n")

        chunk({"role": "assistant", "content": ""})
        if tool_call:
            fn = tool_call["function"]
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": tool_call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": fn["arguments"]}}]})
            chunk({}, "tool_calls")
        else:
            for w in self._words(d, stream=True):
                chunk({"content": w})
            chunk({}, "stop")
        if self.owner.chat_usage and (body.get("stream_options") or {}).get("include_usage"):
            last = f"data: {json.dumps(dict(head, choices=[], usage=wire_usage))}\n\n"
            self._final(usage, lambda: self._chunk(last))
        self._chunk("data: [DONE]\n\n")
        self._end_chunks()


def _message_item(mid: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": mid,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Scripted fake OpenAI-compatible model server")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="fake-model")
    ap.add_argument("--slow-delay", type=float, default=0.05)
    a = ap.parse_args(argv)
    srv = FakeModelServer(port=a.port, slow_delay=a.slow_delay, model=a.model).start()
    print(f"fake model server on {srv.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
