"""A scriptable in-memory SchedulerPort for console tests.

Tests set the snapshot, append events (``seq`` assigned in order) and read back the
commands the console sent. ``reply`` decides each CommandResult (or raises).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from symphony_tui.domain import AgentEvent, EventKind, Snapshot
from symphony_tui.domain.audit import AuditEntry
from symphony_tui.domain.commands import Command
from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap


class FakePort(SchedulerPort):
    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot
        self.events: list[AgentEvent] = []
        self.sent: list[Command] = []
        self.queries: list[tuple[int, int, str | None]] = []
        self.reply: Callable[[Command], CommandResult] = lambda c: CommandResult(
            True, f"{c.type} accepted"
        )
        self.snapshot_error: Exception | None = None
        # diff screen: the diff per issue and each file's diff lines; the audit log
        self.diffs: dict[str, WorkspaceDiff] = {}
        self.file_lines: dict[str, list[str]] = {}
        self.page_asks: list[tuple[str, str, int, int]] = []
        self.audit: list[AuditEntry] = []
        self.audit_error: Exception | None = None
        self.gaps: dict[str, TranscriptGap] = {}  # issue id -> what its transcript dropped

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

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        return self.gaps.get(issue_id) or TranscriptGap()

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        self.sent.append(command)
        return self.reply(command)

    async def diff(self, issue: str) -> WorkspaceDiff:
        return self.diffs.get(issue) or WorkspaceDiff(
            issue_identifier=issue, error=f"{issue} has no workspace here"
        )

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        self.page_asks.append((issue, path, offset, limit))
        lines = self.file_lines.get(path)
        if lines is None:
            return DiffPage(path=path, error=f"{path!r} is not a file of this workspace")
        return DiffPage(
            path=path,
            offset=offset,
            lines=tuple(lines[offset : offset + limit]),
            total_lines=len(lines),
            binary=not lines,
        )

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        if self.audit_error is not None:
            raise self.audit_error
        return self.audit[-limit:]

    async def note_action(self, what: str, **fields) -> AuditEntry:
        fields.setdefault("who", "ann@console")
        entry = AuditEntry(at=self.current.generated_at, what=what, **fields)
        self.audit.append(entry)
        return entry

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
