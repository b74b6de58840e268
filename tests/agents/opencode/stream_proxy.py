"""A loopback TCP proxy that can cut OpenCode's event stream like a network drop would."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

STREAM_REQUEST = b"GET /event"


class StreamProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``http://host:port``).

    A connection that carries ``GET /event`` is a stream connection (checked on every
    chunk: httpx may reuse a pooled connection for it). ``drop_streams()`` aborts them all
    (no FIN, like a dead network); while ``block_streams`` is true a stream request is cut
    at once. Other requests always pass.
    """

    def __init__(self, target: str) -> None:
        u = urlsplit(target)
        self._host, self._port = u.hostname or "127.0.0.1", u.port or 80
        self.block_streams = False
        self.cut = 0
        self._streams: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> StreamProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.drop_streams()
        for t in list(self._tasks):
            t.cancel()

    def drop_streams(self) -> None:
        for a, b in self._streams:
            a.transport.abort()
            b.transport.abort()
            self.cut += 1
        self._streams.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_w)
        for coro in (self._upstream(reader, up_w, pair), self._pipe(up_r, writer)):
            t = asyncio.create_task(coro)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _upstream(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            while data := await src.read(65536):
                if data.startswith(STREAM_REQUEST):
                    if self.block_streams:
                        pair[0].transport.abort()
                        dst.transport.abort()
                        return
                    self._streams.append(pair)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

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
