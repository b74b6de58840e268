"""A loopback TCP proxy that can cut WebSocket connections like a network drop would."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``http://host:port``).

    ``drop_websockets()`` aborts every open WebSocket connection (both sides, no close
    frame); while ``block_websockets`` is true, new WebSocket upgrades are cut at once.
    Plain HTTP requests always pass.
    """

    def __init__(self, target: str) -> None:
        u = urlsplit(target)
        self._host, self._port = u.hostname or "127.0.0.1", u.port or 80
        self.block_websockets = False
        self._ws_pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.drop_websockets()
        for t in list(self._tasks):
            t.cancel()

    def drop_websockets(self) -> None:
        for a, b in self._ws_pairs:
            a.transport.abort()
            b.transport.abort()
        self._ws_pairs.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.read(65536)
        is_ws = b"upgrade: websocket" in first.lower()
        if not first or (is_ws and self.block_websockets):
            writer.transport.abort()
            return
        try:
            up_r, up_w = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        if is_ws:
            self._ws_pairs.append((writer, up_w))
        up_w.write(first)
        for src, dst in ((reader, up_w), (up_r, writer)):
            t = asyncio.create_task(self._pipe(src, dst))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()
