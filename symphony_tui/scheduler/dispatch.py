"""Eligibility and dispatch (spec §8.2, §8.3, §16.4): which issues may start, whether a
slot is free, and claiming an issue for a new worker. Also what a poll's candidates and a
due retry's candidates lead to.
"""

from __future__ import annotations

from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind, Issue
from symphony_tui.domain.payloads import Dispatched
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.adoption import Leftover, carry_over
from symphony_tui.scheduler.resources import dispatch_hold
from symphony_tui.scheduler.retries import Retries
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.state import RetryState, SchedulerState
from symphony_tui.scheduler.worker import WorkerContext, start_worker
from symphony_tui.scheduler.worker_hosts.book import HostProbes
from symphony_tui.trackers.base import TrackerError


class Dispatcher:
    """Decides and performs dispatch on ``state``. A claimed run's worker starts with
    ``workers`` (``worker.start_worker``: it sets ``run.task`` and ``run.worker``); the
    worker-host probes post their outcomes to the same mailbox."""

    def __init__(self, state: SchedulerState, retries: Retries, workers: WorkerContext) -> None:
        self._state = state
        self._retries = retries
        self._workers = workers
        self.probes = HostProbes(state, HostTargets(lambda: state.settings), workers.mailbox)
        self._unsafe_told: set[str] = set()

    # ------------------------------------------------------------------ eligibility

    def is_eligible(self, issue: Issue, settings: Settings, *, for_retry: bool = False) -> bool:
        """Spec §8.2 candidate selection (required fields, active and not terminal state,
        routable: ``dispatchable`` and ``required_labels``), not running or claimed, plus
        operator holds and a pull request reaction preparing its run. Provider rules (blockers, assignment) reach it only through
        ``dispatchable``."""
        state = self._state
        if not policy.has_required_fields(issue):
            return False
        unsafe = policy.unsafe_identifier(issue)
        if unsafe is not None:
            if issue.id not in self._unsafe_told:  # one line per issue, never a retry
                self._unsafe_told.add(issue.id)
                state.log(
                    "warning", f"not dispatched: {unsafe}", issue_id=issue.id,
                    issue_identifier=issue.identifier,
                )  # fmt: skip
            return False
        tracker = settings.tracker
        if not tracker.is_active(issue.state) or tracker.is_terminal(issue.state):
            return False
        if not policy.issue_routable(issue, settings):
            return False
        if issue.id in state.running or issue.id in state.reacting:
            return False
        if not for_retry and issue.id in state.retrying:
            return False
        return issue.id not in state.held

    def slots_free(self, issue: Issue, settings: Settings) -> bool:
        """A global slot (``agent.max_concurrent_agents``) and a slot of the issue's state
        (``agent.max_concurrent_agents_by_state``) are free (§8.3), and a machine with
        memory to spare takes it (scheduler/resources.py; the issue's row says why not)."""
        running = self._state.running
        self._state.resources.waiting.pop(issue.id, None)
        if len(running) >= settings.agent.max_concurrent_agents:
            return False
        by_state: dict[str, int] = {}
        for run in running.values():
            key = run.issue.state.strip().lower()
            by_state[key] = by_state.get(key, 0) + 1
        if not policy.state_slots_free(issue, settings, by_state):
            return False
        # Worker hosts: an up host with room, the workspace's own one first.
        hosts = self._state.hosts
        if hosts.enabled and hosts.place(issue.id, running) is not None:
            return True
        if dispatch_hold(self._state, issue.id) is not None:
            return False  # short of memory: the issue's note says where
        if hosts.enabled:
            self._state.resources.waiting[issue.id] = hosts.why_waiting(issue.id, running)
            return False
        return True

    # ------------------------------------------------------------------ dispatch

    def dispatch(
        self,
        issue: Issue,
        attempt: int | None,
        *,
        retry_kind: str | None = None,
        feedback: str | None = None,
    ) -> Run:
        """Claim ``issue`` and start its worker (§16.4). ``attempt`` is None on a first run;
        ``retry_kind`` (``continuation`` / ``failure``) goes with a retry's attempt (§12.3);
        ``feedback``: a reaction's text the first prompt starts with (feedback.py)."""
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
            retry_kind=retry_kind if attempt is not None else None,
            feedback=feedback,
        )
        if state.hosts.enabled:
            run.worker_host = state.hosts.place(issue.id, state.running, force=True)
            if run.worker_host is not None:
                state.hosts.placed(issue.id, run.worker_host)
        state.claim(run)
        start_worker(run, self._workers)
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

    def adopt(self, issue: Issue, left: Leftover, host: str | None = None) -> Run:
        """Claim ``issue`` again for the agent an earlier scheduler left running in
        ``left.path`` (scheduler/adoption.py), on worker host ``host`` when given: the same
        run attempt, its turn count, its workspace; the worker re-attaches instead of
        starting a session."""
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
            worker_host=host,
        )
        carry_over(state, run, left.session.get("thread_id"))
        if host is not None:
            state.hosts.placed(issue.id, host)
        state.claim(run)
        start_worker(run, self._workers)
        state.emit_system(
            EventKind.DISPATCH,
            f"re-adopted {issue.identifier}"
            + (f" (attempt {left.attempt})" if left.attempt else "")
            + f": its agent (pid {left.agent.pid}"
            + (f" on {host}" if host else "")
            + ") kept running through the restart",
            issue=issue,
            payload=Dispatched(attempt=left.attempt),
        )
        state.log(
            "info", "re-adopt", issue_id=issue.id, issue_identifier=issue.identifier,
            attempt=left.attempt, pid=left.agent.pid,
        )  # fmt: skip
        return run

    def dispatch_feedback(self, issue: Issue, feedback: str) -> bool:
        """Start a reaction's run of ``issue`` (a continuation: its thread resumed when the
        backend can) when it is eligible and a slot is free; False otherwise."""
        settings = self._state.settings
        if self._state.dispatch_paused or not self.is_eligible(issue, settings, for_retry=True):
            return False
        if not self.slots_free(issue, settings):
            return False
        self.dispatch(issue, attempt=1, retry_kind="continuation", feedback=feedback)
        return True

    def candidates_fetched(self, candidates: list[Issue], tick_started_mono: float) -> None:
        """A poll's candidates (§8.1): release retries of issues that left them, remember
        them, and dispatch in order while slots are free."""
        state = self._state
        settings = state.settings
        state.tracker_ok()
        self.probes.tick()  # down worker hosts whose backoff ran out
        present = {issue.id for issue in candidates}
        waiting = state.resources.waiting
        for issue_id in [i for i in waiting if i not in present]:
            del waiting[issue_id]
        for issue_id in [i for i in state.retrying if i not in present]:
            # Left the active states while waiting: its timer would find the same (§8.4);
            # releasing now keeps the console from showing a stale state and a retry.
            self._retries.release(issue_id, "no longer in an active state")
        state.remember_candidates(candidates)
        eligible_left = 0
        for issue in policy.sort_for_dispatch(candidates):
            # A retry waiting for a slot keeps its issue's place in the order (§8.2), so
            # a new issue after it never takes the slot it waits for.
            retry = self._retries.due_for_slot(issue.id)
            if retry is not None and self.is_eligible(issue, settings, for_retry=True):
                if state.dispatch_paused or not self.slots_free(issue, settings):
                    eligible_left += 1
                    continue
                self.dispatch(issue, attempt=retry.entry.attempt, retry_kind=retry.entry.retry_kind)
                continue
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
        """A due retry's refresh by id came back (§8.4, §16.6; ``candidates`` is the
        result of ``fetch_issues_by_ids([issue_id])``): dispatch its issue, queue it again
        (tracker down, dispatch paused, no slot) or release it (gone, terminal with its
        workspace already removed, or no longer active and routable)."""
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
        if issue is None:
            self._retries.release(issue_id, "no longer visible in the tracker")
            return
        if settings.tracker.is_terminal(issue.state):
            self._retries.release(issue_id, f"moved to terminal state {issue.state}")
            return
        if issue_id in state.reacting:  # only a continuation retry meets a reaction
            self._retries.release(issue_id, "a pull request reaction's run takes its place")
            return
        if not self.is_eligible(issue, settings, for_retry=True):
            self._retries.release(issue_id, "no longer active and routable")
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
            why = state.resources.waiting.get(issue_id) or policy.NO_SLOTS_ERROR
            self._retries.schedule(issue, entry.attempt + 1, delay, error=why)
            return
        self.dispatch(issue, attempt=entry.attempt, retry_kind=entry.retry_kind)
