"""The conversation's event socket: readiness, reconnect with backoff, reconcile by REST.

``WS /sockets/events/{id}`` (docs/protocols.md "OpenHands agent-server"). A connection is *ready*
when its first ``ConversationStateUpdateEvent`` (the server sends ``full_state`` first)
arrives within the readiness timeout. After every (re)connect the stream pages through
``events/search`` and hands over only events it has not delivered before, oldest first
(timestamp, then id), then the readiness snapshot, so the consumer's view ends on the
server's current state. A drop is retried with capped, jittered exponential backoff
(:mod:`symphony_tui.agents.reconnect`, shared with OpenCode); close codes
4001 (auth) and 4004 (unknown conversation) are final. Malformed frames are counted and
reported, never fatal.

Callbacks run on the event loop, in delivery order:

* ``on_event(event, replay)``: ``replay`` is True for the history found on the first attach
  (fold it into state, do not report it as new activity);
* ``on_notice(kind, message)``: ``kind`` is ``malformed`` | ``reconnecting`` |
  ``reconnected``;
* ``on_failed(error)``: the stream gave up (final close code or retries exhausted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import quote

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.openhands.client import API_KEY_HEADER, OpenHandsClient
from symphony_tui.agents.openhands.reconcile import SeenEvents, WireEvent
from symphony_tui.agents.reconnect import Reconnector, StreamOptions

WsAuth = Literal["first_frame", "query", "header", "none"]
STATE_EVENT = "ConversationStateUpdateEvent"
FINAL_CLOSE_CODES = {4001: "authentication rejected", 4004: "conversation not found"}
MAX_FRAME_BYTES = 64 * 1024 * 1024  # full_state snapshots carry the whole agent config


class _Final(AgentError):
    """A connect failure that retrying cannot fix."""


class EventStream:
    """One conversation's live events. Call :meth:`attach` once, :meth:`aclose` at the end."""

    def __init__(
        self,
        client: OpenHandsClient,
        conversation_id: str,
        *,
        ws_auth: WsAuth,
        on_event: Callable[[WireEvent, bool], None],
        on_notice: Callable[[str, str], None] = lambda kind, msg: None,
        on_failed: Callable[[AgentError], None] = lambda err: None,
        options: StreamOptions | None = None,
    ) -> None:
        self.client = client
        self.conversation_id = conversation_id
        self.ws_auth: WsAuth = ws_auth
        self.options = options or StreamOptions()
        self.log = SeenEvents()
        self.reconnects = 0
        self.failed: AgentError | None = None
        self._on_event = on_event
        self._on_notice = on_notice
        self._on_failed = on_failed
        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.reconnector = Reconnector(
            self.options.backoff,
            "event socket",
            notice=lambda message: self._on_notice("reconnecting", message),
        )

    # ------------------------------------------------------------------ public

    @property
    def connected(self) -> bool:
        return self._ws is not None

    async def attach(self) -> None:
        """Connect, wait for readiness and replay the history. Raises :class:`AgentError`."""
        ws, ready, early = await self._connect_ready()
        try:
            await self._reconcile(early, ready, replay=True)
        except BaseException:
            await ws.close()
            raise
        self._ws = ws
        self._task = asyncio.create_task(self._pump(), name=f"openhands-ws-{self.conversation_id}")

    async def aclose(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2.0)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ connect

    def ws_url(self) -> str:
        base = self.client.base_url
        scheme, rest = base.split("://", 1)
        url = (
            f"{'wss' if scheme == 'https' else 'ws'}://{rest}/sockets/events/{self.conversation_id}"
        )
        if self.ws_auth == "query" and self.client.api_key:
            url += f"?session_api_key={quote(self.client.api_key, safe='')}"
        return url

    async def _connect_ready(self) -> tuple[ClientConnection, WireEvent, list[WireEvent]]:
        """Open the socket and wait for the first state event.

        Returns ``(socket, readiness event, events that arrived before it)``.
        """
        timeout = self.options.readiness_timeout_s
        headers = {}
        if self.ws_auth == "header" and self.client.api_key:
            headers[API_KEY_HEADER] = self.client.api_key
        try:
            ws = await websockets.connect(
                self.ws_url(),
                additional_headers=headers,
                proxy=None,
                open_timeout=timeout,
                max_size=MAX_FRAME_BYTES,
                compression=None,
            )
        except InvalidStatus as e:
            status = e.response.status_code
            msg = f"websocket handshake: HTTP {status}"
            if status in (401, 403, 404):
                raise _Final("handshake_failed", msg) from e
            raise AgentError("transport_error", msg) from e
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as e:
            raise AgentError("transport_error", f"websocket connect: {e!r}") from e
        early: list[WireEvent] = []
        try:
            if self.ws_auth == "first_frame" and self.client.api_key:
                await ws.send(json.dumps({"type": "auth", "session_api_key": self.client.api_key}))
            async with asyncio.timeout(timeout):
                while True:
                    frame = await ws.recv()
                    event = self._parse(frame)
                    if event is None:
                        continue
                    if event.get("kind") == STATE_EVENT:
                        return ws, event, early
                    early.append(event)
        except TimeoutError as e:
            await ws.close()
            raise AgentError("read_timeout", f"websocket not ready after {timeout:g}s") from e
        except ConnectionClosed as e:
            raise _closed_error(e) from e
        except BaseException:
            await ws.close()
            raise

    async def _reconcile(self, early: list[WireEvent], ready: WireEvent, *, replay: bool) -> None:
        """Deliver what the socket missed (all ``events/search`` pages), then ``ready``."""
        items: list[Any] = list(early)
        async for page in self.client.search_all(self.conversation_id):
            items.extend(page)
        for event in self.log.merge(items):
            self._on_event(event, replay)
        if self.log.accept(ready):
            self._on_event(ready, replay)

    # ------------------------------------------------------------------ pump

    async def _pump(self) -> None:
        while not self._closing:
            ws = self._ws
            if ws is None:
                return
            reason = await self._read(ws)
            if self._closing:
                return
            self._ws = None
            if isinstance(reason, _Final):
                self._fail(reason)
                return
            try:
                await self._reconnect(reason)
            except AgentError as e:
                self._fail(e)
                return

    async def _read(self, ws: ClientConnection) -> AgentError:
        """Read frames until the socket ends; return why it ended."""
        try:
            async for frame in ws:
                event = self._parse(frame)
                if event is not None and self.log.accept(event):
                    self._on_event(event, False)
            return _closed_error_from(ws)
        except ConnectionClosed as e:
            return _closed_error(e)
        except (OSError, websockets.exceptions.WebSocketException) as e:
            return AgentError("transport_error", f"websocket read: {e!r}")

    async def _reconnect(self, cause: AgentError) -> None:
        """Reconnect and reconcile through the shared backoff (:mod:`..reconnect`); raises
        :class:`AgentError` when every attempt failed or the server's answer is final."""
        reconciled = 0

        async def attempt(_n: int) -> ClientConnection:
            nonlocal reconciled
            ws, ready, early = await self._connect_ready()
            before = len(self.log)
            try:
                await self._reconcile(early, ready, replay=False)
            except AgentError:
                await ws.close()
                raise
            reconciled = len(self.log) - before
            return ws

        ws = await self.reconnector.run(
            attempt,
            last=cause.message,
            retryable=(AgentError,),
            final=(_Final,),
            describe=lambda e: e.message if isinstance(e, AgentError) else str(e),
            closing=lambda: self._closing,
        )
        if ws is None:
            return
        self._ws = ws
        self.reconnects += 1
        self._on_notice(
            "reconnected", f"event socket reconnected; {reconciled} event(s) reconciled"
        )

    # ------------------------------------------------------------------ helpers

    def _parse(self, frame: str | bytes) -> WireEvent | None:
        event = self.log.parse(frame)
        if event is None:
            self._on_notice("malformed", f"skipped malformed frame: {self.log.last_malformed}")
        return event

    def _fail(self, error: AgentError) -> None:
        self.failed = error
        self._on_failed(error)


def _closed_error(e: ConnectionClosed) -> AgentError:
    code = e.rcvd.code if e.rcvd is not None else None
    if code in FINAL_CLOSE_CODES:
        return _Final("transport_error", f"websocket closed {code}: {FINAL_CLOSE_CODES[code]}")
    return AgentError("transport_error", f"websocket closed ({code or 'no close frame'})")


def _closed_error_from(ws: ClientConnection) -> AgentError:
    code = ws.close_code
    if code in FINAL_CLOSE_CODES:
        return _Final("transport_error", f"websocket closed {code}: {FINAL_CLOSE_CODES[code]}")
    return AgentError("transport_error", f"websocket closed ({code or 'no close frame'})")
