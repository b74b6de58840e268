"""JSON-RPC lines on stdio, server side (docs/protocols.md "Codex app-server", "Wire").

One JSON object per line, no ``jsonrpc`` field. The demo agent is the *server*: it answers the
client's requests, sends notifications (each stamped with a top-level ``emittedAtMs``, as codex
0.171 does) and sends its own requests (approvals, dynamic tool calls) with its own integer id
sequence starting at 0, then waits for the client's ``{id, result}`` / ``{id, error}``.

Stdin is read by a daemon thread with ``os.read`` (not the buffered ``sys.stdin``) so that the
interpreter can shut down while the thread is blocked in a read, and so that regular files work
as well as pipes (asyncio pipe readers reject regular files).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

MAX_LINE_BYTES = 10 * 1024 * 1024
"""Longest accepted input line; longer lines are dropped with a stderr note."""


def now_ms() -> int:
    """Wall-clock Unix time in milliseconds (the unit of ``emittedAtMs``)."""
    return time.time_ns() // 1_000_000


def note(message: str) -> None:
    """One diagnostic line on stderr (stdout is reserved for protocol lines)."""
    try:
        sys.stderr.write(f"symphony-demo-agent: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class RequestFailed(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, error: Any) -> None:
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(str(message or error))
        self.error = error


@dataclass(frozen=True)
class Incoming:
    """A client request (``id`` set) or notification (``id`` is None)."""

    method: str
    params: Any
    id: Any = None


class EndOfInput(Exception):
    """Stdin reached EOF."""


class StdioTransport:
    """Line framing, request/response correlation and notification stamping.

    ``read()`` yields client requests and notifications; responses to our own requests are
    routed to the futures returned by :meth:`request`. Malformed lines are dropped with a
    stderr note. Writes are synchronous; a closed stdout raises :class:`EndOfInput` in the
    reader's stead so the server shuts down as it would on EOF.
    """

    def __init__(self, stdin_fd: int = 0, stdout: BinaryIO | None = None) -> None:
        self._fd = stdin_fd
        self._out = stdout if stdout is not None else sys.stdout.buffer
        self._queue: asyncio.Queue[Incoming | None] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start the stdin reader thread (call from inside the running loop)."""
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._read_loop, name="demo-stdin", daemon=True).start()

    async def read(self) -> Incoming:
        """The next client request or notification. Raises :class:`EndOfInput` at EOF."""
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)  # keep EOF sticky for any other reader
            raise EndOfInput
        return item

    # -- writing ---------------------------------------------------------------------------

    def _write(self, obj: dict[str, Any]) -> None:
        if self._closed:
            return
        try:
            self._out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
            self._out.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The client went away: behave as on EOF.
            self._closed = True
            self._queue.put_nowait(None)

    def respond(self, request_id: Any, result: Any) -> None:
        self._write({"id": request_id, "result": result})

    def respond_error(self, request_id: Any, code: int, message: str) -> None:
        self._write({"id": request_id, "error": {"code": code, "message": message}})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._write({"method": method, "params": params, "emittedAtMs": now_ms()})

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, asyncio.Future[Any]]:
        """Send a server request; returns its id and a future for the client's result.

        The future raises :class:`RequestFailed` on a JSON-RPC error and
        :class:`EndOfInput` when the client goes away first.
        """
        assert self._loop is not None, "start() first"
        request_id = self._next_id
        self._next_id += 1
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = fut
        self._write({"id": request_id, "method": method, "params": params})
        return request_id, fut

    def forget(self, request_id: int) -> None:
        """Stop waiting for a request's answer (an interrupted turn); a late answer is ignored."""
        fut = self._pending.pop(request_id, None)
        if fut is not None and not fut.done():
            fut.cancel()

    # -- reading ---------------------------------------------------------------------------

    def _read_loop(self) -> None:
        buf = b""
        skipping = False
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                if buf.strip() and not skipping:
                    self._deliver(buf)
                self._post(None)
                return
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line, buf = buf[:nl], buf[nl + 1 :]
                if skipping:
                    skipping = False
                    continue
                if line.strip():
                    self._deliver(line)
            if len(buf) > MAX_LINE_BYTES:
                note(f"dropping an input line longer than {MAX_LINE_BYTES} bytes")
                buf = b""
                skipping = True

    def _post(self, item: Incoming | None) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            pass  # loop already closed: we are shutting down

    def _deliver(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            note(f"ignoring a malformed line: {line[:80]!r}")
            return
        if not isinstance(msg, dict):
            note(f"ignoring a line that is not a JSON object: {line[:80]!r}")
            return
        method = msg.get("method")
        if isinstance(method, str):
            self._post(Incoming(method=method, params=msg.get("params"), id=msg.get("id")))
        elif "id" in msg and ("result" in msg or "error" in msg):
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._resolve, msg)
        else:
            note(f"ignoring a message with neither method nor result: {line[:80]!r}")

    def _resolve(self, msg: dict[str, Any]) -> None:
        request_id = msg.get("id")
        fut = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if fut is None:
            note(f"ignoring a response to unknown request id {request_id!r}")
            return
        if fut.done():
            return
        if "error" in msg:
            fut.set_exception(RequestFailed(msg["error"]))
        else:
            fut.set_result(msg.get("result"))

    def fail_pending(self) -> None:
        """Fail every outstanding server request (the client is gone)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(EndOfInput())
        self._pending.clear()
