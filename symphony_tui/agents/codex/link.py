"""The connection to a detached codex app-server, kept across drops (docs/protocols.md
"Codex app-server over a socket", docs/worker-hosts.md "A link that reconnects").

A detached app-server (``codex.transport: unix``) keeps a turn running when its client
goes away. :class:`AppServerLink` is the session's one line stream to it (``reader``,
``writer``: what :class:`~symphony_tui.agents.codex.rpc.RpcConnection` reads and writes)
over as many WebSocket connections as it takes: when one drops while the app-server still
lives, it connects again after a jittered backoff (:class:`~symphony_tui.agents.reconnect.Backoff`),
says ``initialize`` / ``initialized`` and ``thread/resume`` (the thread it follows), and
asks ``thread/turns/list`` what finished while nobody listened. Above it the session sees
one unbroken stream:

- items of the turn in flight that completed during the drop arrive as ``item/completed``
  (each item once: ids already seen are skipped), one still running as ``item/started``,
  and a turn that ended meanwhile as ``turn/completed``;
- a server request (an approval) that codex sends again with the same id after the resume
  is not handed up a second time while the session still holds it; one the session
  answered meanwhile gets that answer again: an approval is asked and answered once;
- lines the session writes while the link is down are held and sent once it is back
  (deltas streamed while nobody listened are not replayed by codex: their items' text
  comes whole with ``item/completed``).

Where the app-server is, is a :class:`Place`: this machine (:class:`LocalPlace`, its
socket path) or a worker host (agents/codex/remote_detached.py: an ssh forward of the
host-loopback socket). The place says whether the app-server still lives: gone ends the
link at once (the stream's EOF, the turn fails as the process having exited); a host that
cannot be reached is tried until it has not answered for ``lost_after_s``, then the link
ends with :attr:`AppServerLink.host_lost` set (the run fails as ``host down``); an
app-server that lives but refuses :data:`REFUSED_ATTEMPTS` reconnects in a row ends it too.

State (:attr:`AppServerLink.state`): ``connected``, ``reconnecting`` (since
:attr:`AppServerLink.since`), ``lost``; each change is told to ``on_state(state, since,
reason)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.detached import (
    DetachedAgent,
    alive,
    log_tail,
    ws_connect,
)
from symphony_tui.agents.codex.process import STDOUT_READER_LIMIT
from symphony_tui.agents.reconnect import Backoff
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import LinkChanged

CONNECTED = "connected"
RECONNECTING = "reconnecting"
LOST = "lost"

#: Timing of reconnect attempts; the number of attempts is bounded by time instead.
RECONNECT_BACKOFF = Backoff(initial_s=0.25, max_s=5.0, max_attempts=1_000_000, jitter=0.5)
#: Failed reconnect attempts to an app-server known to live before the link is lost.
REFUSED_ATTEMPTS = 20
#: How long one reconnect attempt may take (connect, initialize, resume, turns list).
ATTEMPT_S = 15.0
#: Turns asked of ``thread/turns/list`` after a reconnect (newest first).
TURNS_LISTED = 5
#: Answers to server requests remembered for a request codex sends again.
ANSWERS_KEPT = 256
#: A line's first bytes searched for a top-level ``"id"`` member (a request or response).
_HEAD = 160


class Place(Protocol):
    """Where a detached app-server runs: ``host`` (None: this machine)."""

    host: str | None

    async def socket(self) -> str:
        """A socket path on this machine that reaches the app-server (a worker host's is
        forwarded). Raises ``AgentError``."""
        ...

    async def drop(self) -> None:
        """Stop what :meth:`socket` started (a forward). Idempotent."""
        ...

    async def alive(self) -> bool | None:
        """True while the app-server runs, False once it is gone, None when that cannot be
        told now (its host does not answer)."""
        ...

    async def tail(self) -> str:
        """The last lines of the app-server's log, as one line ("" when unknown)."""
        ...

    async def release(self) -> None:
        """Nothing of the link left here (the forward and its socket folder)."""
        ...


class LocalPlace:
    """A detached app-server on this machine: its own socket, its process group."""

    host: str | None = None

    def __init__(self, agent: DetachedAgent) -> None:
        self.agent = agent

    async def socket(self) -> str:
        return self.agent.socket

    async def drop(self) -> None:
        return None

    async def alive(self) -> bool | None:
        return alive(self.agent)

    async def tail(self) -> str:
        return log_tail(self.agent)

    async def release(self) -> None:
        return None


class _Pause:
    """The ``transport`` a fed :class:`asyncio.StreamReader` pauses and resumes: the pump
    waits on it while the reader's buffer is over its limit."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.go.set()

    def pause_reading(self) -> None:
        self.go.clear()

    def resume_reading(self) -> None:
        self.go.set()


def _head_id(data: bytes) -> bool:
    """Whether ``data`` (one JSON-RPC message) may be a request or a response: a top-level
    ``"id"`` comes before any ``"params"`` (codex writes ``id`` and ``method`` first)."""
    head = data[:_HEAD]
    at = head.find(b'"id"')
    if at < 0:
        return False
    params = head.find(b'"params"')
    return params < 0 or at < params


_METHOD = re.compile(rb'"method"\s*:\s*"([^"]{1,64})"')
#: Notifications the link follows (the turn in flight and its items).
_FOLLOWED = frozenset((b"item/completed", b"item/started", b"turn/started", b"turn/completed"))


def _method_of(data: bytes) -> bytes | None:
    """The ``method`` named near the start of ``data`` (a search, not a parse)."""
    found = _METHOD.search(data, 0, _HEAD)
    return found.group(1) if found is not None else None


#: Seconds between two looks at whether a worker host's app-server exited while the first
#: connection is awaited.
WATCH_S = 1.0


async def open_link(
    place: Place,
    timeout_s: float,
    *,
    exited: asyncio.subprocess.Process | None = None,
    **kw: Any,
) -> AppServerLink:
    """:meth:`AppServerLink.open` for a just-launched app-server: an app-server that exits
    first (``exited``, the local child; on a host, :meth:`Place.alive` turning False) fails
    the launch with its log's tail. Raises ``AgentError("launch_failed")``."""
    connecting = asyncio.ensure_future(AppServerLink.open(place, timeout_s, **kw))
    watch = asyncio.ensure_future(_exit_of(place, exited))
    try:
        await asyncio.wait({connecting, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not connecting.done():
        connecting.cancel()
        with contextlib.suppress(BaseException):
            await connecting
        await place.drop()
        code = exited.returncode if exited is not None else None
        why = "exited" + (f" with code {code}" if code is not None else "")
        tail = await place.tail()
        raise AgentError("launch_failed", why + (f": {tail}" if tail else ""))
    try:
        return connecting.result()
    except AgentError as e:
        await place.drop()
        tail = await place.tail()
        raise AgentError(
            "launch_failed", e.message + (f": {tail}" if tail else ""), host_lost=e.host_lost
        ) from None


async def _exit_of(place: Place, proc: asyncio.subprocess.Process | None) -> None:
    if proc is not None:
        await proc.wait()
        return
    while await place.alive() is not False:
        await asyncio.sleep(WATCH_S)


def link_event(
    host: str | None,
    state: str,
    since: datetime | None,
    reason: str,
    *,
    mode: str | None = None,
    up: str = "reconnected",
) -> AgentEvent:
    """The event that tells the scheduler a link's new ``state`` (a :class:`LinkChanged`).
    ``mode``: the run's link mode (default ``local`` or ``ssh`` by ``host``; ``exec-server``
    names the exec-server's link, :mod:`~symphony_tui.agents.codex.exec_server`); ``up``:
    the word for ``connected`` in the message."""
    mode = mode or ("local" if host is None else "ssh")
    payload = LinkChanged(
        mode=mode,
        state=state,
        since=since.isoformat() if since is not None else None,
        host=host,
        reason=reason or None,
    )
    noun = "exec-server" if mode == "exec-server" else "app-server"
    where = "" if host is None else f" to host {host}"
    if state == CONNECTED:
        return AgentEvent(
            kind=EventKind.NOTIFICATION,
            message=f"{noun} link{where} {up}",
            payload=payload,
        )
    return AgentEvent(
        kind=EventKind.WARNING,
        message=f"{noun} link{where} {state}" + (f": {reason}" if reason else ""),
        payload=payload,
    )


class LinkWriter:
    """The writer side of an :class:`AppServerLink`: ``write`` takes newline-ended JSON
    lines, ``drain`` sends each as one text frame, or holds them while the link is down."""

    def __init__(self, link: AppServerLink) -> None:
        self._link: AppServerLink | None = link  # None once the link is closed
        self._buf = bytearray()

    def write(self, data: bytes) -> None:
        self._buf += data

    async def drain(self) -> None:
        link = self._link
        if link is None:
            raise ConnectionError("app-server link closed")
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                return
            line = bytes(self._buf[:end])
            del self._buf[: end + 1]
            link._note_written(line)
            if link.state == LOST:
                raise ConnectionError(f"app-server link lost: {link.close_reason}")
            if link._ws is None or link._resuming:
                link._held.append(line)
                continue
            if not await link._send(line):
                link._held.append(line)

    def close(self) -> None:
        """Closing happens through :meth:`AppServerLink.aclose`."""


class AppServerLink:
    """One session's stream to a detached app-server at ``place`` (see the module doc).

    ``hello``: the ``initialize`` params; ``lost_after_s``: how long a host that does not
    answer is tried before the link is lost; ``on_state(state, since, reason)``: told every
    change of :attr:`state`. Build it with :meth:`open`."""

    def __init__(
        self,
        place: Place,
        *,
        hello: dict[str, Any],
        lost_after_s: float,
        on_state: Callable[[str, datetime | None, str], None] | None = None,
        backoff: Backoff = RECONNECT_BACKOFF,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.place = place
        self._hello = hello
        self.lost_after_s = lost_after_s
        self._on_state = on_state
        self._backoff = backoff
        self._draw = draw
        self.reader = asyncio.StreamReader(limit=STDOUT_READER_LIMIT)
        self._pause = _Pause()
        self.reader.set_transport(self._pause)  # type: ignore[arg-type]  # the reader calls only pause/resume_reading
        self.writer = LinkWriter(self)
        self.close_reason = ""
        #: Set (the host's name) when the link ended because its host could not be reached.
        self.host_lost: str | None = None
        #: The thread this link follows across reconnects (set by the session).
        self.thread_id: str | None = None
        self.state = CONNECTED
        self.since: datetime | None = None
        self.reconnects = 0
        self._ws: Any = None
        self._resuming = False
        self._closing = False
        self._held: list[bytes] = []
        self._turn_id: str | None = None
        self._turn_ended = False
        self._completed: set[str] = set()  # ids of the turn's items seen completed
        self._started: set[str] = set()  # ids of the turn's items seen started
        self._asked: dict[str, bytes] = {}  # server requests not answered yet, by id
        self._answers: OrderedDict[str, bytes] = OrderedDict()  # id -> answer line sent
        self._own = 0
        self._pump: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, place: Place, timeout_s: float, *, hello: dict[str, Any], **kw: Any
    ) -> AppServerLink:
        """Connect to ``place`` within ``timeout_s`` (a socket not there yet is waited
        for). Raises ``AgentError("launch_failed")``."""
        link = cls(place, hello=hello, **kw)
        link._ws = await ws_connect(await place.socket(), timeout_s)
        link._pump = asyncio.create_task(link._run(), name="codex-link")
        return link

    # ------------------------------------------------------------------ sniffing
    def follow(self, thread_id: str | None, turn_id: str | None = None) -> None:
        """The thread (and, re-adopted, the turn in flight) to resume after a drop."""
        self.thread_id = thread_id
        if turn_id is not None:
            self._turn_id, self._turn_ended = turn_id, False

    def _note_written(self, line: bytes) -> None:
        """Remember the session's answers to server requests (for a request sent again)."""
        if not _head_id(line) or b'"method"' in line[:_HEAD]:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        key = json.dumps(msg.get("id"))
        if self._asked.pop(key, None) is not None:
            self._answers[key] = line
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)

    def _note_read(self, data: bytes) -> bool:
        """Track the turn, its completed items and the server's requests from a line
        read; False when the line is not for the session (a request codex sent again)."""
        if _method_of(data) in _FOLLOWED:
            self._note_notification(data)
            return True
        if not _head_id(data) or b'"method"' not in data[:_HEAD]:
            return True
        try:
            msg = json.loads(data)
        except ValueError:
            return True
        if not isinstance(msg, dict) or "method" not in msg:
            return True
        key = json.dumps(msg.get("id"))
        if key in self._asked:
            return False  # sent again after a resume: the session still holds it
        answer = self._answers.get(key)
        if answer is not None:
            if answer not in self._held:  # answered while away: the same answer, once
                self._held.append(answer)
            return False
        self._asked[key] = data
        return True

    def _note_notification(self, data: bytes) -> None:
        try:
            msg = json.loads(data)
            method, params = msg["method"], msg["params"]
            if method == "item/completed":
                self._completed.add(str(params["item"]["id"]))
            elif method == "item/started":
                self._started.add(str(params["item"]["id"]))
            elif method == "turn/started":
                self._turn_id = str(params["turn"]["id"])
                self._turn_ended = False
                self._completed.clear()
                self._started.clear()
            elif method == "turn/completed":
                self._turn_ended = True
        except (ValueError, KeyError, TypeError):
            return

    # ------------------------------------------------------------------ pump
    async def _run(self) -> None:
        try:
            while True:
                reason = await self._read(self._ws)
                if self._closing:
                    self.close_reason = self.close_reason or "closed"
                    return
                if not await self._reconnect(reason):
                    return
        finally:
            self.reader.feed_eof()

    async def _read(self, ws: Any) -> str:
        """Hand every message of ``ws`` up until it closes; returns why it closed."""
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in ws:
                data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
                if self._note_read(data):
                    self.reader.feed_data(data + b"\n")
                if not self._pause.go.is_set():
                    await self._pause.go.wait()
            return "the app-server closed the socket"
        except ConnectionClosed as e:
            return f"the app-server socket closed ({e})"
        except (OSError, asyncio.IncompleteReadError) as e:
            return f"the app-server socket failed ({e})"

    async def _send(self, line: bytes) -> bool:
        from websockets.exceptions import ConnectionClosed

        ws = self._ws
        if ws is None:
            return False
        try:
            await ws.send(line.decode("utf-8"))
            return True
        except (ConnectionClosed, OSError):
            return False

    def _set_state(self, state: str, reason: str = "") -> None:
        if state == self.state:
            return
        self.state = state
        self.since = datetime.now(UTC) if state != CONNECTED else None
        if self._on_state is not None:
            with contextlib.suppress(Exception):
                self._on_state(state, self.since, reason)

    async def _reconnect(self, reason: str) -> bool:
        """Reconnect after a drop (see the module doc); False when the link is lost (the
        reason in :attr:`close_reason`)."""
        self._ws = None
        self._set_state(RECONNECTING, reason)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lost_after_s  # moved on whenever the host answers
        last, attempt, refused = reason, 0, 0
        while not self._closing:
            attempt += 1
            await asyncio.sleep(self._backoff.delay_s(attempt, self._draw))
            if self._closing:
                break
            living = await self._alive()
            if living is False:
                self.close_reason = f"{reason}; the app-server is gone"
                self._set_state(LOST, self.close_reason)
                return False
            if living is True:
                deadline = loop.time() + self.lost_after_s
                try:
                    await asyncio.wait_for(self._resume(), ATTEMPT_S)
                except Exception as e:  # websockets' handshake errors too
                    last = str(e) or type(e).__name__
                    refused += 1
                    await self._drop_ws()
                else:
                    break
                if refused >= REFUSED_ATTEMPTS:
                    self.close_reason = (
                        f"the app-server lives but {refused} reconnect attempts failed ({last})"
                    )
                    self._set_state(LOST, self.close_reason)
                    return False
            elif loop.time() >= deadline:
                self.host_lost = self.place.host
                self.close_reason = (
                    f"host {self.place.host} not reached for {self.lost_after_s:g}s "
                    f"after the app-server link dropped ({last})"
                )
                self._set_state(LOST, self.close_reason)
                return False
        if self._closing:
            self.close_reason = self.close_reason or "closed"
            return False
        self.reconnects += 1
        self._set_state(CONNECTED)
        return True

    async def _alive(self) -> bool | None:
        try:
            return await self.place.alive()
        except Exception:
            return None

    async def _drop_ws(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2.0)
        with contextlib.suppress(Exception):
            await self.place.drop()

    async def _resume(self) -> None:
        """One attempt: connect, ``initialize``, ``thread/resume``, ``thread/turns/list``;
        then hand up what finished meanwhile and what arrived during the attempt, and
        send the held lines."""
        await self.place.drop()  # a forward left from the dropped connection
        ws = await ws_connect(await self.place.socket(), ATTEMPT_S)
        self._ws, self._resuming = ws, True
        early: list[bytes] = []
        try:
            await self._call(ws, "initialize", self._hello, early)
            await ws.send(json.dumps({"method": "initialized"}))
            listed: list[dict[str, Any]] = []
            if self.thread_id:
                await self._call(
                    ws, "thread/resume", {"threadId": self.thread_id, "excludeTurns": True}, early
                )
                res = await self._call(
                    ws,
                    "thread/turns/list",
                    {"threadId": self.thread_id, "limit": TURNS_LISTED, "itemsView": "full"},
                    early,
                )
                listed = [t for t in (res or {}).get("data") or [] if isinstance(t, dict)]
        except BaseException:
            self._resuming = False
            raise
        for line in self._caught_up(listed):
            self._note_read(line)
            self.reader.feed_data(line + b"\n")
        for data in early:
            if self._note_read(data):
                self.reader.feed_data(data + b"\n")
        self._resuming = False
        held, self._held = self._held, []
        for i, line in enumerate(held):
            if not await self._send(line):
                self._held = held[i:] + self._held
                break

    async def _call(self, ws: Any, method: str, params: Any, early: list[bytes]) -> Any:
        """A request of the link's own on ``ws``; messages for the session that arrive
        before its response are kept in ``early``. Raises ``AgentError``."""
        self._own += 1
        rid = f"symphony-link-{self._own}"
        await ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        while True:
            message = await ws.recv()
            data = message.encode("utf-8") if isinstance(message, str) else bytes(message)
            if _head_id(data) and rid.encode() in data[:_HEAD]:
                msg = json.loads(data)
                if isinstance(msg, dict) and msg.get("id") == rid:
                    if "error" in msg:
                        raise AgentError("reattach_failed", f"{method} refused: {msg['error']}")
                    return msg.get("result")
            early.append(data)

    def _caught_up(self, turns: list[dict[str, Any]]) -> list[bytes]:
        """Notifications for what the turn in flight did while nobody listened."""
        if self._turn_id is None or self._turn_ended:
            return []
        found = next((t for t in turns if t.get("id") == self._turn_id), None)
        if found is None:
            return []
        out = []
        for item in found.get("items") or []:
            if not isinstance(item, dict) or item.get("type") == "userMessage":
                continue
            if str(item.get("id")) in self._completed:
                continue
            running = item.get("status") in ("inProgress", "pending")
            if running and str(item.get("id")) in self._started:
                continue
            method = "item/started" if running else "item/completed"
            params = {"threadId": self.thread_id, "turnId": self._turn_id, "item": item}
            out.append(json.dumps({"method": method, "params": params}).encode())
        if found.get("status") in ("completed", "interrupted", "failed"):
            turn = {k: found.get(k) for k in ("id", "status", "error")}
            params = {"threadId": self.thread_id, "turn": turn}
            out.append(json.dumps({"method": "turn/completed", "params": params}).encode())
        return out

    async def aclose(self) -> None:
        """Close the connection (the app-server goes on), stop the pump and any forward."""
        self._closing = True
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2.0)
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump
        with contextlib.suppress(Exception):
            await self.place.release()
        self._on_state = None  # the session's: no reference cycle outlives the close
        self.writer._link = None
        self.reader.feed_eof()
