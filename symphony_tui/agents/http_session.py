"""What the HTTP-server backends (OpenHands, OpenCode) report the same way.

Both drive a server-side session turn by turn (PROTOCOLS.md "OpenHands agent-server",
"OpenCode server") and end a turn on the server's status; a turn's end is reported by
:func:`turn_end_event` in the same shape for every backend (``TurnEnded``): an operator's
rejection that stopped the turn is ``TURN_CANCELLED`` with outcome
``rejected_by_operator`` (the operator's decision, not a crash), a rejection by a policy
or a timeout ``TURN_FAILED`` with outcome ``declined``.
"""

from __future__ import annotations

from symphony_tui.agents.base import TurnResult
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import TurnEnded

_DEFAULT_MESSAGE = {
    "completed": "finished",
    "cancelled": "cancelled",
    "rejected_by_operator": "rejected by operator",
}


def turn_end_event(
    result: TurnResult, rejection: str | None, by_operator: bool, session_id: str | None
) -> AgentEvent:
    """The end event of a turn that returned ``result``: ``TURN_COMPLETED``,
    ``TURN_CANCELLED`` (interrupted, or stopped by the operator's rejection
    ``rejection`` when ``by_operator``) or ``TURN_FAILED``, message ``result.error`` (or
    a word for the outcome)."""
    end = TurnEnded.of(
        result.status.value,
        result.error,
        rejection=rejection,
        rejected_by_operator=by_operator,
    )
    message = _DEFAULT_MESSAGE.get(end.outcome, "failed")
    if end.outcome != "completed" and result.error:
        message = result.error
    return AgentEvent(
        kind=EventKind(end.kind_name), message=message, session_id=session_id, payload=end
    )
