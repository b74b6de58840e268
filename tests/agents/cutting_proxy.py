"""A loopback TCP proxy that cuts chosen connections like a network drop would.

Shared by the real-server tests of the HTTP backends: OpenHands' event WebSocket and
OpenCode's SSE event stream are long-lived connections the tests cut to prove a session
reconnects (``drop()``) or reports the loss (``block`` keeps new ones from opening).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from urllib.parse import urlsplit

CHUNK = 65536
Pair = tuple[asyncio.StreamWriter, asyncio.StreamWriter]


def websocket_upgrade(chunk: bytes) -> bool:
    """A request chunk that opens a WebSocket (OpenHands' event socket)."""
    return b"upgrade: websocket" in chunk.lower()


def event_stream_request(chunk: bytes) -> bool:
    """A request chunk that opens OpenCode's ``GET /event`` SSE stream."""
    return chunk.startswith(b"GET /event")


class CuttingProxy:
    """Forwards ``127.0.0.1:<port>`` (``url``) to ``target`` (``http://host:port``).

    A connection is *marked* when a chunk the client sends satisfies ``marks`` (checked on
    every chunk: httpx may reuse a pooled connection for a stream request). ``drop()``
    aborts every marked connection on both sides (no FIN, no close frame) and counts them
    in ``cut``; while ``block`` is true a marked request is cut at once. Other traffic
    always passes.
    """

    def __init__(self, target: str, marks: Callable[[bytes], bool]) -> None:
        u = urlsplit(target)
        self._host, self._port = u.hostname or "127.0.0.1", u.port or 80
        self._marks = marks
        self.block = False
        self.cut = 0
        self._marked: list[Pair] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.drop()
        for t in list(self._tasks):
            t.cancel()

    def drop(self) -> None:
        for a, b in self._marked:
            a.transport.abort()
            b.transport.abort()
            self.cut += 1
        self._marked.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_w)
        for coro in (self._pipe(reader, up_w, pair), self._pipe(up_r, writer, None)):
            t = asyncio.create_task(coro)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, watch: Pair | None
    ) -> None:
        """Copy ``src`` to ``dst``; chunks are checked for ``marks`` when ``watch`` (the
        connection's pair) is given, i.e. on the client's side."""
        try:
            while data := await src.read(CHUNK):
                if watch is not None and watch not in self._marked and self._marks(data):
                    if self.block:
                        watch[0].transport.abort()
                        dst.transport.abort()
                        return
                    self._marked.append(watch)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()
