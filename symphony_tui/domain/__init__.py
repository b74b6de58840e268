"""Plain pydantic models shared by every layer, and the enumerations they use. No I/O, no
Textual, no HTTP clients.

See ``docs/architecture.md`` "Layers" (the domain layer) and the Symphony spec §4 (domain model).

Every model is declared with ``defer_build=True``: pydantic builds a model's validator when it
is first used, not at import, so start-up (launch to the console's first frame)
does not pay for the dozens of payload and approval shapes a run may never meet. The package
itself loads lazily (PEP 562 ``__getattr__``): ``from symphony_tui.domain import EventKind``
imports only :mod:`symphony_tui.domain.kinds` (no pydantic), and a model's module is
imported the first time one of its names is asked for. Raises ``AttributeError`` for a name
the package does not export.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from symphony_tui.domain.approvals import (
        ApprovalAnswer,
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
    from symphony_tui.domain.events import AgentEvent
    from symphony_tui.domain.issue import BlockerRef, Issue, IssueComment
    from symphony_tui.domain.kinds import (
        ApprovalDecision,
        ApprovalKind,
        ClaimState,
        EventKind,
        RunOutcome,
        RunStatus,
    )
    from symphony_tui.domain.run import LiveSession, RecoveredWorkspace, RetryEntry, RunAttempt
    from symphony_tui.domain.snapshot import IssueRow, ProjectRow, RetryRow, RunningRow, Snapshot
    from symphony_tui.domain.tokens import RateLimits, RateLimitWindow, TokenUsage

#: exported name -> the submodule that defines it
_HOME = {
    "AgentEvent": "events",
    "Answer": "commands",
    "ApprovalAnswer": "approvals",
    "ApprovalDecision": "kinds",
    "ApprovalKind": "kinds",
    "ApprovalRequest": "approvals",
    "Approve": "commands",
    "BlockerRef": "issue",
    "ClaimState": "kinds",
    "Command": "commands",
    "Deny": "commands",
    "EventKind": "kinds",
    "ExtendBudget": "commands",
    "Interrupt": "commands",
    "Issue": "issue",
    "IssueComment": "issue",
    "IssueRow": "snapshot",
    "ProjectRow": "snapshot",
    "LiveSession": "run",
    "MoveIssue": "commands",
    "PauseDispatch": "commands",
    "Question": "approvals",
    "QuestionOption": "approvals",
    "RateLimitWindow": "tokens",
    "RateLimits": "tokens",
    "RecoveredWorkspace": "run",
    "Refresh": "commands",
    "RemoveWorkspace": "commands",
    "Rerun": "commands",
    "RetryEntry": "run",
    "RetryRow": "snapshot",
    "RunAttempt": "run",
    "RunOutcome": "kinds",
    "RunStatus": "kinds",
    "RunningRow": "snapshot",
    "Snapshot": "snapshot",
    "Steer": "commands",
    "Stop": "commands",
    "TokenUsage": "tokens",
}

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
    "IssueComment",
    "IssueRow",
    "LiveSession",
    "MoveIssue",
    "PauseDispatch",
    "ProjectRow",
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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
