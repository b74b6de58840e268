"""The agent-backend contract: what the scheduler needs from Codex, OpenHands and OpenCode.

The scheduler hands a backend a :class:`SessionHost` (its side of the conversation) and gets
back an :class:`AgentSession`. Protocol framing, reconnects and wire quirks stay inside the
backend; the scheduler sees only normalized :class:`~symphony_tui.domain.AgentEvent` values
(docs/architecture.md "Layers"; spec §10).

Event conventions every backend follows (payload types in
:mod:`symphony_tui.domain.payloads`):

* ``TOKEN_USAGE`` events carry a ``TokenReport`` with the **absolute** totals of the
  backend session (codex thread, OpenHands conversation, OpenCode session). The scheduler
  adds only the growth since the previous report (spec §13.5).
* ``RATE_LIMITS`` events carry a ``RateLimitReport``.
* ``SESSION_STARTED`` carries a ``SessionStarted`` with the thread / session ids when known.
* Turn ends carry a ``TurnEnded`` (``TurnEnded.of`` picks the outcome and the kind).
* Agent text goes into ``message`` raw; the console sanitizes on display.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from symphony_tui.domain import AgentEvent, ApprovalAnswer, ApprovalRequest, Issue


class AgentError(Exception):
    """A backend failed to start or lost its transport. ``code`` is a short category
    (``launch_failed``, ``handshake_failed``, ``read_timeout``, ``process_exited``,
    ``transport_error``, ``protocol_error``). ``host_lost``: set (the worker host's name)
    when the cause is the connection to that host failing, so the scheduler marks the
    host down instead of blaming the run."""

    def __init__(self, code: str, message: str, *, host_lost: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.host_lost = host_lost


@dataclass(frozen=True)
class ToolSpec:
    """A client-side tool advertised to the agent (codex ``dynamicTools``; spec §10.5)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """Result of a client-side tool call; ``text`` is what the agent reads back."""

    success: bool
    text: str


class TurnStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    INPUT_REQUIRED = "input_required"


@dataclass(frozen=True)
class TurnResult:
    """How one turn ended. ``error`` is a one-line reason for anything but COMPLETED."""

    status: TurnStatus
    turn_id: str | None = None
    error: str | None = None


class FlowControl:
    """How a session's stream reader keeps pace with its host (``SessionHost.flow``).

    - :meth:`pace`: a backend that reads a stream awaits it between batches of lines; it
      returns once the host has room for more events (back-pressure under a flood).
    - :meth:`congested`: True while the host is behind, so a backend that can join
      consecutive streamed deltas of one item holds them (one event, text whole and in
      order) instead of emitting one event each, and keeps reading (the codex backend:
      ``agents/codex/coalesce.py``).
    - :meth:`hurry`: the session's reader, waiting in :meth:`pace`, holds a request of the
      agent (an approval, a question) behind what it reads: the waiting :meth:`pace`
      returns before other sessions' readers that wait, so an operator's answer is never
      starved by a flood (the codex backend: ``agents/codex/rpc.py``).

    This base is a host without back-pressure: :meth:`pace` only yields to the event loop
    once, it is never congested, and :meth:`hurry` does nothing. The scheduler's is
    ``scheduler/inbox.py`` ``InboxFlow``."""

    async def pace(self) -> None:
        await asyncio.sleep(0)

    def congested(self) -> bool:
        return False

    def hurry(self) -> None:
        return None


@runtime_checkable
class SessionHost(Protocol):
    """The scheduler's side of one agent session (one issue, one run attempt); its
    :attr:`flow` paces the session's reader (:class:`FlowControl`)."""

    @property
    def issue(self) -> Issue: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def attempt(self) -> int | None: ...

    @property
    def tools(self) -> tuple[ToolSpec, ...]: ...

    @property
    def worker_host(self) -> str | None:
        """The worker host the session runs on (``worker.ssh_hosts``); None: this machine."""
        ...

    @property
    def flow(self) -> FlowControl:
        """The host's flow control (back-pressure, congestion, hurrying a request)."""
        ...

    @property
    def resume(self) -> dict[str, Any]:
        """What the workspace manifest recorded of the previous session
        (e.g. ``thread_id``, ``conversation_id``, ``server_url``); empty when none."""
        ...

    def emit(self, event: AgentEvent) -> None:
        """Report an event. Never blocks; issue/session ids are filled in by the host."""
        ...

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask for a decision. Resolves per ``agent.approvals`` (operator / auto / deny);
        an operator request unanswered for ``agent.approval_timeout_ms`` resolves as a
        decline with ``timed_out=True``, after which the attempt fails."""
        ...

    async def call_tool(self, name: str, arguments: Any) -> ToolResult:
        """Run a client-side tool. Unknown tools give ``success=False`` (never raise)."""
        ...

    def record_session(self, **fields: Any) -> None:
        """Persist backend session facts (``thread_id``, ``conversation_id``,
        ``server_url``...) in the workspace manifest so a restart can resume."""
        ...

    async def record_session_durably(self, **fields: Any) -> None:
        """:meth:`record_session`, returning once these facts and every one recorded
        before are on disk: what a later scheduler needs to re-adopt the agent (its
        thread, its process) is recorded before the agent can ask anything."""
        ...


class AgentSession(Protocol):
    """A live session. ``run_turn`` may be called up to ``agent.max_turns`` times."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def thread_id(self) -> str | None: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def adoptable(self) -> bool:
        """True when the agent outlives this session on purpose, to be re-adopted by a
        later scheduler (codex over a unix socket); its process group is then left to
        recovery instead of being recorded as ended."""
        ...

    #: On a worker host: why the connection to it failed under this session (the host is
    #: to be marked down), else None.
    host_lost: str | None

    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        """Send one turn and wait for it to end. Raises :class:`AgentError` when the
        transport dies. Cancelling the awaiting task abandons the turn (the caller then
        calls :meth:`close`)."""
        ...

    async def interrupt(self) -> None:
        """Ask the backend to stop the current turn; ``run_turn`` then returns
        ``INTERRUPTED``. Idempotent; bounded in time."""
        ...

    async def steer(self, text: str) -> bool:
        """Add the operator's ``text`` to the turn in flight, for the model's next request
        (codex ``turn/steer``; OpenHands a user message with ``run: true``; OpenCode
        ``prompt_async`` on the busy session: docs/protocols.md "Steering"). True when
        the server took it; False when no turn is in flight that can take it now (the
        caller then sends it with the next turn). Raises :class:`AgentError` when the
        server refused it or the transport is gone."""
        ...

    async def close(self) -> None:
        """End the session and whatever process it started (the whole process group)."""
        ...


class AgentBackend(Protocol):
    """A factory of sessions for one backend kind (``codex``, ``openhands``, ``opencode``)."""

    name: str

    async def start_session(self, host: SessionHost) -> AgentSession:
        """Launch / connect and do the handshake. Raises :class:`AgentError`."""
        ...

    async def aclose(self) -> None:
        """Release backend-wide resources (a managed server, HTTP clients)."""
        ...


@dataclass
class ProcessInfo:
    """Diagnostics for a child process: pid and a bounded stderr tail."""

    pid: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
