"""The scheduler state and its only mutators (spec §4.1.8 orchestrator runtime state).

:class:`SchedulerState` holds what the scheduler knows: the running issues (``running``:
issue id -> :class:`Run`), the retry queue (``retrying``: issue id -> :class:`RetryState`),
operator holds, known issues, completed identifiers, token totals and rate limits (through
its session recorder), the dispatch and tracker flags, and the tick bookkeeping that decides
idleness. Every change goes through a method here (or the recorder and the approval desk,
which report through :meth:`changed`), all on the event loop, and each change bumps
:attr:`version`: a snapshot is rebuilt from the state when the version moved.

The scheduling loop (``orchestrator.py``) decides *when* a change happens, by handling one
input of its inbox at a time; this module only says *what* a change is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentSession
from symphony_tui.config.pricing import lookup
from symphony_tui.config.settings import Settings
from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import (
    AgentEvent,
    EventKind,
    Issue,
    RateLimits,
    RecoveredWorkspace,
    RetryEntry,
    RunStatus,
    Snapshot,
)
from symphony_tui.domain.payloads import LinkChanged, Payload
from symphony_tui.domain.pull_requests import PullRequestLink
from symphony_tui.observability.logs import log_kv
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler import manifests
from symphony_tui.scheduler.clock import Clock, TimerHandle
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.holds import Holds
from symphony_tui.scheduler.posture import PostureSource
from symphony_tui.scheduler.resources import ResourceBook
from symphony_tui.scheduler.run import Ending, Run, WorkerControl
from symphony_tui.scheduler.session_events import SessionRecorder
from symphony_tui.scheduler.snapshots import IssueRowCache, build_snapshot
from symphony_tui.scheduler.usage.budgets import Budgets
from symphony_tui.scheduler.usage.ledger import UsageLedger
from symphony_tui.scheduler.usage.tokens import TokenLedger
from symphony_tui.scheduler.worker_hosts.book import HostBook, host_down
from symphony_tui.trackers.base import TrackerError
from symphony_tui.workspaces.manager import WorkspaceManager

log = logging.getLogger("symphony_tui.scheduler")

#: Completed identifiers kept for the snapshot (oldest dropped first).
MAX_COMPLETED = 500
#: Longest poll interval (seconds) refused credentials back off to.
REFUSED_POLL_CAP_S = 300.0


@dataclass(frozen=True)
class TurnReview:
    """What the state says once a run's turn ended (``SchedulerState.run_turn_ended``):
    the approval that timed out and ends the attempt (None: none did); ``held``: a token
    budget holds the run; ``moved_out``: it was held, but its agent moved its issue out
    of the active states, so the turn's outcome does not end the attempt."""

    approval_timed_out: str | None
    held: bool
    moved_out: bool


@dataclass
class RetryState:
    """A retry entry with what the scheduler needs to act on it: the ``issue`` as last seen,
    the ``token`` its timer carries (a replaced entry's timer is stale) and the ``timer``."""

    entry: RetryEntry
    issue: Issue
    token: int
    timer: TimerHandle


class SchedulerState:
    """One scheduler's state; see the module docstring. ``store`` gives the current
    settings, ``events`` is the event history every event goes into."""

    def __init__(
        self,
        store: WorkflowStore,
        clock: Clock,
        events: EventHistory,
        workspaces: WorkspaceManager,
    ) -> None:
        self.store = store
        self.clock = clock
        self.events = events
        self.workspaces = workspaces
        self.running: dict[str, Run] = {}
        self.retrying: dict[str, RetryState] = {}
        self.held = Holds(workspaces)
        self.completed: list[str] = []
        self.known: dict[str, Issue] = {}
        #: Issue identifier -> its pull request as last read (scheduler/feedback.py).
        self.pull_requests: dict[str, PullRequestLink] = {}
        #: Issue ids whose pull request reaction is preparing its run (reading a job's log,
        #: moving the issue back to an active state): a poll or a continuation retry must
        #: not start a plain run of them meanwhile (scheduler/feedback.py).
        self.reacting: set[str] = set()
        self.ledger = TokenLedger()
        self.recorder = SessionRecorder(
            clock, self.ledger, events, changed=self.changed, manifests=workspaces.manifests
        )
        self.budgets = Budgets(self.ledger)
        self.recorder.on_tokens = self.check_budget
        self.recorder.price_of = lambda run: lookup(self.settings.pricing, run.model)
        self.recovered: tuple[RecoveredWorkspace, ...] = ()
        #: Secrets, child environment and control API behind each run's posture.
        self.posture = PostureSource()
        #: Worker hosts and where each issue's workspace is.
        self.hosts = HostBook(lambda: self.settings, clock.now)
        #: Each run's agent memory and CPU, each machine's free memory (resources.py).
        self.resources = ResourceBook()
        self.hosts.memory_short = lambda name: self.resources.short(
            name, self.settings.worker, self.running
        )
        self.dispatch_paused = False
        self.config_error: str | None = None
        self.tracker_error: str | None = None
        self.tracker_errors = 0  # failed tracker calls since start (/metrics)
        #: Tracker calls in a row that were refused for their credentials (0 after any
        #: success): each one doubles the poll interval (:meth:`poll_delay_s`).
        self.tracker_refusals = 0
        self.tracker_paused_until: datetime | None = None
        self.started_at: datetime | None = None
        self.last_poll_at: datetime | None = None
        self.next_poll_at: datetime | None = None
        self.stopping = False
        #: ``(running, retrying, pending approvals)`` when the shutdown began (None before).
        self.stopping_with: tuple[int, int, int] | None = None
        self.ticks = 0
        #: Monotonic seconds of the newest change that may make something eligible (a run
        #: ended, a claim was released); idleness needs a tick after it.
        self.last_change_mono = 0.0
        self.last_tick_done_mono = -1.0
        self.last_tick_eligible = 0
        self.ended_seconds = 0.0
        #: The project's usage ledger: totals that survive a restart (None: memory only).
        self.usage: UsageLedger | None = None
        #: Bumped by every change a snapshot shows.
        self.version = 0
        self._snapshot: tuple[int, float, Snapshot] | None = None
        self._rows = IssueRowCache()  # issue rows reused between snapshot builds

    @property
    def settings(self) -> Settings:
        return self.store.current.settings

    @property
    def rate_limits(self) -> RateLimits | None:
        """The newest account rate limits any session reported (None before the first)."""
        return self.recorder.rate_limits

    def changed(self) -> None:
        """Something a snapshot shows changed."""
        self.version += 1

    # ------------------------------------------------------------------ runs

    def claim(self, run: Run) -> None:
        """``run``'s issue is running now (§16.4); its posture is fixed now."""
        if run.posture is None:
            run.posture = self.posture.of(self.settings, run.backend, run.worker_host)
        if run.model is None:
            run.model = self.settings.configured_model(run.backend)
        self.running[run.issue.id] = run
        self.known[run.issue.id] = run.issue
        self.changed()

    def worker_started(self, run: Run, task: asyncio.Task, worker: WorkerControl) -> None:
        """``run``'s worker task started (``run.task``, ``run.worker``)."""
        run.task = task
        run.worker = worker
        self.changed()

    def run_status(self, run: Run, status: RunStatus, error: str | None = None) -> None:
        """``run``'s worker moved it to ``status`` (``error``: why its attempt failed)."""
        run.status = status
        if error is not None:
            run.error = error
        self.changed()

    def run_workspace(
        self, run: Run, path: Path, resume: dict[str, Any], *, created: bool, started: bool
    ) -> None:
        """``run``'s workspace is ready at ``path`` (``created`` by this attempt);
        ``resume`` holds the facts its session re-attaches with. ``started``: the
        attempt's start goes to the run manifest."""
        run.workspace = path
        run.resume = resume
        self.changed()
        if created:
            self.emit_system(EventKind.HOOK, f"workspace created at {path}", issue=run.issue)
        if started:
            manifests.attempt_started(self.workspaces.manifests, run)

    def run_session(self, run: Run, session: AgentSession, *, record_group: bool) -> None:
        """``run``'s agent session is open (``record_group``: its agent's process group
        goes to the run's manifest, ``manifests.agent_group``)."""
        run.session = session
        self.changed()
        if record_group:
            manifests.agent_group(
                self.workspaces.manifests, run, session.pid, adoptable=session.adoptable
            )

    def run_link(self, run: Run, link: LinkChanged) -> None:
        """``run``'s link to its detached agent changed state (agents/codex/link.py)."""
        run.link_state = link.state
        run.link_mode = link.mode
        since = None
        if link.since:
            with contextlib.suppress(ValueError):
                since = datetime.fromisoformat(link.since)
        run.link_since = since
        self.changed()

    def run_session_closed(self, run: Run) -> None:
        """``run``'s agent session closed and its process group was ended: the manifest
        no longer records the group, unless the agent outlives its session on purpose
        (``adoptable``, re-adopted by a later scheduler)."""
        if run.session is None or not run.session.adoptable:
            manifests.agent_group_ended(self.workspaces.manifests, run)

    def run_turn_started(self, run: Run, turn: int, *, record: bool) -> None:
        """``run``'s turn ``turn`` is streaming (``record``: said in the run manifest)."""
        run.turn_count = turn
        run.status = RunStatus.STREAMING_TURN
        self.changed()
        if record:
            manifests.turn_started(self.workspaces.manifests, run)

    def run_turn_ended(self, run: Run) -> TurnReview:
        """``run``'s turn ended and its session's reports are applied: the thread's token
        totals go to the manifest, and the review says whether the attempt goes on. A run
        held by a budget whose agent moved its issue out of the active states is no longer
        held: no turn follows, so there is nothing to hold for (a held run would keep its
        slot forever: reconcile leaves an agent's own move to the worker)."""
        self.recorder.persist_tokens(run)
        held = run.budget_reached is not None or bool(self.budgets.over(run, self.settings.agent))
        moved = run.agent_moved_state
        moved_out = moved is not None and not self.settings.tracker.is_active(moved)
        if held and moved_out:
            run.budget_reached = None
            self.changed()
        return TurnReview(
            approval_timed_out=run.approval_timed_out,
            held=held and not moved_out,
            moved_out=held and moved_out,
        )

    def run_hook_ran(
        self, run: Run, hook: str, summary: str, message: str, payload: Payload
    ) -> None:
        """A hook of ``run``'s attempt ran: said in the history and the run manifest."""
        self.emit_system(EventKind.HOOK, message, issue=run.issue, payload=payload)
        manifests.hook_ran(self.workspaces.manifests, run, hook, summary)

    def run_host_failed(self, run: Run, host: str, lost: str | None) -> None:
        """``run`` failed on worker host ``host``: a ``lost`` connection takes the host
        down (``worker_hosts/book.py`` ``host_down``); otherwise the issue tries another host next."""
        if lost is None:
            self.hosts.failed_there(run.issue.id, host)
            return
        run.host_lost = lost
        host_down(self, host, lost, run)

    def run_attempt_ended(self, run: Run, ending: Ending) -> None:
        """``run``'s attempt ended (its ``after_run`` ran): the thread's token totals and
        the attempt's end go to the manifest."""
        self.recorder.persist_tokens(run)
        manifests.attempt_ended(self.workspaces.manifests, run, ending, self.clock.now())

    def run_issue_seen(self, run: Run, issue: Issue, *, remember: bool = True) -> None:
        """The tracker shows ``run``'s issue as ``issue`` now (kept as known unless the run
        is being stopped because of it)."""
        run.issue = issue
        if remember:
            self.known[issue.id] = issue
        self.changed()

    def run_moved_by_agent(self, run: Run, moved: Issue) -> None:
        """``run``'s agent moved its issue (the ``symphony_set_issue_state`` tool, spec
        §10.5): ``moved`` is the issue as the tracker answered; a reconcile that reads its
        new state takes it for the agent's own move (``run.agent_moved_state``)."""
        run.issue = moved
        run.agent_moved_state = moved.state
        self.changed()

    def run_move_intended(self, run: Run, state: str | None) -> str | None:
        """``run``'s agent is moving its issue to ``state`` (after a failed move: the
        intent before it, None for none), recorded before the tracker write, so a
        reconcile that reads the new state while the write is being answered does not
        take it for someone else's move. Returns the intent it replaces."""
        previous, run.agent_moved_state = run.agent_moved_state, state
        return previous

    def unclaim(self, run: Run) -> None:
        """``run``'s worker ended: drop it from ``running`` and count its running time."""
        if self.running.get(run.issue.id) is run:
            del self.running[run.issue.id]
        now = self.clock.monotonic()
        self.ended_seconds += max(0.0, now - run.started_mono)
        if run.usage_unreported:
            self.ledger.run_unreported(run.issue.id)
        elif run.spend == "unknown model":
            self.ledger.run_unpriced(run.issue.id)
        if self.usage is not None:
            self.usage.run_ended(run, now)
        self.last_change_mono = now
        self.changed()

    def mark_completed(self, identifier: str) -> None:
        if identifier not in self.completed:
            self.completed.append(identifier)
            del self.completed[:-MAX_COMPLETED]
            self.changed()

    # ------------------------------------------------------------------ retries

    def add_retry(self, retry: RetryState) -> None:
        self.retrying[retry.entry.issue_id] = retry
        self.changed()

    def pop_retry(self, issue_id: str) -> RetryState | None:
        """Drop the issue's retry entry, if any, and cancel its timer; returns the entry."""
        retry = self.retrying.pop(issue_id, None)
        if retry is not None:
            retry.timer.cancel()
            self.changed()
        return retry

    def claim_released(self) -> None:
        """A claim was released: idleness needs another tick."""
        self.last_change_mono = self.clock.monotonic()
        self.changed()

    # ------------------------------------------------------------------ issues, holds

    def remember(self, issue: Issue) -> None:
        """The newest version of ``issue`` the tracker gave."""
        self.known[issue.id] = issue
        self.changed()

    def remember_candidates(self, candidates: list[Issue]) -> None:
        """After a candidate fetch: known issues are the candidates, plus claimed and
        completed ones no longer among them; stale holds end; transcripts of issues no
        longer known are dropped."""
        keep: dict[str, Issue] = {issue.id: issue for issue in candidates}
        for issue_id in list(self.running) + list(self.retrying):
            if issue_id not in keep and issue_id in self.known:
                keep[issue_id] = self.known[issue_id]
        for issue in self.known.values():
            if issue.identifier in self.completed and issue.id not in keep:
                keep[issue.id] = issue
        self.held.release_stale(keep, self.known)
        if keep != self.known:
            self.changed()
        self.known = keep
        self.events.forget(set(keep) | set(self.running))

    def hold(self, issue: Issue, workspace: Path | None) -> None:
        self.held.hold(issue, workspace)
        self.changed()

    def unhold(self, issue_id: str) -> None:
        self.held.release(issue_id, self.known.get(issue_id))
        self.changed()

    def restore_holds(self, recovered: Iterable[RecoveredWorkspace] | None = None) -> None:
        """Start-up: the operator's holds and budget extensions the recovered workspaces'
        run manifests kept from an earlier process (``recovered``: those of one worker
        host, when the scheduler first reaches it; default the recovered list)."""
        found = tuple(self.recovered if recovered is None else recovered)
        self.held.restore(found)
        self.budgets.restore(
            {w.issue_id: w.budget_extra for w in found if w.issue_id and w.budget_extra},
            {w.issue_id: w.budget_extra_usd for w in found if w.issue_id and w.budget_extra_usd},
        )
        self.changed()

    def set_recovered(self, recovered: tuple[RecoveredWorkspace, ...]) -> None:
        if recovered != self.recovered:
            self.recovered = recovered
            self.changed()

    # ------------------------------------------------------------------ flags

    def set_dispatch_paused(self, paused: bool) -> None:
        self.dispatch_paused = paused
        self.changed()

    def set_config_error(self, error: str | None) -> None:
        if error != self.config_error:
            self.config_error = error
            self.changed()

    def tracker_failed(self, exc: TrackerError, what: str) -> None:
        """A tracker call failed: shown until one succeeds; a rate limit pauses polling
        until its reset. The same failure again is logged at debug level only."""
        # an exception's text can quote a request (a header with the token): mask first
        text = redact(str(exc))
        repeat = self.tracker_error == text and exc.retry_at is None
        self.tracker_error = text
        self.tracker_errors += 1
        if exc.credentials_refused:
            self.tracker_refusals += 1
        self.changed()
        if repeat:
            # The same failure again (a broken issues file fails every poll and refresh):
            # the status bar keeps showing it; the log and history get it once.
            self.log("debug", what, error=str(exc))
            return
        if exc.retry_at is not None:
            self.tracker_paused_until = exc.retry_at
            self.emit_system(
                EventKind.TRACKER,
                f"tracker rate limited; polling paused until {exc.retry_at.isoformat()}",
            )
        else:
            self.emit_system(EventKind.TRACKER, f"{what}: {exc}")
        self.log("warning", what, error=str(exc))

    def tracker_ok(self) -> None:
        self.tracker_refusals = 0
        if self.tracker_error is not None:
            self.tracker_error = None
            self.emit_system(EventKind.TRACKER, "tracker reachable again")

    def poll_delay_s(self) -> float:
        """Seconds until the next poll tick: ``polling.interval_ms``, doubled for each
        refusal of the tracker's credentials in a row up to :data:`REFUSED_POLL_CAP_S` (or
        the interval if longer), so a wrong key is not replayed every few seconds (trackers
        may lock out an account that keeps sending one)."""
        interval = self.settings.polling.interval_ms / 1000
        if not self.tracker_refusals:
            return interval
        return min(max(interval, REFUSED_POLL_CAP_S), interval * 2**self.tracker_refusals)

    def tracker_paused(self) -> bool:
        """True while a rate limit's reset is ahead (the pause ends once it passed)."""
        if self.tracker_paused_until is None:
            return False
        if self.clock.now() < self.tracker_paused_until:
            return True
        self.tracker_paused_until = None
        self.changed()
        return False

    # ------------------------------------------------------------------ ticks, lifecycle

    def mark_started(self) -> None:
        self.started_at = self.clock.now()
        self.changed()

    def mark_stopping(self) -> None:
        """The shutdown begins: what runs and waits now is kept (``stopping_with``), as the
        shutdown ends it before the scheduler says it has stopped."""
        self.stopping = True
        approvals = sum(len(run.pending) for run in self.running.values())
        self.stopping_with = (len(self.running), len(self.retrying), approvals)
        self.changed()

    def tick_started(self) -> None:
        self.last_poll_at = self.clock.now()
        self.changed()

    def tick_found(self, eligible_left: int) -> None:
        """How many eligible issues the tick left waiting (0 lets the scheduler be idle)."""
        self.last_tick_eligible = eligible_left

    def tick_done(self) -> None:
        self.ticks += 1
        self.last_tick_done_mono = self.clock.monotonic()
        self.changed()

    def set_next_poll(self, at: datetime) -> None:
        self.next_poll_at = at
        self.changed()

    @property
    def idle(self) -> bool:
        """Nothing running or retrying, and the newest finished tick came after the last
        change and found nothing to dispatch (``--exit-when-idle``)."""
        return (
            not self.running
            and not self.retrying
            and self.last_tick_done_mono > self.last_change_mono
            and self.last_tick_eligible == 0
            and self.ticks > 0
        )

    # ------------------------------------------------------------------ events, snapshot

    def check_budget(self, run: Run) -> None:
        """Hold ``run`` when it crossed a token budget (:mod:`.budgets`): mark it
        ``budget_reached``, say so, and interrupt its turn in flight. Once per crossing."""
        if run.budget_reached is not None or run.stopping or run.worker is None:
            return
        why = self.budgets.over(run, self.settings.agent)
        if why is None:
            if not run.money_blind_said and self.budgets.money_blind(run, self.settings.agent):
                run.money_blind_said = True
                self.emit_system(
                    EventKind.WARNING,
                    f"model {run.model or '(not reported)'} has no price: the money budget "
                    "cannot hold this run (add it under pricing)",
                    issue=run.issue,
                )
            return
        run.budget_reached = why
        self.emit_system(
            EventKind.WARNING, f"budget reached: {why}; extend it or stop", issue=run.issue
        )
        run.worker.interrupt_turn()

    def budget_extended(self, run: Run) -> None:
        """The operator extended ``run``'s budget: it is no longer held by it."""
        run.budget_reached = None
        self.changed()

    def emit_system(
        self,
        kind: EventKind,
        message: str,
        *,
        issue: Issue | None = None,
        payload: Payload | None = None,
    ) -> None:
        """Append a scheduler event (not from a session) to the history."""
        self.events.append(
            AgentEvent(
                kind=kind,
                message=message,
                issue_id=issue.id if issue else None,
                issue_identifier=issue.identifier if issue else None,
                at=self.clock.now(),
                payload=payload,
            )
        )
        self.changed()

    def log(self, level: str, msg: str, **fields: Any) -> None:
        log_kv(log, level, msg, **fields)

    def cached_snapshot(self) -> Snapshot:
        """The last :meth:`snapshot`, rebuilt when the state changed (its version moved) or
        half a second passed (running times and token rates move with time)."""
        now_mono = self.clock.monotonic()
        cached = self._snapshot
        if cached is None or cached[0] != self.version or now_mono - cached[1] >= 0.5:
            cached = self._snapshot = (self.version, now_mono, self.snapshot())
        return cached[2]

    def snapshot(self) -> Snapshot:
        """A new immutable snapshot of the state now (``snapshots.build_snapshot``)."""
        now, now_mono = self.clock.now(), self.clock.monotonic()
        for run in self.running.values():  # streamed fragments stamp a monotonic reading
            run.settle_event_time(now, now_mono)
        return build_snapshot(
            now=now,
            now_mono=now_mono,
            settings=self.settings,
            workflow_path=str(self.store.current.path),
            started_at=self.started_at,
            known=self.known,
            running=self.running,
            retries=[r.entry for r in self.retrying.values()],
            held=self.held,
            completed=self.completed,
            ledger=self.ledger,
            ended_seconds=self.ended_seconds,
            rate_limits=self.rate_limits,
            recovered=self.recovered,
            dispatch_paused=self.dispatch_paused,
            config_error=self.config_error,
            tracker_error=self.tracker_error,
            tracker_errors=self.tracker_errors,
            tracker_paused_until=self.tracker_paused_until,
            last_poll_at=self.last_poll_at,
            next_poll_at=self.next_poll_at,
            hosts=self.hosts.rows(self.running, self.recovered) if self.hosts.enabled else (),
            row_cache=self._rows,
            resources=self.resources,
            pull_requests=self.pull_requests,
            stopping_with=self.stopping_with,
        )
