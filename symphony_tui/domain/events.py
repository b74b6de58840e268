"""Normalized agent and scheduler events (spec §10.4, §13).

Backends translate their wire messages into :class:`AgentEvent`; the scheduler stamps
``seq`` (monotonic per process) and keeps a bounded ring of them for the console, the
HTTP API and the JSONL event file.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventKind(StrEnum):
    # session / turn lifecycle
    SESSION_STARTED = "session_started"
    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    TURN_CANCELLED = "turn_cancelled"
    # content
    MESSAGE_DELTA = "message_delta"
    MESSAGE = "message"
    REASONING = "reasoning"
    COMMAND_STARTED = "command_started"
    COMMAND_OUTPUT = "command_output"
    COMMAND_COMPLETED = "command_completed"
    FILE_CHANGE = "file_change"
    PLAN = "plan"
    TOOL_CALL = "tool_call"
    # operator interaction
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_RESOLVED = "approval_resolved"
    # accounting
    TOKEN_USAGE = "token_usage"
    RATE_LIMITS = "rate_limits"
    # diagnostics
    WARNING = "warning"
    ERROR = "error"
    MALFORMED = "malformed"
    NOTIFICATION = "notification"
    # scheduler-side
    DISPATCH = "dispatch"
    RUN_ENDED = "run_ended"
    RETRY_SCHEDULED = "retry_scheduled"
    RECONCILE = "reconcile"
    HOOK = "hook"
    TRACKER = "tracker"
    CONFIG = "config"
    OPERATOR = "operator"


class AgentEvent(BaseModel):
    """One event. ``message`` is a short human line (raw agent text; the console sanitizes).

    ``data`` carries kind-specific fields (e.g. ``command``, ``exit_code``, ``item_id``,
    ``usage``). ``issue_id`` is ``None`` for process-wide events.
    """

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    message: str = ""
    issue_id: str | None = None
    issue_identifier: str | None = None
    session_id: str | None = None
    at: datetime | None = None
    seq: int = 0
    data: dict[str, Any] = Field(default_factory=dict)
