"""Approval requests from agent sessions and their answers (docs/protocols.md "Approvals";
docs/architecture.md "Who owns which state"; ``agent.approvals`` /
``agent.approval_timeout_ms`` settings).

A session asks through ``SessionHost.request_approval`` and waits; the desk files and
settles requests on the scheduling loop. Under ``agent.approvals:
operator`` the request waits for the operator (``Approve`` / ``Deny`` / ``Answer`` commands)
until its deadline, then is declined; under ``auto`` or ``deny`` the policy answers at once.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from symphony_tui.domain import (
    AgentEvent,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    EventKind,
    RunStatus,
)
from symphony_tui.domain.kinds import decision_given
from symphony_tui.domain.payloads import ApprovalAnswered, ApprovalAsked
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler.inbox import AgentTraffic, ApprovalExpired, ApprovalWithdrawn
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.scheduler.run import PendingApproval, Run
from symphony_tui.scheduler.state import SchedulerState


class ApprovalDesk:
    """Files approval requests on their run and settles them: by policy, by the operator, by
    the deadline, or by the run ending.

    Pending approvals live on their :class:`Run` (``run.pending``: approval id ->
    :class:`PendingApproval`), so they end with it; this desk is the only code that adds,
    answers or removes them, and it runs on the scheduling loop only: a session asks with an
    ``ApprovalAsked`` input (``SessionHost.request_approval``), and the deadline, the
    session giving up and the run's end come back as inputs too (``inbox.py``
    "approvals"). Events go to the control lane of ``mailbox``, ahead of queued agent
    traffic (``APPROVAL_REQUESTED`` / ``APPROVAL_RESOLVED``).
    """

    def __init__(self, state: SchedulerState, mailbox: Mailbox) -> None:
        self._state = state
        self._mailbox = mailbox

    def file(self, run: Run, request: ApprovalRequest, answer: asyncio.Future | None) -> None:
        """File ``request`` from ``run``'s session; ``answer`` gets the decision.

        The request is stamped with its issue, backend and creation time, and what the
        operator reads (summary, command, reason) is redacted. Under ``operator`` it gets a
        ``deadline_at`` of ``agent.approval_timeout_ms`` from now; unanswered by then it is
        declined (``timed_out=True``) and ``run.approval_timed_out`` says why. While it
        waits the run's status is ``WAITING_FOR_OPERATOR``. Never raises for a decision.
        """
        if answer is None or answer.done():
            return  # the session gave up before the loop took its request
        state = self._state
        settings = state.settings
        clock = state.clock
        mode = settings.agent.approvals
        now = clock.now()
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
        run.last_event_mono = clock.monotonic()
        if mode != "operator":
            decided = policy_answer(request, mode)
            self._emit_resolved(run, request, decided)
            answer.set_result(decided)
            return
        timeout_s = settings.agent.approval_timeout_ms / 1000
        request = request.model_copy(update={"deadline_at": now + timedelta(seconds=timeout_s)})
        pending = PendingApproval(request=request, future=answer)
        mailbox, approval_id = self._mailbox, request.id
        pending.timer = clock.call_later(
            timeout_s,
            lambda: mailbox.post(ApprovalExpired(run, approval_id, timeout_s), control=True),
        )
        answer.add_done_callback(
            lambda future: (
                mailbox.post(ApprovalWithdrawn(run, approval_id), control=True)
                if future.cancelled()
                else None
            )
        )
        run.pending[request.id] = pending
        run.answered.discard(request.id)
        run.status = RunStatus.WAITING_FOR_OPERATOR
        state.changed()
        self._emit(
            run,
            AgentEvent(
                kind=EventKind.APPROVAL_REQUESTED,
                message=f"{request.kind.value}: {request.summary or request.command or ''}".strip(),
                payload=ApprovalAsked(approval_id=request.id, approval_kind=request.kind.value),
            ),
        )

    def answer(
        self, approval_id: str, answer: ApprovalAnswer, *, chooses: bool = False
    ) -> CommandResult:
        """The operator's ``answer`` to a pending approval of any live run. Refused (``ok``
        False, with the reason) when the id is unknown, the approval was already settled, a
        question (``USER_INPUT``) is accepted without answers, an ``Answer`` command
        (``chooses``) names nothing (it is never taken for a plain accept, which would
        allow an ACP permission), or an answer to a question without free text names none
        of its options (see :func:`_chosen`)."""
        for run in self._state.running.values():
            if approval_id in run.answered:
                return CommandResult(False, "that approval was already answered")
            pending = run.pending.get(approval_id)
            if pending is None:
                continue
            if chooses and not answer.answers:
                return CommandResult(
                    False, "an answer names nothing: choose an option or approve or deny instead"
                )
            if pending.request.kind is ApprovalKind.USER_INPUT and (
                answer.decision is ApprovalDecision.ACCEPT and not answer.answers
            ):
                return CommandResult(False, "this is a question: answer it with text or a choice")
            settled = _chosen(pending.request, answer)
            if isinstance(settled, str):
                return CommandResult(False, settled)
            answer = settled
            self._settle(run, pending, answer)
            answered = pending.request.questions and answer.decision is ApprovalDecision.ACCEPT
            given = "answered" if answered else decision_given(answer.decision)
            return CommandResult(True, f"{run.identifier}: {given}")
        return CommandResult(False, "no pending approval with that id")

    def owner(self, approval_id: str) -> Run | None:
        """The live run an approval is pending on, if any."""
        return next((r for r in self._state.running.values() if approval_id in r.pending), None)

    def cancel(self, run: Run) -> None:
        """Settle every approval still open on ``run`` with ``CANCEL`` (its worker is ending),
        so no session stays blocked on an answer that will never come."""
        for pending in list(run.pending.values()):
            self._settle(
                run, pending, ApprovalAnswer(decision=ApprovalDecision.CANCEL, by="shutdown")
            )

    def expired(self, run: Run, approval_id: str, timeout_s: float) -> None:
        """The deadline of ``run``'s approval ``approval_id`` passed: declined."""
        pending = run.pending.get(approval_id)
        if pending is None:
            return
        reason = f"{pending.request.kind.value} approval unanswered for {timeout_s:g}s: declined"
        run.approval_timed_out = reason
        self._settle(
            run,
            pending,
            ApprovalAnswer(
                decision=ApprovalDecision.DECLINE, message=reason, timed_out=True, by="timeout"
            ),
        )

    def withdrawn(self, run: Run, approval_id: str) -> None:
        """``run``'s session stopped waiting for ``approval_id``: it is pending no more."""
        pending = run.pending.get(approval_id)
        if pending is not None:
            self._close(run, pending)

    def _settle(self, run: Run, pending: PendingApproval, answer: ApprovalAnswer) -> None:
        """Answer ``pending``: it leaves the run (the id is remembered as answered), the
        resolution is said, and the waiting session gets ``answer``."""
        self._close(run, pending)
        run.answered.add(pending.request.id)
        self._emit_resolved(run, pending.request, answer)
        if not pending.future.done():
            pending.future.set_result(answer)

    def _close(self, run: Run, pending: PendingApproval) -> None:
        if pending.timer is not None:
            pending.timer.cancel()
        run.pending.pop(pending.request.id, None)
        if not run.pending and run.status is RunStatus.WAITING_FOR_OPERATOR:
            run.status = RunStatus.STREAMING_TURN
        run.last_event_mono = self._state.clock.monotonic()
        self._state.changed()

    def _emit(self, run: Run, event: AgentEvent) -> None:
        # Approval traffic is control: it is applied before queued agent events.
        self._mailbox.post(AgentTraffic(run, event), control=True)

    def _emit_resolved(self, run: Run, request: ApprovalRequest, answer: ApprovalAnswer) -> None:
        self._emit(
            run,
            AgentEvent(
                kind=EventKind.APPROVAL_RESOLVED,
                message=f"{request.kind.value} {decision_given(answer.decision)} by {answer.by}"
                + (f": {answer.message}" if answer.message else ""),
                payload=ApprovalAnswered(
                    approval_id=request.id,
                    decision=answer.decision.value,
                    by=answer.by,
                    timed_out=answer.timed_out,
                ),
            ),
        )


def _chosen(request: ApprovalRequest, answer: ApprovalAnswer) -> ApprovalAnswer | str:
    """``answer`` with every choice-only question (``free_text`` False) answered by the
    option it names, and the decision the option stands for (its ``decision``) as the
    answer's; or one line saying why it names none. An answer without answers (a
    plain approve or deny) is left to the backend's mapping of decisions."""
    if not answer.answers:
        return answer
    answers = dict(answer.answers)
    decision = answer.decision
    for question in request.questions:
        if question.free_text or not question.options:
            continue
        picked = answers.get(question.id) or ()
        if len(picked) != 1:
            return f"choose exactly one option for {question.id!r}"
        option = question.choice(picked[0])
        if isinstance(option, str):
            return option
        answers[question.id] = (option.id if option.id is not None else option.label,)
        if option.decision is not None:
            decision = option.decision
    return answer.model_copy(update={"answers": answers, "decision": decision})


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
