"""Run-state models (spec §4.1.5-§4.1.8, §7)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from symphony_tui.domain.kinds import RunStatus
from symphony_tui.domain.tokens import TokenUsage


class LiveSession(BaseModel):
    """Live agent-session metadata of a running issue (spec §4.1.6)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    agent_pid: int | None = None
    last_event: str | None = None
    last_event_at: datetime | None = None
    last_message: str | None = None
    turn_count: int = 0
    tokens: TokenUsage = Field(default_factory=TokenUsage)


class RunAttempt(BaseModel):
    """One execution attempt for one issue (spec §4.1.5)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    issue_identifier: str
    attempt: int | None = None
    workspace_path: str = ""
    started_at: datetime | None = None
    status: RunStatus = RunStatus.PREPARING_WORKSPACE
    error: str | None = None


class RetryEntry(BaseModel):
    """Scheduled retry state for an issue (spec §4.1.7). ``due_at`` is wall-clock time."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    identifier: str
    attempt: int
    due_at: datetime
    error: str | None = None
    continuation: bool = False

    @property
    def retry_kind(self) -> str:
        """``continuation`` (the run ended normally and its issue is still active) or
        ``failure`` (an error, timeout or stall): the optional template field of §12.3."""
        return "continuation" if self.continuation else "failure"


class RecoveredWorkspace(BaseModel):
    """What a workspace's manifests say about its last run (our extension of spec §9)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    key: str
    path: str
    #: The worker host the workspace is on (a ``worker.ssh_hosts`` entry); None: here.
    host: str | None = None
    issue_id: str | None = None
    issue_identifier: str | None = None
    issue_title: str | None = None
    issue_state: str | None = None
    backend: str | None = None
    session_id: str | None = None
    thread_id: str | None = None
    conversation_id: str | None = None
    server_url: str | None = None
    attempt: int | None = None
    status: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    #: False: the last run started a turn and its backend reported no usage (``tokens``
    #: are zeros that measure nothing).
    usage_reported: bool = True
    hooks: dict[str, str] = Field(default_factory=dict)
    last_event: str | None = None
    #: The operator held the issue (an interrupt or stop), with its ``updated_at`` then.
    held: bool = False
    held_updated_at: datetime | None = None
    #: Tokens the operator added to the issue's budgets (``extend_budget``), in total.
    budget_extra: int = Field(default=0, ge=0)
    #: US dollars the operator added to the issue's money budgets, in total.
    budget_extra_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
