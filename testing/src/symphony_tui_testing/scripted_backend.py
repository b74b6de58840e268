"""A scripted in-process :class:`~symphony_tui.agents.base.AgentBackend` for scheduler and
console tests: each turn runs a coroutine the test supplies, with the real ``SessionHost``.

It stands in for an agent program in fast unit tests; the real backends are tested against
their real programs elsewhere.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import ClassVar

from symphony_tui.agents.base import AgentError, SessionHost, TurnResult, TurnStatus
from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import SessionStarted, TokenReport, TurnStarted

TurnScript = Callable[["ScriptedSession", str, int], Awaitable[TurnResult]]


@dataclass
class ScriptedSession:
    host: SessionHost
    thread_id: str
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    turns: int = 0
    prompts: list[str] = field(default_factory=list)
    script: TurnScript | None = None
    turn_id: str | None = None
    in_turn: bool = False
    steered: list[str] = field(default_factory=list)
    steer_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    #: Never lost to a worker host.
    host_lost: str | None = None
    #: Never left for re-adoption.
    adoptable: ClassVar[bool] = False

    @property
    def session_id(self) -> str | None:
        return f"{self.thread_id}-{self.turn_id}" if self.turn_id else None

    @property
    def pid(self) -> int | None:
        return None

    async def run_turn(self, prompt: str, *, continuation: bool = False) -> TurnResult:
        self.turns += 1
        self.prompts.append(prompt)
        self.turn_id = f"turn-{self.turns}"
        self.interrupted.clear()
        self.host.emit(
            AgentEvent(kind=EventKind.TURN_STARTED, payload=TurnStarted(turn_id=self.turn_id))
        )
        assert self.script is not None
        self.in_turn = True
        try:
            return await self.script(self, prompt, self.turns)
        finally:
            self.in_turn = False

    async def interrupt(self) -> None:
        self.interrupted.set()

    async def steer(self, text: str) -> bool:
        """Taken only while a turn's script runs (as the real backends); kept in
        ``steered`` and signalled on ``steer_arrived``."""
        if not self.in_turn:
            return False
        self.steered.append(text)
        self.steer_arrived.set()
        return True

    async def close(self) -> None:
        self.closed = True

    # helpers for scripts ------------------------------------------------------------
    def usage(
        self,
        total: int,
        *,
        input_tokens: int | None = None,
        output: int = 0,
        cached: int = 0,
        reasoning: int = 0,
    ) -> None:
        """Report absolute thread totals (as codex's ``thread/tokenUsage/updated``)."""
        usage = TokenUsage(
            input_tokens=input_tokens if input_tokens is not None else total - output,
            cached_input_tokens=cached,
            output_tokens=output,
            reasoning_tokens=reasoning,
            total_tokens=total,
        )
        self.host.emit(AgentEvent(kind=EventKind.TOKEN_USAGE, payload=TokenReport(usage=usage)))

    async def wait_interrupt(self) -> TurnResult:
        await self.interrupted.wait()
        return TurnResult(TurnStatus.INTERRUPTED, self.turn_id, "interrupted")


class ScriptedBackend:
    """``script(session, prompt, turn_number) -> TurnResult`` runs each turn.

    ``fail_start`` makes ``start_session`` raise ``AgentError`` that many times first.
    ``sessions`` lists every session started, for assertions.
    """

    name = "codex"

    def __init__(self, script: TurnScript, *, fail_start: int = 0) -> None:
        self.script = script
        self.fail_start = fail_start
        self.sessions: list[ScriptedSession] = []
        self.closed = False
        self._threads = itertools.count(1)
        #: The model each session reports on start (``SessionStarted.model``; None: none).
        self.model: str | None = None

    async def start_session(self, host: SessionHost) -> ScriptedSession:
        if self.fail_start > 0:
            self.fail_start -= 1
            raise AgentError("launch_failed", "scripted launch failure")
        thread = host.resume.get("thread_id") or f"thread-{next(self._threads)}"
        session = ScriptedSession(host=host, thread_id=thread, script=self.script)
        host.record_session(thread_id=thread)
        host.emit(
            AgentEvent(
                kind=EventKind.SESSION_STARTED,
                payload=SessionStarted(thread_id=thread, model=self.model),
            )
        )
        self.sessions.append(session)
        return session

    async def aclose(self) -> None:
        self.closed = True


async def complete(session: ScriptedSession, prompt: str, turn: int) -> TurnResult:
    """A script: report some tokens and complete the turn."""
    session.usage(100 * turn, output=10 * turn)
    return TurnResult(TurnStatus.COMPLETED, session.turn_id)


async def hang(session: ScriptedSession, prompt: str, turn: int) -> TurnResult:
    """A script: keep the turn running until it is interrupted (a run that stays claimed)."""
    return await session.wait_interrupt()
