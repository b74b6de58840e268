"""Retry entries and what follows a run's end (spec §8.4, §16.6).

A run that ended normally while its issue is still active gets a short continuation retry;
a failed one gets an exponential backoff; one the operator ended holds its issue. A retry
entry's timer posts :class:`~symphony_tui.scheduler.inbox.RetryDue` to the inbox; the
dispatcher (``dispatch.py``) decides what a due retry does.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

from symphony_tui.domain import EventKind, Issue, RetryEntry, RunOutcome
from symphony_tui.domain.payloads import RetryScheduled, RunEnded
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.inbox import RetryDue
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.state import RetryState, SchedulerState


class Retries:
    """Schedules, cancels and releases retry entries of ``state``; a retry timer posts
    ``RetryDue`` to ``mailbox``."""

    def __init__(self, state: SchedulerState, mailbox: Mailbox) -> None:
        self._state = state
        self._mailbox = mailbox
        self._tokens = itertools.count(1)

    def schedule(
        self,
        issue: Issue,
        attempt: int,
        delay_ms: int,
        *,
        error: str | None,
        continuation: bool = False,
    ) -> RetryState:
        """Queue ``attempt`` of ``issue`` in ``delay_ms`` (replacing any entry it had); a
        failure retry is announced as ``RETRY_SCHEDULED``."""
        state = self._state
        state.pop_retry(issue.id)
        token = next(self._tokens)
        entry = RetryEntry(
            issue_id=issue.id,
            identifier=issue.identifier,
            attempt=attempt,
            due_at=state.clock.now() + timedelta(milliseconds=delay_ms),
            error=error,
            continuation=continuation,
        )
        issue_id, mailbox = issue.id, self._mailbox
        timer = state.clock.call_later(
            delay_ms / 1000, lambda: mailbox.post(RetryDue(issue_id, token))
        )
        retry = RetryState(entry=entry, issue=issue, token=token, timer=timer)
        state.add_retry(retry)
        if not continuation:
            state.emit_system(
                EventKind.RETRY_SCHEDULED,
                f"retry {attempt} of {issue.identifier} in {delay_ms / 1000:g}s"
                + (f": {error}" if error else ""),
                issue=issue,
                payload=RetryScheduled(attempt=attempt, delay_ms=delay_ms),
            )
        return retry

    def due_for_slot(self, issue_id: str) -> RetryState | None:
        """The issue's retry entry when it waits only for a slot: it is due (its time has
        come, its timer not yet handled) or it was queued again for want of a slot
        (``NO_SLOTS_ERROR``). A dispatch pass gives it the next free slot in the issue's
        place of the dispatch order, ahead of new issues after it; None otherwise."""
        retry = self._state.retrying.get(issue_id)
        if retry is None:
            return None
        entry = retry.entry
        if entry.error == policy.NO_SLOTS_ERROR or entry.due_at <= self._state.clock.now():
            return retry
        return None

    def cancel(self, issue_id: str) -> RetryState | None:
        """Drop the issue's retry entry (its timer cancelled); returns it, if there was one."""
        return self._state.pop_retry(issue_id)

    def release(self, issue_id: str, why: str) -> None:
        """Release the issue's claim: no retry, and idleness needs another tick."""
        state = self._state
        state.pop_retry(issue_id)
        state.claim_released()
        issue = state.known.get(issue_id)
        state.log("info", "claim released", issue_id=issue_id, reason=why)
        if issue is not None and issue.identifier not in state.completed:
            state.emit_system(
                EventKind.RECONCILE, f"released {issue.identifier}: {why}", issue=issue
            )

    def after_run(self, run: Run, ending: Ending) -> None:
        """Bookkeeping when ``run``'s worker ended (§16.6): retry, release or hold."""
        state = self._state
        issue = run.issue
        state.unclaim(run)
        status, error, outcome = ending.status, ending.error, ending.outcome
        state.emit_system(
            EventKind.RUN_ENDED,
            f"{issue.identifier} ended: {status.value}" + (f" ({error})" if error else ""),
            issue=issue,
            payload=RunEnded(
                outcome=outcome.value,
                status=status.value,
                error=error,
                seconds=round(max(0.0, state.clock.monotonic() - run.started_mono), 3),
                model=run.model,
                tokens=None if run.usage_unreported else run.tokens,
                spend=run.spend,
                spend_usd=run.spend_usd,
            ),
        )
        state.log(
            "info" if outcome is RunOutcome.NORMAL else "warning",
            "run ended",
            issue_id=issue.id,
            issue_identifier=issue.identifier,
            session_id=run.session_id,
            outcome=outcome.value,
            status=status.value,
            error=error,
        )
        if state.stopping:
            return
        settings = state.settings
        if outcome is RunOutcome.NORMAL:
            state.mark_completed(issue.identifier)
            if settings.tracker.is_active(issue.state):
                self.schedule(issue, 1, policy.CONTINUATION_RETRY_MS, error=None, continuation=True)
            # else: the worker saw the issue leave its active states after the last turn; a
            # continuation retry would only re-fetch candidates to release the claim.
        elif outcome is RunOutcome.FAILED:
            attempt = (run.attempt or 0) + 1
            delay = policy.failure_backoff_ms(attempt, settings.agent.max_retry_backoff_ms)
            self.schedule(issue, attempt, delay, error=error)
        elif outcome in (RunOutcome.CANCELLED, RunOutcome.STOPPED):
            # The operator ended it: hold the issue until they rerun it or the tracker shows
            # a change, so it is not re-dispatched on the next tick.
            state.hold(issue, run.workspace)
