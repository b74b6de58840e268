"""The demo agent's JSON-RPC, server side (docs/protocols.md "Codex app-server", "Wire").

One JSON object per message, no ``jsonrpc`` field. The demo agent is the *server*: it answers
the client's requests, sends notifications (each stamped with a top-level ``emittedAtMs``, as
codex 0.171 does) and sends its own requests (approvals, dynamic tool calls) with its own
integer id sequence starting at 0, then waits for the client's ``{id, result}`` /
``{id, error}``. :class:`Transport` holds that part; :class:`StdioTransport` frames it as
lines on stdio, :class:`~symphony_tui.demo.listen.SocketTransport` as WebSocket text frames
on a unix socket.

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
    """A client request (``id`` set) or notification (``id`` is None), from connection
    ``peer`` (always 0 on stdio; a socket numbers its connections from 1)."""

    method: str
    params: Any
    id: Any = None
    peer: int = 0


class EndOfInput(Exception):
    """Stdin reached EOF."""


@dataclass
class _Pending:
    """One of our requests waiting for the client: its message (sent again to a new
    connection that resumes ``thread_id``) and the future of its answer."""

    message: dict[str, Any]
    thread_id: str | None
    future: asyncio.Future[Any]


class Transport:
    """Request/response correlation and notification stamping over some framing.

    ``read()`` yields client requests and notifications; answers to our own requests are
    routed to the futures :meth:`request` returns. A subclass frames the messages:
    :meth:`_send` writes one message (to the client that may see it), :meth:`_deliver` takes
    one received message. Malformed messages are dropped with a stderr note.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Incoming | None] = asyncio.Queue()
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def read(self) -> Incoming:
        """The next client request or notification. Raises :class:`EndOfInput` at EOF."""
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)  # keep EOF sticky for any other reader
            raise EndOfInput
        return item

    # -- writing ---------------------------------------------------------------------------

    def _send(self, obj: dict[str, Any], *, peer: int | None = None) -> None:
        """Write one message: an answer to connection ``peer``, else a message about
        ``obj``'s thread (``params.threadId``) or about no thread."""
        raise NotImplementedError

    def respond(self, request_id: Any, result: Any, peer: int = 0) -> None:
        self._send({"id": request_id, "result": result}, peer=peer)

    def respond_error(self, request_id: Any, code: int, message: str, peer: int = 0) -> None:
        self._send({"id": request_id, "error": {"code": code, "message": message}}, peer=peer)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params, "emittedAtMs": now_ms()})

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, asyncio.Future[Any]]:
        """Send a server request; returns its id and a future for the client's result.

        The future raises :class:`RequestFailed` on a JSON-RPC error and
        :class:`EndOfInput` when the client goes away first (stdio; on a socket the
        request waits for the next client, :meth:`resend_pending`).
        """
        assert self._loop is not None, "start() first"
        request_id = self._next_id
        self._next_id += 1
        fut: asyncio.Future[Any] = self._loop.create_future()
        message = {"id": request_id, "method": method, "params": params}
        thread_id = params.get("threadId")
        self._pending[request_id] = _Pending(
            message, thread_id if isinstance(thread_id, str) else None, fut
        )
        self._send(message)
        return request_id, fut

    def forget(self, request_id: int) -> None:
        """Stop waiting for a request's answer (an interrupted turn); a late answer is ignored."""
        pending = self._pending.pop(request_id, None)
        if pending is not None and not pending.future.done():
            pending.future.cancel()

    def subscribe(self, peer: int, thread_id: str) -> None:
        """Connection ``peer`` follows ``thread_id`` (``thread/start``, ``thread/resume``);
        stdio has one client, which follows every thread."""

    def resend_pending(self, peer: int, thread_id: str) -> None:
        """Send ``thread_id``'s unanswered requests again (same ids) to connection ``peer``,
        which resumed the thread; stdio never loses its client, so has none to send."""

    # -- reading ---------------------------------------------------------------------------

    def _post(self, item: Incoming | None) -> None:
        self._queue.put_nowait(item)

    def _deliver(self, raw: bytes | str, peer: int = 0) -> None:
        """One received message (in the loop's thread)."""
        try:
            msg = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            note(f"ignoring a malformed line: {raw[:80]!r}")
            return
        if not isinstance(msg, dict):
            note(f"ignoring a line that is not a JSON object: {raw[:80]!r}")
            return
        method = msg.get("method")
        if isinstance(method, str):
            self._post(
                Incoming(method=method, params=msg.get("params"), id=msg.get("id"), peer=peer)
            )
        elif "id" in msg and ("result" in msg or "error" in msg):
            self._resolve(msg)
        else:
            note(f"ignoring a message with neither method nor result: {raw[:80]!r}")

    def _resolve(self, msg: dict[str, Any]) -> None:
        request_id = msg.get("id")
        pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            note(f"ignoring a response to unknown request id {request_id!r}")
            return
        if pending.future.done():
            return
        if "error" in msg:
            pending.future.set_exception(RequestFailed(msg["error"]))
        else:
            pending.future.set_result(msg.get("result"))

    def fail_pending(self) -> None:
        """Fail every outstanding server request (the client is gone, or we stop)."""
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(EndOfInput())
        self._pending.clear()


class StdioTransport(Transport):
    """Line framing on stdin/stdout.

    Stdin is read by a daemon thread; each line is handed to the loop. Writes are
    synchronous; a closed stdout raises :class:`EndOfInput` in the reader's stead so the
    server shuts down as it would on EOF.
    """

    def __init__(self, stdin_fd: int = 0, stdout: BinaryIO | None = None) -> None:
        super().__init__()
        self._fd = stdin_fd
        self._out = stdout if stdout is not None else sys.stdout.buffer
        self._closed = False

    def start(self) -> None:
        """Start the stdin reader thread (call from inside the running loop)."""
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._read_loop, name="demo-stdin", daemon=True).start()

    def _send(self, obj: dict[str, Any], *, peer: int | None = None) -> None:
        if self._closed:
            return
        try:
            self._out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
            self._out.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The client went away: behave as on EOF.
            self._closed = True
            self._queue.put_nowait(None)

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
                    self._from_thread(buf)
                self._from_thread(None)
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
                    self._from_thread(line)
            if len(buf) > MAX_LINE_BYTES:
                note(f"dropping an input line longer than {MAX_LINE_BYTES} bytes")
                buf = b""
                skipping = True

    def _from_thread(self, line: bytes | None) -> None:
        """Hand a line (None: EOF) from the reader thread to the loop."""
        assert self._loop is not None
        try:
            if line is None:
                self._loop.call_soon_threadsafe(self._post, None)
            else:
                self._loop.call_soon_threadsafe(self._deliver, line)
        except RuntimeError:
            pass  # loop already closed: we are shutting down
