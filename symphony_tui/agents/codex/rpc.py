"""JSON-RPC over newline-delimited JSON on a child's stdio (codex app-server framing).

docs/protocols.md "Codex app-server": one JSON object per line, JSON-RPC 2.0 shapes without the
``jsonrpc`` field. Both sides send requests; ids are per sender. This module knows nothing
of codex methods: it frames lines, matches responses to client requests, and hands server
requests and notifications to callbacks.

Robustness (spec §10.1): partial lines are buffered; a line longer than
``line_limit`` bytes (10 MB) is skipped with one ``on_malformed`` report; undecodable or
non-object lines are reported and skipped; a callback that raises is reported, never fatal.

Fairness (control is never starved by a flood): the reader hands at most :data:`BATCH_LINES`
lines to the callbacks, then yields to the event loop, so one agent flooding its stdout
cannot hold the loop for a whole 64 KB chunk (about 280 lines) while an operator's command,
an API request or another session waits. Lines are parsed with orjson (the standard
library's parser only re-checks a line orjson refused, so what is accepted does not change).

Control first: the host's pace is where a flooding session waits for its share of the
scheduler, so an agent's request (an approval, a question) written behind a flood would
wait out one share per batch of the deltas ahead of it. A line that may be a
request or a response (its bytes hold ``"id"``, :data:`CONTROL_MARK`) is therefore read
without pausing in between once the reader holds it, in the chunk it is framing or in
the stream's buffer (a search of bytes, not a parse): the lines ahead of it are handed over
in order as fast as they are framed (a session's deltas are joined meanwhile,
``coalesce.py``), then the request, then the reader paces again. At most
:data:`CONTROL_RUN_LINES` lines go without a pause, so a peer whose every line is a
request or holds an ``"id"`` elsewhere still yields its share. And with a ``hurry``
callback, data that the pipe hands the stream while the reader waits for its pace is
searched too: a mark there calls ``hurry`` (the host lets that reader go before the
others waiting, ``SessionHost.hurry``), so a request that reached the buffer just after the
reader looked waits for no further share.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from symphony_tui.agents.base import AgentError

LINE_LIMIT = 10 * 1024 * 1024
_CHUNK = 65536
#: Lines handed to the callbacks before the reader yields to the event loop.
BATCH_LINES = 16
#: Bytes whose presence in a line says it may be a request or a response (a JSON-RPC
#: ``id`` member; nested ``"id"`` members match too, which costs one early read only).
CONTROL_MARK = b'"id"'
#: Lines handed over at most without a pause while a request is ahead in what was read.
CONTROL_RUN_LINES = 16 * BATCH_LINES

RequestId = int | str


def _emitted_at(ms: Any) -> datetime | None:
    """``emittedAtMs`` (epoch milliseconds) -> aware UTC datetime; None when unusable."""
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms <= 0:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


async def _yield() -> None:
    await asyncio.sleep(0)


def _control_line(chunk: bytes, partial: bytearray) -> int:
    """The index (in ``chunk.split(b"\\n")``) of the last line of ``chunk`` that may be a
    request or a response (:data:`CONTROL_MARK`), the line ``partial`` starts included;
    -1 when none. The index of the unfinished tail when the mark is there: every whole
    line of the chunk is then ahead of it."""
    pos = chunk.rfind(CONTROL_MARK)
    if pos >= 0:
        return chunk.count(b"\n", 0, pos)
    if partial and (partial.find(CONTROL_MARK) >= 0 or CONTROL_MARK in partial[-3:] + chunk[:3]):
        return 0
    return -1


def _ignore(*_args: Any) -> None:
    """A closed connection's callbacks (see :meth:`RpcConnection.aclose`)."""


class RpcError(Exception):
    """An error response to one of our requests: ``code``, ``message``, optional ``data``."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method} failed ({code}): {message}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class RpcConnection:
    """One JSON-RPC peer on a (reader, writer) pair.

    Callbacks (called on the event loop, must not block):

    * ``on_notification(method, params)``
    * ``on_request(id, method, params)`` - the owner must answer with :meth:`respond` or
      :meth:`respond_error`;
    * ``on_malformed(reason)`` - a one-line description of a skipped line;
    * ``on_eof()`` - awaited once when stdout ends; returns the one-line reason used to fail
      pending requests (``AgentError("process_exited", reason)``).

    ``pace``: awaited after every :data:`BATCH_LINES` lines (default: one yield to the loop);
    a host passes its back-pressure there (``SessionHost.pace``), so a reader stops taking
    lines while the scheduler has too many queued. ``hurry``: called when a request may
    have reached the stream while the reader awaits ``pace`` (``SessionHost.hurry``: that
    pace should return soon); the stream's ``feed_data`` is wrapped for it until
    :meth:`aclose`.

    ``sent``: when a list is given, every message written is appended to it (tests validate
    them against the app-server's JSON schema).

    ``emitted_at``: while ``on_notification`` runs, the notification's ``emittedAtMs`` as an
    aware UTC datetime (None outside the callback or when absent / not a number); converted
    when read, not per line.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_notification: Callable[[str, dict[str, Any]], None],
        on_request: Callable[[RequestId, str, dict[str, Any]], None],
        on_malformed: Callable[[str], None],
        on_eof: Callable[[], Awaitable[str]] | None = None,
        line_limit: int = LINE_LIMIT,
        sent: list[dict[str, Any]] | None = None,
        pace: Callable[[], Awaitable[None]] | None = None,
        hurry: Callable[[], None] | None = None,
    ) -> None:
        self._reader = reader
        self._pace = pace or _yield
        self._hurry = hurry
        self._pacing = False  # the reader awaits the pace
        # A mark was fed to the stream since the reader last emptied it (see start()).
        self._marked = False
        self._hooked = False  # the stream's feed is watched
        self._writer = writer
        self._on_notification = on_notification
        self._on_request = on_request
        self._on_malformed = on_malformed
        self._on_eof = on_eof
        self._line_limit = line_limit
        self.sent = sent
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, tuple[str, asyncio.Future[Any]]] = {}
        self._write_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        # emittedAtMs of the notification being handled; turned into a datetime only when
        # read (one conversion per distinct value: a burst of lines shares its millisecond)
        self._emitted_ms: Any = None
        self._emitted_cache: tuple[Any, datetime | None] = (None, None)
        #: Loop time of the latest bytes read from the app-server's stdout (any output,
        #: partial lines included): what the silence-based turn timeout watches (§10.6).
        self.last_output = asyncio.get_running_loop().time()

    @property
    def emitted_at(self) -> datetime | None:
        ms = self._emitted_ms
        if ms is None:
            return None
        cached_ms, cached = self._emitted_cache
        if cached_ms != ms or type(cached_ms) is not type(ms):
            cached = _emitted_at(ms)
            self._emitted_cache = (ms, cached)
        return cached

    # -- lifecycle
    def start(self) -> None:
        feed = getattr(self._reader, "feed_data", None)
        if feed is not None and self._task is None:
            # What the pipe transport hands the stream is searched once, as it arrives:
            # the reader then knows whether its buffer may hold a request without
            # searching it at every batch, and a request arriving while the reader waits
            # for its pace hurries it (see above).
            buffer = getattr(self._reader, "_buffer", b"")
            self._marked = CONTROL_MARK in buffer  # what was fed before
            self._hooked = True

            def feed_data(data: bytes) -> None:
                feed(data)
                if CONTROL_MARK in data:
                    self._marked = True
                    if self._pacing and self._hurry is not None:
                        self._hurry()

            self._reader.feed_data = feed_data  # type: ignore[method-assign,assignment]  # this reader's feed, wrapped
        if self._task is None:
            self._task = asyncio.create_task(self._read_loop(), name="codex-rpc-reader")

    @property
    def is_closed(self) -> bool:
        return self.closed.done()

    def close_reason(self) -> str:
        return self.closed.result() if self.closed.done() else ""

    async def aclose(self) -> None:
        """Stop reading (the process is being killed) and fail what is still pending."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._finish("connection closed")
        # Nothing is read any more: drop the owner's callbacks (its bound methods: the
        # owner holds this connection, so keeping them would make a reference cycle that
        # outlives the session until a full collection).
        self._on_notification = self._on_request = _ignore
        self._on_malformed = _ignore
        self._on_eof = None
        self._pace = _yield
        self._hurry = None
        vars(self._reader).pop("feed_data", None)  # the stream's own again (no cycle)

    # -- sending
    async def _write(self, msg: dict[str, Any]) -> None:
        if self.is_closed:
            raise AgentError("process_exited", self.close_reason())
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        if self.sent is not None:
            self.sent.append(msg)
        try:
            async with self._write_lock:
                self._writer.write(data)
                await self._writer.drain()
        except (ConnectionError, RuntimeError, OSError) as e:
            raise AgentError("process_exited", f"cannot write to app-server: {e}") from e

    async def request(self, method: str, params: Any, timeout_s: float) -> Any:
        """Send a request and await its result.

        Raises :class:`RpcError` on an error response, ``AgentError("read_timeout")`` after
        ``timeout_s`` without a response, ``AgentError("process_exited")`` when the peer ends.
        """
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (method, fut)
        try:
            await self._write({"id": rid, "method": method, "params": params})
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            raise AgentError(
                "read_timeout", f"{method} got no response within {int(timeout_s * 1000)} ms"
            ) from None
        finally:
            self._pending.pop(rid, None)
            if not fut.done():
                fut.cancel()

    async def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"method": method}
        if params is not None:
            msg["params"] = params
        await self._write(msg)

    async def respond(self, rid: RequestId, result: Any) -> None:
        await self._write({"id": rid, "result": result})

    async def respond_error(self, rid: RequestId, code: int, message: str) -> None:
        await self._write({"id": rid, "error": {"code": code, "message": message}})

    # -- reading
    async def _read_loop(self) -> None:
        partial = bytearray()  # the start of a line whose newline has not come yet
        skipping = False  # inside a line that exceeded the limit
        limit = self._line_limit
        handled = 0  # lines handed over since the last pause
        try:
            while True:
                chunk = await self._reader.read(_CHUNK)
                if not chunk:
                    break
                self.last_output = asyncio.get_running_loop().time()
                buffered: bool | None = None  # a mark in the stream's buffer (None: not looked)
                marked = self._marked or not self._hooked  # a mark may be in this chunk
                if marked and not self._buffered_bytes():
                    self._marked = False  # all that was fed is in this chunk now
                if chunk.find(b"\n") < 0:  # the middle of a long line: no split, no copy
                    if not skipping:
                        partial += chunk
                        if len(partial) > limit:
                            self._too_long(bytes(partial[:80]))
                            partial.clear()
                            skipping = True
                    continue
                lines = chunk.split(b"\n")
                tail = lines.pop()  # after the last newline: b"" when the chunk ends a line
                # read on to that line unpaused
                control = _control_line(chunk if marked else b"", partial)
                for i, line in enumerate(lines):
                    if i == 0 and (skipping or partial):
                        if skipping:  # the end of an over-long line
                            skipping = False
                            continue
                        if len(partial) + len(line) > limit:
                            self._too_long(bytes((partial + line[:80])[:80]))
                            partial.clear()
                            continue
                        partial += line
                        line = bytes(partial)
                        partial.clear()
                    elif len(line) > limit:
                        self._too_long(line[:80])
                        continue
                    self._line(line)
                    handled += 1
                    if handled >= BATCH_LINES:
                        if handled < CONTROL_RUN_LINES:  # a request ahead: no pause yet
                            if i < control:
                                continue
                            if buffered is None:  # unchanged until the next pause
                                buffered = self._control_buffered()
                            if buffered:
                                continue
                        handled = 0
                        buffered = None
                        self._pacing = True
                        try:
                            await self._pace()  # let commands, the API, other sessions in
                        finally:
                            self._pacing = False
                if tail and not skipping:
                    partial += tail  # (empty here whenever this chunk ended a line)
                    if len(partial) > limit:
                        self._too_long(bytes(partial[:80]))
                        partial.clear()
                        skipping = True
            if partial.strip() and not skipping:
                self._line(bytes(partial))
        except (ConnectionError, OSError) as e:
            self._report(f"stdout read failed: {e}")
        reason = "app-server closed its stdout"
        if self._on_eof is not None:
            try:
                reason = await self._on_eof()
            except Exception as e:
                reason = f"app-server ended ({e})"
        self._finish(reason)

    def _control_buffered(self) -> bool:
        """True when the stream's buffer (read from the pipe, not yet taken by this
        reader) may hold :data:`CONTROL_MARK`: one was fed since the reader last emptied
        it (searched as it was fed, :meth:`start`). A stream whose feed is not watched
        says False (the reader then paces as usual)."""
        return self._marked

    def _buffered_bytes(self) -> int:
        """Bytes the stream holds that the reader has not taken (``StreamReader`` keeps
        them in ``_buffer``; 0 when a stream has none)."""
        buffer = getattr(self._reader, "_buffer", None)
        return len(buffer) if isinstance(buffer, bytes | bytearray) else 0

    def _too_long(self, head: bytes) -> None:
        self._report(f"line longer than {self._line_limit} bytes skipped (starts {head!r})")

    def _finish(self, reason: str) -> None:
        if not self.closed.done():
            self.closed.set_result(reason)
        err = AgentError("process_exited", self.closed.result())
        for _method, fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # mark retrieved: the awaiting side may already be gone
        self._pending.clear()

    def _report(self, reason: str) -> None:
        try:
            self._on_malformed(reason)
        except Exception:
            pass

    def _line(self, raw: bytes) -> None:
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError:
            text = raw.strip()
            if not text:
                return
            try:  # what orjson refuses but the standard library reads (NaN, huge integers)
                msg = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                self._report(f"invalid JSON ({e.__class__.__name__}: {e}): {text[:120]!r}")
                return
        if not isinstance(msg, dict):
            self._report(f"not a JSON object: {raw.strip()[:120]!r}")
            return
        method = msg.get("method")
        try:
            if isinstance(method, str):
                params = msg.get("params")
                params = params if isinstance(params, dict) else {}
                if "id" in msg and msg["id"] is not None:
                    self._on_request(msg["id"], method, params)
                else:
                    self._emitted_ms = msg.get("emittedAtMs")
                    try:
                        self._on_notification(method, params)
                    finally:
                        self._emitted_ms = None
            elif "id" in msg and ("result" in msg or "error" in msg):
                self._response(msg)
            else:
                self._report(f"not a JSON-RPC message: {raw.strip()[:120]!r}")
        except Exception as e:  # a handler bug must not stop the reader
            self._report(f"error handling {method or 'response'}: {e.__class__.__name__}: {e}")

    def _response(self, msg: dict[str, Any]) -> None:
        entry = self._pending.get(msg["id"])
        if entry is None:
            self._report(f"response to unknown request id {msg['id']!r}")
            return
        method, fut = entry
        if fut.done():
            return
        err = msg.get("error")
        if err is not None:
            if not isinstance(err, dict):
                err = {"code": -32603, "message": str(err)}
            fut.set_exception(
                RpcError(
                    method,
                    int(err.get("code") or 0),
                    str(err.get("message") or ""),
                    err.get("data"),
                )
            )
        else:
            fut.set_result(msg.get("result"))
