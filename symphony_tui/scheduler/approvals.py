"""Approval requests from agent sessions and their answers (docs/protocols.md "Approvals";
docs/architecture.md "Who owns which state"; ``agent.approvals`` /
``agent.approval_timeout_ms`` settings).

A session asks through ``SessionHost.request_approval`` and waits. Under ``agent.approvals:
operator`` the request waits for the operator (``Approve`` / ``Deny`` / ``Answer`` commands)
until its deadline, then is declined; under ``auto`` or ``deny`` the policy answers at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import timedelta

from symphony_tui.config.settings import Settings
from symphony_tui.domain import (
    AgentEvent,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    EventKind,
    RunStatus,
)
from symphony_tui.domain.payloads import ApprovalAnswered, ApprovalAsked
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler.clock import Clock
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.scheduler.run import PendingApproval, Run


class ApprovalDesk:
    """Files approval requests on their run and settles them: by policy, by the operator, by
    the deadline, or by the run ending.

    Pending approvals live on their :class:`Run` (``run.pending``: approval id ->
    :class:`PendingApproval`), so they end with it; this desk is the only code that adds,
    answers or removes them. Everything runs on the event loop.

    ``settings`` returns the current settings (they change on reload); ``runs`` returns the
    live runs (where an operator's answer is looked up by approval id); ``emit`` records an
    event against a run (``APPROVAL_REQUESTED`` / ``APPROVAL_RESOLVED``); ``changed`` tells
    the owner a snapshot is due.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        settings: Callable[[], Settings],
        runs: Callable[[], Iterable[Run]],
        emit: Callable[[Run, AgentEvent], None],
        changed: Callable[[], None],
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._runs = runs
        self._emit = emit
        self._changed = changed

    async def request(self, run: Run, request: ApprovalRequest) -> ApprovalAnswer:
        """Answer ``request`` from ``run``'s session; waits while the operator decides.

        The request is stamped with its issue, backend and creation time, and what the
        operator reads (summary, command, reason) is redacted. Under ``operator`` it gets a
        ``deadline_at`` of ``agent.approval_timeout_ms`` from now; unanswered by then it is
        declined (``timed_out=True``) and ``run.approval_timed_out`` says why. While it
        waits the run's status is ``WAITING_FOR_OPERATOR``. Never raises for a decision.
        """
        settings = self._settings()
        mode = settings.agent.approvals
        now = self._clock.now()
        request = request.model_copy(
            update={
                "issue_id": run.issue.id,
                "issue_identifier": run.issue.identifier,
                "backend": request.backend or run.backend,
                "created_at": request.created_at or now,
                # What the operator reads: secrets masked (the backend keeps the original).
                "summary": redact(request.summary),
                "command": redact(request.command) if request.command else request.command,
                "reason": redact(request.reason) if request.reason else request.reason,
            }
        )
        run.last_event_mono = self._clock.monotonic()
        if mode != "operator":
            answer = policy_answer(request, mode)
            self._emit_resolved(run, request, answer)
            return answer
        timeout_s = settings.agent.approval_timeout_ms / 1000
        request = request.model_copy(update={"deadline_at": now + timedelta(seconds=timeout_s)})
        future: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
        pending = PendingApproval(request=request, future=future)
        pending.timer = self._clock.call_later(
            timeout_s, lambda: self._timed_out(run, request.id, timeout_s)
        )
        run.pending[request.id] = pending
        run.status = RunStatus.WAITING_FOR_OPERATOR
        self._changed()
        self._emit(
            run,
            AgentEvent(
                kind=EventKind.APPROVAL_REQUESTED,
                message=f"{request.kind.value}: {request.summary or request.command or ''}".strip(),
                payload=ApprovalAsked(approval_id=request.id, approval_kind=request.kind.value),
            ),
        )
        try:
            answer = await future
        finally:
            if pending.timer is not None:
                pending.timer.cancel()
            run.pending.pop(request.id, None)
            if not run.pending and run.status is RunStatus.WAITING_FOR_OPERATOR:
                run.status = RunStatus.STREAMING_TURN
            run.last_event_mono = self._clock.monotonic()
            self._changed()
        self._emit_resolved(run, request, answer)
        return answer

    def answer(self, approval_id: str, answer: ApprovalAnswer) -> CommandResult:
        """The operator's ``answer`` to a pending approval of any live run. Refused (``ok``
        False, with the reason) when the id is unknown, the approval was already settled, or
        a question (``USER_INPUT``) is accepted without answers."""
        for run in self._runs():
            pending = run.pending.get(approval_id)
            if pending is None:
                continue
            if pending.future.done():
                return CommandResult(False, "that approval was already answered")
            if pending.request.kind is ApprovalKind.USER_INPUT and (
                answer.decision is ApprovalDecision.ACCEPT and not answer.answers
            ):
                return CommandResult(False, "this is a question: answer it with text or a choice")
            pending.future.set_result(answer)
            return CommandResult(True, f"{answer.decision.value} sent for {run.identifier}")
        return CommandResult(False, "no pending approval with that id")

    def owner(self, approval_id: str) -> Run | None:
        """The live run an approval is pending on, if any."""
        return next((r for r in self._runs() if approval_id in r.pending), None)

    def cancel(self, run: Run) -> None:
        """Settle every approval still open on ``run`` with ``CANCEL`` (its worker is ending),
        so no session stays blocked on an answer that will never come."""
        for pending in list(run.pending.values()):
            if not pending.future.done():
                pending.future.set_result(
                    ApprovalAnswer(decision=ApprovalDecision.CANCEL, by="shutdown")
                )

    def _timed_out(self, run: Run, approval_id: str, timeout_s: float) -> None:
        pending = run.pending.get(approval_id)
        if pending is None or pending.future.done():
            return
        reason = f"{pending.request.kind.value} approval unanswered for {timeout_s:g}s: declined"
        run.approval_timed_out = reason
        pending.future.set_result(
            ApprovalAnswer(
                decision=ApprovalDecision.DECLINE, message=reason, timed_out=True, by="timeout"
            )
        )

    def _emit_resolved(self, run: Run, request: ApprovalRequest, answer: ApprovalAnswer) -> None:
        self._emit(
            run,
            AgentEvent(
                kind=EventKind.APPROVAL_RESOLVED,
                message=f"{request.kind.value} {answer.decision.value} by {answer.by}"
                + (f": {answer.message}" if answer.message else ""),
                payload=ApprovalAnswered(
                    approval_id=request.id,
                    decision=answer.decision.value,
                    by=answer.by,
                    timed_out=answer.timed_out,
                ),
            ),
        )


def policy_answer(request: ApprovalRequest, mode: str) -> ApprovalAnswer:
    """Answer without an operator (``agent.approvals: auto | deny``).

    ``auto`` accepts; a question is answered with each one's first option, or declined
    when some question has no options. Any other mode declines (``by="policy"``).
    """
    if mode == "auto":
        if request.kind is ApprovalKind.USER_INPUT:
            answers = {q.id: (q.options[0].label,) for q in request.questions if q.options}
            if len(answers) == len(request.questions) and answers:
                return ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers=answers, by="auto")
            return ApprovalAnswer(
                decision=ApprovalDecision.DECLINE,
                message="no operator available to answer",
                by="auto",
            )
        return ApprovalAnswer(decision=ApprovalDecision.ACCEPT, by="auto")
    return ApprovalAnswer(
        decision=ApprovalDecision.DECLINE, message="approvals are denied by policy", by="policy"
    )
