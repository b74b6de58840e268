"""What a front end (console, HTTP API, headless runner) may do with a scheduler.

Front ends read immutable snapshots and events and send commands; they never touch
scheduler objects (docs/architecture.md "Who owns which state"). The console polls at a steady rate
(``snapshot()`` + ``events_since(last_seq)``), which coalesces floods by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.domain.commands import Command


@dataclass(frozen=True)
class CommandResult:
    """Outcome of a command: ``ok`` and a one-line ``message`` for the operator."""

    ok: bool
    message: str = ""


class SchedulerPort(Protocol):
    def snapshot(self) -> Snapshot:
        """The latest published snapshot (cheap; no copying)."""
        ...

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        """Events with ``event.seq > seq``, oldest first, from the bounded ring buffer;
        filtered to one issue when ``issue_id`` is given."""
        ...

    async def send(self, command: Command) -> CommandResult:
        """Apply an operator command (Refresh, Interrupt, Stop, Approve, Deny, Answer,
        Rerun, PauseDispatch, MoveIssue) and report what happened."""
        ...
