"""The demo agent on a unix socket, as ``codex app-server --listen unix://PATH`` serves
(docs/protocols.md "Codex app-server over a socket").

WebSocket framing on the socket, one JSON-RPC message per text frame (the messages are those
of stdio, :class:`~symphony_tui.demo.transport.Transport`); a plain HTTP ``GET /readyz`` or
``/healthz`` answers 200. Framing comes from the ``websockets`` package (a dependency of
symphony-tui), imported only here, so the stdio mode stays stdlib only.

What a client sees, as with codex 0.171.0: one connection at a time, a new one replaces (and
closes) the one before and must ``initialize`` again; the agent and its turns go on while no
client is connected, and what it says meanwhile is dropped, not kept for later (the turn's
items stay readable with ``thread/turns/list``); a connection receives the notifications of
the threads it started or resumed, plus those of no thread; a request waiting for an answer
(an approval, a tool call) is sent again, with its id, to the connection that resumes its
thread, and the first answer settles it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import stat
from http import HTTPStatus
from pathlib import Path
from typing import Any

from symphony_tui.demo.transport import MAX_LINE_BYTES, Transport

UNIX_SCHEME = "unix://"


class ListenError(Exception):
    """The socket cannot be served (a bad path, a file in the way)."""


class _Peer:
    """One client connection: its number, the threads it follows and its outbox (sends
    keep their order without making :meth:`SocketTransport._send` a coroutine)."""

    def __init__(self, number: int, ws: Any) -> None:
        self.number = number
        self.ws = ws
        self.threads: set[str] = set()
        self.outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.writer: asyncio.Task[None] | None = None

    async def write_loop(self) -> None:
        from websockets.exceptions import ConnectionClosed

        while (text := await self.outbox.get()) is not None:
            try:
                await self.ws.send(text)
            except ConnectionClosed:
                return


def socket_path(listen: str) -> Path:
    """The path of a ``unix://PATH`` listen address. Raises :class:`ListenError`."""
    if not listen.startswith(UNIX_SCHEME) or not listen[len(UNIX_SCHEME) :]:
        raise ListenError(f"expected unix://PATH, got {listen!r}")
    return Path(listen[len(UNIX_SCHEME) :])


class SocketTransport(Transport):
    """Serves :class:`Transport` on a unix socket at ``path`` (see the module docstring).

    :meth:`start` binds (replacing the socket file of an agent that is gone, never a served
    socket or another kind of file); :meth:`close` stops serving and removes the socket file.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._server: Any = None
        self._peer: _Peer | None = None
        self._peers = 0
        self._closing: set[asyncio.Task[None]] = set()  # replaced connections being closed

    async def start(self) -> None:
        """Bind and serve. Raises :class:`ListenError`."""
        from websockets.asyncio.server import unix_serve

        self._loop = asyncio.get_running_loop()
        with contextlib.suppress(FileNotFoundError):
            mode = self.path.lstat().st_mode
            if not stat.S_ISSOCK(mode):
                raise ListenError(f"{self.path} exists and is not a socket")
            if _served(self.path):
                raise ListenError(f"{self.path} is served by another process")
            self.path.unlink()  # a socket left by an agent that was killed
        try:
            self._server = await unix_serve(
                self._connection,
                str(self.path),
                max_size=MAX_LINE_BYTES,
                compression=None,
                ping_interval=None,  # a client's liveness is its own business
                process_request=_health,
            )
        except OSError as e:
            raise ListenError(f"cannot listen on {self.path}: {e}") from e

    async def close(self) -> None:
        """Flush what the current client has not been sent, close it, stop serving."""
        peer, self._peer = self._peer, None
        if peer is not None:
            peer.outbox.put_nowait(None)
            if peer.writer is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(peer.writer, 2.0)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        with contextlib.suppress(OSError):
            self.path.unlink()

    async def _connection(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self._peers += 1
        peer = _Peer(self._peers, ws)
        old, self._peer = self._peer, peer
        if old is not None:
            old.outbox.put_nowait(None)
            closing = asyncio.get_running_loop().create_task(
                old.ws.close(1012, "replaced by a new connection")
            )
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        peer.writer = asyncio.get_running_loop().create_task(peer.write_loop())
        try:
            async for message in ws:
                if self._peer is not peer:
                    break  # replaced: what it still sends is not heard
                self._deliver(message, peer.number)
        except ConnectionClosed:
            pass
        finally:
            if self._peer is peer:
                self._peer = None  # nobody connected: what is said now is dropped
                peer.outbox.put_nowait(None)

    def _send(self, obj: dict[str, Any], *, peer: int | None = None) -> None:
        current = self._peer
        if current is None:
            return
        if peer is not None:
            if peer != current.number:
                return  # an answer for a connection that is gone
        else:
            params = obj.get("params")
            thread_id = params.get("threadId") if isinstance(params, dict) else None
            if thread_id is None and isinstance(params, dict):
                thread = params.get("thread")
                thread_id = thread.get("id") if isinstance(thread, dict) else None
            if thread_id is not None and thread_id not in current.threads:
                return
        current.outbox.put_nowait(json.dumps(obj, separators=(",", ":")))

    def subscribe(self, peer: int, thread_id: str) -> None:
        if self._peer is not None and self._peer.number == peer:
            self._peer.threads.add(thread_id)

    def resend_pending(self, peer: int, thread_id: str) -> None:
        for pending in list(self._pending.values()):
            if pending.thread_id == thread_id and not pending.future.done():
                self._send(pending.message, peer=peer)


def _health(connection: Any, request: Any) -> Any:
    """``GET /readyz`` and ``/healthz`` without an upgrade: 200 (None lets the WebSocket
    handshake go on)."""
    if request.path in ("/readyz", "/healthz") and "upgrade" not in {
        h.strip().lower() for h in request.headers.get("Connection", "").split(",")
    }:
        return connection.respond(HTTPStatus.OK, "OK\n")
    return None


def _served(path: Path) -> bool:
    """Whether a process accepts connections on the unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
