"""A scriptable in-memory SchedulerPort for console tests.

Tests set the snapshot, append events (``seq`` assigned in order) and read back the
commands the console sent. ``reply`` decides each CommandResult (or raises).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from symphony_tui.domain import AgentEvent, EventKind, Snapshot
from symphony_tui.domain.commands import Command
from symphony_tui.scheduler.port import CommandResult


class FakePort:
    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot
        self.events: list[AgentEvent] = []
        self.sent: list[Command] = []
        self.queries: list[tuple[int, int, str | None]] = []
        self.reply: Callable[[Command], CommandResult] = lambda c: CommandResult(
            True, f"{c.type} accepted"
        )
        self.snapshot_error: Exception | None = None

    # -- the port ----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        if self.snapshot_error is not None:
            raise self.snapshot_error
        return self.current

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        self.queries.append((seq, limit, issue_id))
        out = [
            e for e in self.events if e.seq > seq and (issue_id is None or e.issue_id == issue_id)
        ]
        return out[:limit]

    async def send(self, command: Command) -> CommandResult:
        self.sent.append(command)
        return self.reply(command)

    # -- scripting ---------------------------------------------------------------------

    def set_snapshot(self, snapshot: Snapshot) -> None:
        self.current = snapshot

    def update(self, **changes) -> Snapshot:
        self.current = self.current.model_copy(update=changes)
        return self.current

    def add_event(
        self,
        kind: EventKind,
        message: str = "",
        *,
        issue_id: str | None = None,
        identifier: str | None = None,
        at: datetime | None = None,
        **data,
    ) -> AgentEvent:
        event = AgentEvent(
            kind=kind,
            message=message,
            issue_id=issue_id,
            issue_identifier=identifier,
            at=at,
            seq=len(self.events) + 1,
            data=data,
        )
        self.events.append(event)
        return event
