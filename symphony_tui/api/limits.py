"""What the HTTP API accepts from a client, and for how long it waits (docs/security.md).

* **Bodies**: at most :data:`MAX_BODY_BYTES` (aiohttp answers 413 past it), read within
  :data:`BODY_TIMEOUT_S` (408 ``body_timeout`` after), UTF-8 JSON nested at most
  :data:`MAX_DEPTH` deep: anything else is 400 ``invalid_body`` with one line
  (:func:`read_json`), never a 500.
* **Headers**: a connection must deliver its first request's headers within
  :data:`HEADER_TIMEOUT_S` (:class:`HeaderDeadline`); an idle kept-alive connection is
  closed after :data:`KEEPALIVE_S`; request lines and header fields are at most 8 KiB and
  128 fields (aiohttp's parser).
* **Identifiers** in paths, queries and command bodies: no control characters
  (:func:`control_character`): 400 ``invalid_identifier``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Any

import orjson
from aiohttp import web

MAX_BODY_BYTES = 1024 * 1024
BODY_TIMEOUT_S = 10.0
HEADER_TIMEOUT_S = 10.0
KEEPALIVE_S = 15.0
MAX_DEPTH = 64

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class BadBody(Exception):
    """A request body that cannot be taken (one line); ``status`` is the answer's."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_body") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


async def read_json(request: web.Request) -> Any:
    """The request's JSON body. Raises :class:`BadBody` for a body too slow to arrive,
    too large, not UTF-8, not JSON or nested too deep."""
    try:
        raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT_S)
    except TimeoutError:
        raise BadBody(
            f"the body did not arrive within {BODY_TIMEOUT_S:.0f}s", 408, "body_timeout"
        ) from None
    except web.HTTPRequestEntityTooLarge:
        raise BadBody(
            f"the body is larger than {MAX_BODY_BYTES} bytes", 413, "body_too_large"
        ) from None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBody(f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadBody(f"body is not JSON: {exc}") from None
    if too_deep(value, MAX_DEPTH):
        raise BadBody(f"the body is JSON nested deeper than {MAX_DEPTH} levels")
    return value


def too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (iterative: a
    deep value costs ``limit`` steps, not a stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def control_character(text: str) -> str | None:
    """A description of the first control character in ``text`` (``U+0000 at 3``), or
    None when it has none."""
    found = _CONTROL.search(text)
    if found is None:
        return None
    return f"U+{ord(found.group()):04X} at {found.start()}"


def control_in(value: Any, depth: int = 0) -> str | None:
    """The first control character in any string of a decoded JSON ``value`` (keys and
    values, 32 levels deep at most), described with its place; None when clean."""
    if depth > 32:
        return None
    if isinstance(value, str):
        return control_character(value)
    if isinstance(value, dict):
        for key, item in value.items():
            found = control_character(str(key)) or control_in(item, depth + 1)
            if found:
                return f"{key}: {found}"
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = control_in(item, depth + 1)
            if found:
                return f"[{index}]: {found}"
    return None


class HeaderDeadline(asyncio.Protocol):
    """A protocol wrapper that closes a connection whose first request's headers (up to
    the blank line) have not arrived within ``timeout_s``; otherwise it forwards every
    call to aiohttp's ``RequestHandler`` (``inner``) untouched."""

    def __init__(self, inner: asyncio.Protocol, timeout_s: float = HEADER_TIMEOUT_S) -> None:
        self.inner = inner
        self._timeout_s = timeout_s
        self._tail = b""
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._timer = asyncio.get_running_loop().call_later(self._timeout_s, self._expire)
        self.inner.connection_made(transport)

    def _expire(self) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            seen = self._tail + data
            if b"\r\n\r\n" in seen or b"\n\n" in seen:
                self._timer.cancel()
                self._timer = None
            self._tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()
