"""Eligibility and dispatch (spec §8.2, §8.3, §16.4): which issues may start, whether a
slot is free, and claiming an issue for a new worker. Also what a poll's candidates and a
due retry's candidates lead to.
"""

from __future__ import annotations

from collections.abc import Callable

from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind, Issue
from symphony_tui.domain.payloads import Dispatched
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.adoption import Leftover
from symphony_tui.scheduler.retries import Retries
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.state import RetryState, SchedulerState
from symphony_tui.scheduler.worker_hosts import HostProbes
from symphony_tui.trackers.base import TrackerError


class Dispatcher:
    """Decides and performs dispatch on ``state``. ``start_worker`` starts the worker task
    of a claimed run (and sets ``run.task`` and ``run.worker``)."""

    def __init__(
        self,
        state: SchedulerState,
        retries: Retries,
        start_worker: Callable[[Run], None],
    ) -> None:
        self._state = state
        self._retries = retries
        self._start_worker = start_worker
        self.probes = HostProbes(state, HostTargets(lambda: state.settings))

    # ------------------------------------------------------------------ eligibility

    def is_eligible(self, issue: Issue, settings: Settings, *, for_retry: bool = False) -> bool:
        """Spec §8.2 candidate selection, plus operator holds."""
        state = self._state
        if not policy.has_required_fields(issue):
            return False
        tracker = settings.tracker
        if not tracker.is_active(issue.state) or tracker.is_terminal(issue.state):
            return False
        if not tracker.has_required_labels(issue.labels):  # the reference's required_labels
            return False
        if issue.id in state.running:
            return False
        if not for_retry and issue.id in state.retrying:
            return False
        if issue.id in state.held:
            return False
        return not policy.blocked_by_open_issue(issue, settings)

    def slots_free(self, issue: Issue, settings: Settings) -> bool:
        """A global slot (``agent.max_concurrent_agents``) and a slot of the issue's state
        (``agent.max_concurrent_agents_by_state``) are free (§8.3)."""
        running = self._state.running
        if len(running) >= settings.agent.max_concurrent_agents:
            return False
        by_state: dict[str, int] = {}
        for run in running.values():
            key = run.issue.state.strip().lower()
            by_state[key] = by_state.get(key, 0) + 1
        if not policy.state_slots_free(issue, settings, by_state):
            return False
        # Worker hosts (issue 14): an up host with room, the workspace's own one first.
        hosts = self._state.hosts
        return not hosts.enabled or hosts.place(issue.id, running) is not None

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, issue: Issue, attempt: int | None) -> Run:
        """Claim ``issue`` and start its worker (§16.4)."""
        state = self._state
        self._retries.cancel(issue.id)
        now_mono = state.clock.monotonic()
        run = Run(
            issue=issue,
            attempt=attempt,
            backend=state.settings.agent.backend,
            started_at=state.clock.now(),
            started_mono=now_mono,
            last_event_mono=now_mono,
        )
        if state.hosts.enabled:
            run.worker_host = state.hosts.place(issue.id, state.running, force=True)
            if run.worker_host is not None:
                state.hosts.placed(issue.id, run.worker_host)
        state.claim(run)
        self._start_worker(run)
        state.emit_system(
            EventKind.DISPATCH,
            f"dispatched {issue.identifier}"
            + (f" (attempt {attempt})" if attempt else "")
            + (f" on {run.worker_host}" if run.worker_host else ""),
            issue=issue,
            payload=Dispatched(attempt=attempt),
        )
        state.log(
            "info", "dispatch", issue_id=issue.id, issue_identifier=issue.identifier,
            attempt=attempt, **({"host": run.worker_host} if run.worker_host else {}),
        )  # fmt: skip
        return run

    def adopt(self, issue: Issue, left: Leftover) -> Run:
        """Claim ``issue`` again for the agent an earlier scheduler left running in
        ``left.path`` (scheduler/adoption.py): the same run attempt, its turn count, its
        workspace; the worker re-attaches instead of starting a session."""
        state = self._state
        self._retries.cancel(issue.id)
        now_mono = state.clock.monotonic()
        run = Run(
            issue=issue,
            attempt=left.attempt,
            backend=str(left.session.get("backend") or "codex"),
            started_at=state.clock.now(),
            started_mono=now_mono,
            last_event_mono=now_mono,
            workspace=left.path,
            turn_count=left.turn_count,
            adopting=dict(left.session),
        )
        state.claim(run)
        self._start_worker(run)
        state.emit_system(
            EventKind.DISPATCH,
            f"re-adopted {issue.identifier}"
            + (f" (attempt {left.attempt})" if left.attempt else "")
            + f": its agent (pid {left.agent.pid}) kept running through the restart",
            issue=issue,
            payload=Dispatched(attempt=left.attempt),
        )
        state.log(
            "info", "re-adopt", issue_id=issue.id, issue_identifier=issue.identifier,
            attempt=left.attempt, pid=left.agent.pid,
        )  # fmt: skip
        return run

    def candidates_fetched(self, candidates: list[Issue], tick_started_mono: float) -> None:
        """A poll's candidates (§8.1): release retries of issues that left them, remember
        them, and dispatch in order while slots are free."""
        state = self._state
        settings = state.settings
        state.tracker_ok()
        self.probes.tick()  # down worker hosts whose backoff ran out (issue 14)
        present = {issue.id for issue in candidates}
        for issue_id in [i for i in state.retrying if i not in present]:
            # Left the active states while waiting: its timer would find the same (§8.4);
            # releasing now keeps the console from showing a stale state and a retry.
            self._retries.release(issue_id, "no longer in an active state")
        state.remember_candidates(candidates)
        eligible_left = 0
        for issue in policy.sort_for_dispatch(candidates):
            if not self.is_eligible(issue, settings):
                continue
            if state.dispatch_paused or not self.slots_free(issue, settings):
                eligible_left += 1
                continue
            self.dispatch(issue, attempt=None)
        if state.last_change_mono > tick_started_mono:
            # Something ended during this tick: its outcome was not seen by this tick.
            eligible_left = max(eligible_left, 1)
        state.tick_found(eligible_left)

    def retry_fetched(
        self, retry: RetryState, candidates: list[Issue] | None, error: TrackerError | None
    ) -> None:
        """A due retry's candidate fetch came back (§8.4, §16.6): dispatch its issue, queue
        it again (tracker down, dispatch paused, no slot) or release it."""
        state = self._state
        settings = state.settings
        entry = retry.entry
        if error is not None:
            state.tracker_failed(error, "retry poll failed")
            if error.retry_at is not None:
                # Rate limited: wait for the stated reset without using up an attempt.
                wait = (error.retry_at - state.clock.now()).total_seconds()
                self._retries.schedule(
                    retry.issue,
                    entry.attempt,
                    max(1000, int(wait * 1000)),
                    error=f"tracker rate limited until {error.retry_at:%H:%M:%S}",
                    continuation=entry.continuation,
                )
                return
            delay = policy.failure_backoff_ms(
                entry.attempt + 1, settings.agent.max_retry_backoff_ms
            )
            self._retries.schedule(retry.issue, entry.attempt + 1, delay, error="retry poll failed")
            return
        issue_id = entry.issue_id
        if state.retrying.get(issue_id) is not None or issue_id in state.running:
            return  # something else claimed it while we were fetching
        issue = next((i for i in candidates or () if i.id == issue_id), None)
        if issue is None or not self.is_eligible(issue, settings, for_retry=True):
            self._retries.release(issue_id, "no longer eligible")
            return
        if state.dispatch_paused:
            # The operator paused dispatch: wait without using up a retry attempt.
            self._retries.schedule(
                issue,
                entry.attempt,
                settings.polling.interval_ms,
                error="dispatch paused by operator",
                continuation=entry.continuation,
            )
            return
        if not self.slots_free(issue, settings):
            delay = policy.failure_backoff_ms(
                entry.attempt + 1, settings.agent.max_retry_backoff_ms
            )
            self._retries.schedule(issue, entry.attempt + 1, delay, error=policy.NO_SLOTS_ERROR)
            return
        self.dispatch(issue, attempt=entry.attempt)
