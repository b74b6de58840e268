"""Plain pydantic models shared by every layer. No I/O, no Textual, no HTTP clients.

See ``docs/architecture.md`` "Layers" (the domain layer) and the Symphony spec §4 (domain model).

Every model is declared with ``defer_build=True``: pydantic builds a model's validator when it
is first used, not at import, so start-up (launch to the console's first frame, issue 11)
does not pay for the dozens of payload and approval shapes a run may never meet.
"""

from symphony_tui.domain.approvals import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    Question,
    QuestionOption,
)
from symphony_tui.domain.commands import (
    Answer,
    Approve,
    Command,
    Deny,
    ExtendBudget,
    Interrupt,
    MoveIssue,
    PauseDispatch,
    Refresh,
    RemoveWorkspace,
    Rerun,
    Steer,
    Stop,
)
from symphony_tui.domain.events import AgentEvent, EventKind
from symphony_tui.domain.issue import BlockerRef, Issue
from symphony_tui.domain.run import (
    ClaimState,
    LiveSession,
    RecoveredWorkspace,
    RetryEntry,
    RunAttempt,
    RunOutcome,
    RunStatus,
)
from symphony_tui.domain.snapshot import IssueRow, RetryRow, RunningRow, Snapshot
from symphony_tui.domain.tokens import RateLimits, RateLimitWindow, TokenUsage

__all__ = [
    "AgentEvent",
    "Answer",
    "ApprovalAnswer",
    "ApprovalDecision",
    "ApprovalKind",
    "ApprovalRequest",
    "Approve",
    "BlockerRef",
    "ClaimState",
    "Command",
    "Deny",
    "EventKind",
    "ExtendBudget",
    "Interrupt",
    "Issue",
    "IssueRow",
    "LiveSession",
    "MoveIssue",
    "PauseDispatch",
    "Question",
    "QuestionOption",
    "RateLimitWindow",
    "RateLimits",
    "RecoveredWorkspace",
    "Refresh",
    "RemoveWorkspace",
    "Rerun",
    "RetryEntry",
    "RetryRow",
    "RunAttempt",
    "RunOutcome",
    "RunStatus",
    "RunningRow",
    "Snapshot",
    "Steer",
    "Stop",
    "TokenUsage",
]
