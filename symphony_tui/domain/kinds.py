"""The domain's enumerations: event kinds, claim and run states, run outcomes, approval
kinds and decisions (spec §4.1.5-§4.1.8, §7, §10.4; docs/protocols.md "Cross-backend map").

Plain :class:`enum.StrEnum` classes with no pydantic: the console reads them while it
paints its first frame, before any model is needed. The
package exports them with the models (``from symphony_tui.domain import EventKind``).
"""

from __future__ import annotations

from enum import StrEnum

#: How an issue row's ``note`` begins while the issue waits for a machine with memory to
#: spare (``worker.min_free_memory_mb``, ``max_memory_mb``); the reason follows.
WAITING_FOR_MEMORY = "waiting for memory: "


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
    #: A reaction to a pull request's feedback (scheduler/feedback.py).
    FEEDBACK = "feedback"


class ClaimState(StrEnum):
    """Orchestrator claim state of an issue (spec §7.1)."""

    UNCLAIMED = "unclaimed"
    RUNNING = "running"
    RETRY_QUEUED = "retry_queued"
    RELEASED = "released"


class RunStatus(StrEnum):
    """Phase of a live run attempt (spec §7.2)."""

    PREPARING_WORKSPACE = "preparing_workspace"
    BUILDING_PROMPT = "building_prompt"
    LAUNCHING_AGENT = "launching_agent"
    INITIALIZING_SESSION = "initializing_session"
    STREAMING_TURN = "streaming_turn"
    WAITING_FOR_OPERATOR = "waiting_for_operator"
    # the backend is retrying its model connection (codex ``error`` with ``willRetry``);
    # shown as such, and not progress: stall detection still runs (beyond spec §7.2)
    RETRYING_MODEL = "retrying_model"
    FINISHING = "finishing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    STALLED = "stalled"
    CANCELED_BY_RECONCILIATION = "canceled_by_reconciliation"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"


class RunOutcome(StrEnum):
    """How a worker ended. ``normal`` schedules a continuation retry, ``failed`` a backoff
    retry; ``cancelled`` / ``stopped`` / ``reconciled`` schedule nothing."""

    NORMAL = "normal"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    RECONCILED = "reconciled"


class ApprovalKind(StrEnum):
    COMMAND = "command"
    FILE_CHANGE = "file_change"
    PERMISSIONS = "permissions"
    USER_INPUT = "user_input"
    ELICITATION = "elicitation"
    CONFIRMATION = "confirmation"


class ApprovalDecision(StrEnum):
    ACCEPT = "accept"
    ACCEPT_FOR_SESSION = "accept_for_session"
    DECLINE = "decline"
    CANCEL = "cancel"


#: Each decision in the operator's words: ``(asked, given)``, what the operator asks for
#: (an operator event, the audit screen's action) and what was decided (a command's
#: answer, an approval's resolution in the event log). The wire and the payloads keep
#: the enum's values.
DECISION_WORDS: dict[str, tuple[str, str]] = {
    ApprovalDecision.ACCEPT: ("approve", "approved"),
    ApprovalDecision.ACCEPT_FOR_SESSION: (
        "approve for this session",
        "approved for this session",
    ),
    ApprovalDecision.DECLINE: ("deny", "denied"),
    ApprovalDecision.CANCEL: ("deny and cancel the turn", "denied, turn cancelled"),
}


def decision_asked(decision: str) -> str:
    """``decision`` (an :class:`ApprovalDecision` or its value) as the operator asks for
    it: ``approve for this session``; an unknown value as it is."""
    return DECISION_WORDS.get(decision, (decision, decision))[0]


def decision_given(decision: str) -> str:
    """``decision`` as what was decided: ``approved for this session``, ``denied``; an
    unknown value as it is."""
    return DECISION_WORDS.get(decision, (decision, decision))[1]


# Streaming fragments go to transcripts only: the live log shows whole messages, and a flood
# of deltas must not push everything else out of the ring (scheduler/history/eventlog.py).
FRAGMENT_KINDS = frozenset({EventKind.MESSAGE_DELTA, EventKind.COMMAND_OUTPUT})
# Accounting updates: kept in transcripts and the JSONL file, but not in the live ring (the
# token pane shows them) and not as a worker's "last event".
QUIET_KINDS = frozenset({EventKind.TOKEN_USAGE, EventKind.RATE_LIMITS})
