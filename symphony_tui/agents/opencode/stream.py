"""The instance's event stream ``GET /event``: readiness, watchdog, reconnect, reconcile.

docs/protocols.md "OpenCode server": each SSE ``data:`` line is ``{"id", "type", "properties"}``
(the SSE ``id`` field is empty, so nothing can be resumed by ``Last-Event-ID``); the first
event is ``server.connected``, then ``server.heartbeat`` about every 10 s when quiet. The
stream can die silently, so a connection that says nothing for ``watchdog_s`` is dropped.

A connection is *ready* once ``server.connected`` arrives within ``readiness_timeout_s``.
After every reconnect the stream awaits ``on_reconnected()`` before it reads on: the session
reconciles through REST there (status, permissions, messages), so whatever was said while
no stream was open is not lost; events of the new connection that arrive meanwhile wait in
its buffer. A drop is retried with capped, jittered exponential backoff
(:mod:`symphony_tui.agents.reconnect`, shared with OpenHands); a 401/403/404 is final.
Malformed data (not JSON, not an object with a string ``type``) is counted and reported
through ``on_notice("malformed", ...)``, never fatal.

Callbacks run on the event loop, in delivery order: ``on_event(event)``,
``on_notice(kind, message)`` (``malformed`` | ``reconnecting`` | ``reconnected``),
``on_reconnected()`` (awaited), ``on_failed(error)`` (the stream gave up).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from httpx_sse import ServerSentEvent

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.opencode.client import OpenCodeClient, OpenCodeHTTPError
from symphony_tui.agents.reconnect import Reconnector, StreamOptions
from symphony_tui.text import one_line

Wire = dict[str, Any]


class _Dropped(Exception):
    """The current connection ended (``reason`` says how)."""


class _Final(Exception):
    """The server refused the stream for good (``error``: a 401/403/404)."""

    def __init__(self, error: OpenCodeHTTPError) -> None:
        super().__init__(error.message)
        self.error = error


# A failed connection or a failed reconcile (AgentError): retried like a drop.
_RETRYABLE: tuple[type[BaseException], ...] = (OpenCodeHTTPError, _Dropped, AgentError)


def _why(error: BaseException) -> str:
    return error.message if isinstance(error, AgentError) else str(error)


class EventStream:
    """One directory's live events. :meth:`attach` once, :meth:`aclose` at the end."""

    def __init__(
        self,
        client: OpenCodeClient,
        directory: str,
        *,
        on_event: Callable[[Wire], None],
        on_reconnected: Callable[[], Awaitable[None]],
        on_notice: Callable[[str, str], None] = lambda kind, msg: None,
        on_failed: Callable[[AgentError], None] = lambda err: None,
        options: StreamOptions | None = None,
    ) -> None:
        self.client = client
        self.directory = directory
        self.options = options or StreamOptions()
        self.malformed = 0
        self.reconnects = 0
        self.failed: AgentError | None = None
        self._on_event = on_event
        self._on_reconnected = on_reconnected
        self._on_notice = on_notice
        self._on_failed = on_failed
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._drop: asyncio.Event = asyncio.Event()
        self._closing = False
        self.reconnector = Reconnector(
            self.options.backoff,
            "event stream",
            notice=lambda message: self._on_notice("reconnecting", message),
        )

    async def attach(self) -> None:
        """Open the stream and wait until it is ready. Raises :class:`AgentError`."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(), name=f"opencode-sse-{self.directory}")
        try:
            await self._ready
        except BaseException:
            await self.aclose()
            raise

    def drop(self) -> None:
        """End the current connection as a network drop would (it then reconnects)."""
        self._drop.set()

    async def aclose(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------ connection loop

    async def _run(self) -> None:
        """The first connection (its failure fails :meth:`attach`), then reconnects through
        the shared backoff (:mod:`..reconnect`), the attempt count starting afresh after
        every connection that got ready."""
        try:
            try:
                last = await self._connection(0)
            except _RETRYABLE as e:
                if not self._closing:
                    # Never ready: the caller is waiting in attach(); tell it now.
                    self._give_up(AgentError("transport_error", f"event stream: {_why(e)}"))
                return
            while not self._closing:
                ended = await self.reconnector.run(
                    self._connection,
                    last=last,
                    retryable=_RETRYABLE,
                    describe=_why,
                    closing=lambda: self._closing,
                )
                if ended is None:
                    return
                last = ended
        except _Final as e:
            self._give_up(e.error)
        except AgentError as e:  # every reconnect attempt failed
            if not self._closing:
                self._give_up(e)

    async def _connection(self, attempt: int) -> str:
        """One connection (``attempt`` 0 is the first, then the reconnect attempt's number):
        open, await ``server.connected``, report ready or reconcile, then read until it
        ends; returns why it ended. Raises ``_Dropped`` / ``OpenCodeHTTPError`` /
        ``AgentError`` (a failed reconcile) to be retried, ``_Final`` for 401/403/404."""
        try:
            async with self.client.events(
                self.directory, connect_timeout_s=self.options.readiness_timeout_s
            ) as source:
                events = source.aiter_sse()
                await self._await_connected(events)
                if attempt == 0:
                    self._set_ready()
                else:
                    await self._on_reconnected()
                    self.reconnects += 1
                    self._on_notice(
                        "reconnected", f"event stream reconnected (after {attempt} attempt(s))"
                    )
                return await self._read(events)
        except OpenCodeHTTPError as e:
            if e.status in (401, 403, 404):
                raise _Final(e) from e
            raise

    async def _await_connected(self, events: AsyncIterator[ServerSentEvent]) -> None:
        try:
            async with asyncio.timeout(self.options.readiness_timeout_s):
                async for sse in events:
                    event = self._parse(sse)
                    if event is not None and event["type"] == "server.connected":
                        return
        except TimeoutError as e:
            raise _Dropped(
                f"no server.connected within {self.options.readiness_timeout_s:g}s"
            ) from e
        except Exception as e:  # httpx read errors, a closed response
            raise _Dropped(f"connect: {e!r}") from e
        raise _Dropped("stream ended before server.connected")

    async def _read(self, events: AsyncIterator[ServerSentEvent]) -> str:
        """Deliver events until the connection ends; returns why it ended."""
        self._drop.clear()
        dropper = asyncio.create_task(self._drop.wait())
        try:
            while True:
                nxt = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait(
                    {nxt, dropper}, timeout=self.options.watchdog_s, return_when="FIRST_COMPLETED"
                )
                if nxt not in done:
                    nxt.cancel()
                    with contextlib.suppress(BaseException):
                        await nxt
                    if dropper in done:
                        return "dropped"
                    return f"no event for {self.options.watchdog_s:g}s (watchdog)"
                try:
                    sse = nxt.result()
                except StopAsyncIteration:
                    return "stream ended"
                except Exception as e:
                    return f"read: {one_line(repr(e), 200)}"
                event = self._parse(sse)
                if event is not None:
                    self._on_event(event)
        finally:
            dropper.cancel()

    # ------------------------------------------------------------ helpers

    def _parse(self, sse: ServerSentEvent) -> Wire | None:
        if not sse.data:
            return None
        try:
            value = json.loads(sse.data)
        except ValueError:
            return self._bad(f"not JSON: {one_line(sse.data, 120)}")
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            return self._bad(f"not an event object: {one_line(sse.data, 120)}")
        if not isinstance(value.get("properties"), dict):
            value["properties"] = {}
        return value

    def _bad(self, why: str) -> None:
        self.malformed += 1
        self._on_notice("malformed", f"skipped malformed event data: {why}")
        return None

    def _set_ready(self) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def _give_up(self, error: AgentError) -> None:
        self.failed = error
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            return
        self._on_failed(error)
