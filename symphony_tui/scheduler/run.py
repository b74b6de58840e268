"""Mutable state of one running issue, owned by the orchestrator (spec §4.1.5, §4.1.6)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from symphony_tui.agents.base import AgentSession
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalRequest,
    Issue,
    RunOutcome,
    RunStatus,
    TokenUsage,
)
from symphony_tui.scheduler.clock import TimerHandle


@dataclass
class PendingApproval:
    request: ApprovalRequest
    future: asyncio.Future[ApprovalAnswer]
    timer: TimerHandle | None = None


@dataclass
class Run:
    """A live worker. Only the orchestrator mutates it, always on the event loop."""

    issue: Issue
    attempt: int | None
    backend: str
    started_at: datetime
    started_mono: float
    last_event_mono: float
    status: RunStatus = RunStatus.PREPARING_WORKSPACE
    task: asyncio.Task | None = None
    session: AgentSession | None = None
    workspace: Path | None = None
    session_id: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    turn_count: int = 0
    last_event: str | None = None
    last_event_at: datetime | None = None
    last_message: str | None = None
    delta_buffer: str = ""
    tokens: TokenUsage = field(default_factory=TokenUsage)
    pending: dict[str, PendingApproval] = field(default_factory=dict)
    # Why the orchestrator ended this run early, if it did: the worker reports it as outcome.
    end_reason: RunOutcome | None = None
    end_status: RunStatus | None = None
    end_error: str | None = None
    approval_timed_out: str | None = None
    cleanup_workspace: bool = False
    # The state this run's agent moved its own issue to (tracker tool): reconciliation lets
    # the turn finish instead of killing the agent for its own last act.
    agent_moved_state: str | None = None
    resume: dict = field(default_factory=dict)

    @property
    def identifier(self) -> str:
        return self.issue.identifier

    @property
    def waiting_for_operator(self) -> bool:
        return bool(self.pending)
