"""Why an OpenHands run failed, as one clean line for the scheduler.

A failed run reports ``execution_status`` ``error`` or ``stuck``; the cause is a separate
event (measured on 1.58.2, ``openhands/sdk/conversation/impl/local_conversation.py``
``run`` and ``_emit_run_limit_error``):

* ``ConversationErrorEvent {code, detail}`` - the run loop died: an LLM error (e.g.
  ``LLMServiceUnavailableError`` for a model HTTP 500, ``LLMAuthenticationError`` for a
  401), ``MaxIterationsReached``, ``MaxBudgetReached``, or any exception. The SDK sets the
  status first and emits this event right after it, so the status alone never names the
  cause; the agent-server's backstop (``agent_server/event_service.py``
  ``_run_and_publish``) emits it before the status instead.
* ``AgentErrorEvent {error}`` - a tool call failed; the run goes on. Kept as a hint for a
  ``stuck`` run, which has no cause event of its own (the stuck detector only sets the
  status).

Each run ends with a ``full_state`` snapshot published after its events, so a snapshot
after the failing status means no cause is still on its way.
"""

from __future__ import annotations

from symphony_tui.agents.openhands.reconcile import WireEvent
from symphony_tui.text import one_line

MAX_REASON = 300  # characters of a failure reason
FAILED_STATUSES = ("error", "stuck")
STUCK_HINT = "the stuck detector stopped the agent repeating itself"


class FailureWatch:
    """What the server said, during one turn, about why its run failed.

    :meth:`observe` every wire event; :meth:`reset` when a turn starts, so a cause from an
    earlier turn is never reported again. ``snapshots`` counts ``full_state`` events.
    """

    def __init__(self) -> None:
        self.cause: str | None = None
        self.agent_error: str | None = None
        self.snapshots = 0

    def reset(self) -> None:
        self.cause = self.agent_error = None

    def observe(self, event: WireEvent) -> None:
        kind = event.get("kind")
        if kind == "ConversationErrorEvent":
            code = one_line(event.get("code") or "error", MAX_REASON)
            detail = one_line(event.get("detail") or "", MAX_REASON)
            self.cause = one_line(f"{code}: {detail}" if detail else code, MAX_REASON)
        elif kind == "AgentErrorEvent":
            self.agent_error = one_line(event.get("error") or "agent error", MAX_REASON)
        elif kind == "ConversationStateUpdateEvent" and event.get("key") == "full_state":
            self.snapshots += 1

    def settled(self, mark: int) -> bool:
        """True once the cause is known, or a snapshot arrived after the failing status
        (``mark`` is :attr:`snapshots` as it was when that status arrived)."""
        return self.cause is not None or self.snapshots > mark

    def reason(self, status: str) -> str:
        """The one-line reason for a run that ended in ``status`` (``error`` | ``stuck``):
        the cause event's ``code: detail``, else the status with what is known."""
        if self.cause is not None:
            return self.cause
        text = f"execution_status {status}"
        if status == "stuck":
            text += f" ({STUCK_HINT})"
        if self.agent_error:
            text += f"; last agent error: {self.agent_error}"
        return one_line(text, MAX_REASON)
