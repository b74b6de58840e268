"""The session skeleton the HTTP-server backends (OpenHands, OpenCode) share.

Both drive one server-side session turn by turn over REST plus an event stream
(docs/protocols.md "OpenHands agent-server", "OpenCode server"): a turn sends the prompt (or
adopts the run the server is already doing after a re-attach), follows the stream until
the server's status ends it, and reports the end. :class:`HttpServerSession` holds that
skeleton (the turn lock, the wake-up event, stream failure and notices, interrupts bounded
by the request timeout, token and turn-end reports); each backend implements only its own
steps (see the abstract methods).

A turn's end is reported by :func:`turn_end_event` in the same shape for every backend
(``TurnEnded``): an operator's rejection that stopped the turn is ``TURN_CANCELLED`` with
outcome ``rejected_by_operator`` (the operator's decision, not a crash), a rejection by a
policy or a timeout ``TURN_FAILED`` with outcome ``declined``.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost, TurnResult
from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import Notice, Payload, TokenReport, TurnEnded, TurnStarted
from symphony_tui.text import one_line

_DEFAULT_MESSAGE = {
    "completed": "finished",
    "cancelled": "cancelled",
    "rejected_by_operator": "rejected by operator",
}


def turn_end_event(
    result: TurnResult, rejection: str | None, by_operator: bool, session_id: str | None
) -> AgentEvent:
    """The end event of a turn that returned ``result``: ``TURN_COMPLETED``,
    ``TURN_CANCELLED`` (interrupted, or stopped by the operator's rejection
    ``rejection`` when ``by_operator``) or ``TURN_FAILED``, message ``result.error`` (or
    a word for the outcome)."""
    end = TurnEnded.of(
        result.status.value,
        result.error,
        rejection=rejection,
        rejected_by_operator=by_operator,
    )
    message = _DEFAULT_MESSAGE.get(end.outcome, "failed")
    if end.outcome != "completed" and result.error:
        message = result.error
    return AgentEvent(
        kind=EventKind(end.kind_name), message=message, session_id=session_id, payload=end
    )


class HttpServerSession(ABC):
    """One server-side session of an HTTP backend (an ``AgentSession``).

    ``server_session_id`` is the server's id of the session (OpenHands conversation,
    OpenCode session): it is also the thread the scheduler resumes. ``client`` is the
    backend's HTTP client, ``stream`` (set by the subclass) its event stream, ``usage``
    the session's absolute token totals (``None`` until known).

    ``run_turn`` runs: :meth:`_start_turn` (reset, and whether to adopt a running run),
    :meth:`_send_prompt` unless adopted, the ``TURN_STARTED`` report, :meth:`_follow_turn`
    (until the status ends the turn), :meth:`_end_of_turn` (the rejection that stopped it),
    then the end report.
    """

    #: ``TURN_STARTED`` messages: after sending the prompt / when adopting a running run.
    sent_message = "prompt sent"
    adopted_message = "adopted the session's current run"

    stream: Any

    def __init__(
        self,
        host: SessionHost,
        client: Any,
        server_session_id: str,
        *,
        pid: int | None,
        request_timeout_s: float,
    ) -> None:
        self.host = host
        self.client = client
        self._server_session_id = server_session_id
        self._pid = pid
        self._request_timeout_s = request_timeout_s
        self.usage: TokenUsage | None = None
        self._interrupted = False
        self._failed: AgentError | None = None
        self._wake = asyncio.Event()
        self._turn_lock = asyncio.Lock()
        self._closed = False
        #: The worker host whose connection dropped under this session (the scheduler
        #: marks it down), else None.
        self.host_lost: str | None = None
        self._closers: list[Callable[[], Awaitable[None]]] = []

    @property
    def server_session_id(self) -> str:
        return self._server_session_id

    # ------------------------------------------------------------ AgentSession

    @property
    def session_id(self) -> str | None:
        return self._server_session_id

    @property
    def thread_id(self) -> str | None:
        return self._server_session_id

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def adoptable(self) -> bool:
        """True while the session runs on this scheduler's managed local server (``pid``
        set): that server records itself for the next scheduler to take over
        (:mod:`symphony_tui.agents.local_server`), so the start-up reaper must leave its
        process group alone. Servers given by ``base_url`` or started on a worker host
        have no ``pid`` here."""
        return self._pid is not None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    def report_attached_usage(self) -> None:
        """Emit the totals found on attach (``TokenReport.attached``): a re-attached
        session's earlier usage is a baseline for the scheduler, not new growth."""
        if self.usage is not None and not self.usage.is_zero:
            self._emit_usage(attached=True)

    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        async with self._turn_lock:
            self._raise_if_failed()
            self._interrupted = False
            adopt = self._start_turn()
            if not adopt:
                await self._send_prompt(prompt)
            self._emit(
                EventKind.TURN_STARTED,
                self.adopted_message if adopt else self.sent_message,
                TurnStarted(adopted=adopt, continuation=continuation),
            )
            result = await self._follow_turn(adopt)
            rejection, by_operator = self._end_of_turn()
            self.host.emit(turn_end_event(result, rejection, by_operator, self.session_id))
            return result

    async def interrupt(self) -> None:
        """Stop the current run (:meth:`_stop_run`), bounded by the request timeout; a
        failure is reported as a ``WARNING``, never raised."""
        self._interrupted = True
        self._wake.set()
        try:
            async with asyncio.timeout(self._request_timeout_s):
                await self._stop_run()
        except (AgentError, TimeoutError) as e:
            self._emit(EventKind.WARNING, f"interrupt failed: {one_line(str(e), 300)}")

    async def close(self) -> None:
        """Settle what is pending (:meth:`_release`), close the stream, wake the turn, then
        run what the session owns (:meth:`own`: a server on a worker host, its client)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._release()
            await self.stream.aclose()
        finally:
            self._wake.set()
            closers, self._closers = self._closers, []
            for closer in closers:
                with contextlib.suppress(Exception):
                    await closer()

    def own(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Await ``closer()`` when the session closes (in the order given)."""
        self._closers.append(closer)

    def server_lost(self, error: AgentError, host_lost: str | None) -> None:
        """The session's own server went away (a worker host's ssh clients ended): the
        turn in flight ends with ``error``; ``host_lost`` (the reason) when the connection
        dropped."""
        if host_lost is not None:
            self.host_lost = host_lost
        if not self._closed:
            self._failed = error
            self._emit(EventKind.ERROR, one_line(error.message, 300))
            self._wake.set()

    # ------------------------------------------------------------ backend steps

    @abstractmethod
    def _start_turn(self) -> bool:
        """Reset the per-turn state; True to adopt the run the server is doing."""

    @abstractmethod
    async def _send_prompt(self, prompt: str) -> None:
        """Send the turn's prompt. Raises :class:`AgentError`."""

    @abstractmethod
    async def _follow_turn(self, adopted: bool) -> TurnResult:
        """Wait until the server's status ends the turn; how it ended."""

    @abstractmethod
    def _end_of_turn(self) -> tuple[str | None, bool]:
        """After the turn: the rejection that stopped it (or ``None``) and whether it was
        the operator's."""

    @abstractmethod
    async def _stop_run(self) -> None:
        """Ask the server to stop the current run."""

    @abstractmethod
    async def _release(self) -> None:
        """Settle pending approvals and tasks before the stream closes."""

    @abstractmethod
    def _malformed_total(self) -> int:
        """How many stream frames were skipped as malformed so far."""

    # ------------------------------------------------------------ stream callbacks

    def _on_notice(self, kind: str, message: str) -> None:
        level = EventKind.MALFORMED if kind == "malformed" else EventKind.WARNING
        self._emit(level, message, Notice(notice=kind, malformed_total=self._malformed_total()))

    def _on_failed(self, error: AgentError) -> None:
        self._failed = error
        self._emit(EventKind.ERROR, f"event stream failed: {error}")
        self._wake.set()

    # ------------------------------------------------------------ helpers

    def _raise_if_failed(self) -> None:
        if self._closed:
            raise AgentError("transport_error", "session closed")
        if self._failed is not None:
            raise self._failed

    def _emit(self, kind: EventKind, message: str, payload: Payload | None = None) -> None:
        self.host.emit(
            AgentEvent(
                kind=kind, message=message, session_id=self._server_session_id, payload=payload
            )
        )

    def _emit_usage(self, *, attached: bool = False) -> None:
        u = self.usage
        if u is None:
            return
        self._emit(
            EventKind.TOKEN_USAGE,
            f"tokens in {u.input_tokens} out {u.output_tokens} total {u.total_tokens}",
            TokenReport(usage=u, attached=attached),
        )
