"""State shared by the parts of one codex session, and how its events are stamped.

:class:`SessionCore` holds what a codex app-server session knows (process, connection, thread,
turn in flight, pending server requests) and the helpers every part uses: :meth:`_emit`
(stamps session id and server time, spec §10.4; docs/protocols.md), :meth:`_spawn` and
:meth:`_live_rpc`. The parts (:mod:`.thread`, :mod:`.turns`, :mod:`.notifications`,
:mod:`.steering`) build on it; :mod:`.session` puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost, TurnResult
from symphony_tui.agents.codex.coalesce import HOLD_CHARS, HOLD_S, HeldDeltas, delta_event
from symphony_tui.agents.codex.detached import DetachedAgent, WsLink
from symphony_tui.agents.codex.eager import start_now
from symphony_tui.agents.codex.process import StderrTail
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection
from symphony_tui.agents.codex.server_requests import ServerRequests
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.settings import CodexSettings
from symphony_tui.domain import AgentEvent, EventKind


@dataclass
class Turn:
    """The turn in flight: its id once known, open items, and how it ended."""

    done: asyncio.Future[TurnResult]
    turn_id: str | None = None
    started_emitted: bool = False
    open_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    id_known: asyncio.Event = field(default_factory=asyncio.Event)
    timeout_error: str | None = None  # set when turn_timeout_ms expired
    continuation: bool = False


class SessionCore:
    """The state every part of a :class:`~symphony_tui.agents.codex.session.CodexSession`
    shares, and the helpers they all use (emit, spawn, the live connection).

    ``sent``: optional list that records every JSON-RPC message written (tests validate
    them against the binary's schema).
    """

    def __init__(
        self,
        host: SessionHost,
        settings: CodexSettings,
        env: Mapping[str, str],
        *,
        sent: list[dict[str, Any]] | None = None,
        on_close: Callable[[Any], None] | None = None,
        remote: RemoteLaunch | None = None,
        adopt: DetachedAgent | None = None,
        groups: dict[int, DetachedAgent] | None = None,
    ) -> None:
        self._host = host
        #: ``codex.transport: unix``: the detached app-server (launched, or ``adopt``:
        #: one an earlier scheduler left running, re-attached by :meth:`open`).
        self._agent: DetachedAgent | None = adopt
        self._adopting = adopt is not None
        #: The backend's live detached process groups: this session's is in it from its
        #: launch (or adoption) until its close ended it.
        self._groups = groups if groups is not None else {}
        if adopt is not None:
            self._groups[adopt.pgid] = adopt
        self._link: WsLink | None = None
        #: Set when the app-server runs on a worker host (agents/remote_launch.py).
        self._remote = remote
        #: The host whose connection failed under this session (None: it did not).
        self.host_lost: str | None = None
        self._on_close = on_close
        self._cfg = settings
        self._env = dict(env)
        self._sent = sent
        self._timeout_s = settings.read_timeout_ms / 1000
        self._proc: asyncio.subprocess.Process | None = None
        self._rpc: RpcConnection | None = None
        self._stderr = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        self._thread_id: str | None = None
        self._model: str | None = settings.model  # the thread's model, for collaborationMode
        self._session_id: str | None = None
        self._turn: Turn | None = None
        self._early_tokens: dict[str, Any] | None = None  # totals seen before the thread id
        self._file_items: dict[str, tuple[str, ...]] = {}
        # The lookup holds the dict, not the session: a bound method of it would make
        # session <-> requests a reference cycle, which outlives the session until a full
        # collection.
        files = self._file_items
        self._requests = ServerRequests(host, lambda item_id: files.get(item_id, ()))
        self._serving: dict[RequestId, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._interrupting: asyncio.Task[None] | None = None
        self._closed = False
        # Streamed deltas held while the host is congested (coalesce.py).
        self._congested: Callable[[], bool] | None = getattr(host, "congested", None)
        self._held: HeldDeltas | None = None
        self._held_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ facts
    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def pid(self) -> int | None:
        if self._proc is not None:
            return self._proc.pid
        return self._agent.pid if self._agent is not None else None

    @property
    def detached(self) -> DetachedAgent | None:
        """The detached app-server this session talks to (``codex.transport: unix``)."""
        return self._agent

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr.lines)

    # ------------------------------------------------------------------ wire in
    def _live_rpc(self) -> RpcConnection:
        if self._rpc is None or self._closed:
            raise AgentError("process_exited", "session is closed")
        if self._rpc.is_closed:
            raise AgentError("process_exited", self._rpc.close_reason())
        return self._rpc

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _spawn_now(self, coro: Any) -> asyncio.Future[Any]:
        """:meth:`_spawn`, the first step run at once (``eager.start_now``)."""
        task = start_now(coro)
        if not task.done():
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return task

    def _emit(self, event: AgentEvent) -> None:
        """Stamp the session id and the server's time on ``event`` and hand it to the host.

        Every event passed here was built by this session for this call and nobody else
        holds it yet, so the stamps are written into it before it is published instead of
        copying it (a copy per agent line costs a seventh of the scheduler's CPU under a
        flood): the event is still built once and immutable once emitted.

        Deltas held back (:meth:`_stream`) are handed over first, so a session's events
        keep their order."""
        if self._held is not None:
            self._flush_held()
        update: dict[str, Any] = {}
        if self._session_id and event.session_id is None:
            update["session_id"] = self._session_id
        emitted = self._rpc.emitted_at if self._rpc is not None else None
        if event.at is None and emitted is not None:
            update["at"] = emitted  # the server's clock for what it notified
        if update:
            _stamp_unpublished(event, update)
        with contextlib.suppress(Exception):
            self._host.emit(event)

    # ------------------------------------------------------------------ deltas
    def _stream(
        self,
        kind: EventKind,
        text: str,
        item_id: str | None,
        reasoning: bool = False,
        summary: bool = False,
    ) -> None:
        """A streamed delta: one event at once, or held with the deltas of its item while
        the host is congested (the rules in :mod:`.coalesce`)."""
        held = self._held
        if held is not None:
            if held.takes(kind, item_id, reasoning, summary) and held.chars + len(text) <= (
                HOLD_CHARS
            ):
                held.add(text)
                return
            self._flush_held()
        congested = self._congested
        if congested is not None and len(text) < HOLD_CHARS and congested():
            at = self._rpc.emitted_at if self._rpc is not None else None
            self._held = HeldDeltas(kind, item_id, reasoning, summary, text, at)
            self._held_timer = asyncio.get_running_loop().call_later(HOLD_S, self._flush_held)
            return
        self._emit(delta_event(kind, text, item_id, reasoning, summary))

    def _flush_held(self) -> None:
        """Hand the held deltas over as one event (nothing when none are held)."""
        held, self._held = self._held, None
        if self._held_timer is not None:
            self._held_timer.cancel()
            self._held_timer = None
        if held is not None:
            self._emit(held.event())

    async def _pace(self) -> None:
        """Between batches of lines (``RpcConnection`` ``pace``): held deltas go once the
        host is no longer congested, then the host's own pacing (``SessionHost.pace``)."""
        if self._held is not None and not (self._congested is not None and self._congested()):
            self._flush_held()
        pace = getattr(self._host, "pace", None)
        if pace is None:
            await asyncio.sleep(0)
        else:
            await pace()


def _stamp_unpublished(event: AgentEvent, update: dict[str, Any]) -> None:
    """Set fields of a frozen event that no one else references yet (see ``_emit``)."""
    event.__dict__.update(update)
    event.__pydantic_fields_set__.update(update)
