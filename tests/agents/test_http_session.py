"""The turn-end report the HTTP-server backends (OpenHands, OpenCode) share."""

from __future__ import annotations

import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.agents.http_session import turn_end_event
from symphony_tui.domain import EventKind
from symphony_tui.domain.payloads import TurnEnded


@pytest.mark.parametrize(
    ("result", "rejection", "by_operator", "kind", "message", "outcome"),
    [
        (TurnResult(TurnStatus.COMPLETED, "s1"), None, False, "turn_completed", "finished", "completed"),
        (TurnResult(TurnStatus.INTERRUPTED, "s1", "aborted on the server"), None, False,
         "turn_cancelled", "aborted on the server", "cancelled"),
        (TurnResult(TurnStatus.INTERRUPTED, "s1"), None, False, "turn_cancelled", "cancelled",
         "cancelled"),
        (TurnResult(TurnStatus.FAILED, "s1", "rejected by operator: no"), "no", True,
         "turn_cancelled", "rejected by operator: no", "rejected_by_operator"),
        (TurnResult(TurnStatus.FAILED, "s1", "rejected by timeout: late"), "late", False,
         "turn_failed", "rejected by timeout: late", "declined"),
        (TurnResult(TurnStatus.FAILED, "s1"), None, False, "turn_failed", "failed", "failed"),
    ],
)  # fmt: skip
def test_a_turn_end_is_reported_in_one_shape(
    result, rejection, by_operator, kind, message, outcome
):
    event = turn_end_event(result, rejection, by_operator, "s1")
    assert (event.kind, event.message, event.session_id) == (EventKind(kind), message, "s1")
    assert event.payload == TurnEnded(
        status=result.status.value, outcome=outcome, reason=result.error, rejection=rejection
    )
