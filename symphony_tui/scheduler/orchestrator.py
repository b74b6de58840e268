"""The orchestrator: the single authority over run state (spec §7, §8, §16; DESIGN.md).

It owns ``running``, retry entries, holds, known issues, token totals and rate limits. Every
mutation happens on the event loop thread, in synchronous sections between awaits, so no two
mutations interleave. This module is the scheduling loop: lifecycle, ticks, eligibility,
dispatch, the worker of each run (one asyncio task), retries and reconciliation. The
collaborators it creates each own one concept and run on the same loop:

- ``approvals.ApprovalDesk``: approval requests, their deadlines and answers;
- ``session_events.SessionRecorder``: what sessions report, into run state, tokens, the log;
- ``tools.SessionTools``: the client-side tools sessions may call;
- ``holds.Holds``: operator holds, kept across restarts;
- ``commands.OperatorCommands``: operator commands (:meth:`Orchestrator.send`);
- ``snapshots.build_snapshot``: the immutable ``Snapshot`` (pure).

Sessions reach the scheduler through ``host.RunHost``; front ends read :meth:`snapshot` and
:meth:`events_since` and call :meth:`send` (``SchedulerPort``).

Tick (§8.1): reconcile running issues -> re-check the workflow -> validate -> fetch
candidates -> sort -> dispatch while slots are free. Poll ticks never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from symphony_tui.agents.base import (
    AgentBackend,
    AgentError,
    AgentSession,
    TurnResult,
    TurnStatus,
)
from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.prompt import render_prompt
from symphony_tui.config.settings import Settings
from symphony_tui.config.store import WorkflowStore
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.domain import (
    AgentEvent,
    EventKind,
    Issue,
    RateLimits,
    RecoveredWorkspace,
    RetryEntry,
    RunOutcome,
    RunStatus,
    Snapshot,
)
from symphony_tui.domain.commands import Command
from symphony_tui.observability.logs import log_kv
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.approvals import ApprovalDesk
from symphony_tui.scheduler.clock import Clock, RealClock, TimerHandle
from symphony_tui.scheduler.commands import OperatorCommands
from symphony_tui.scheduler.eventlog import EventLog
from symphony_tui.scheduler.holds import Holds
from symphony_tui.scheduler.host import RunHost
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.session_events import SessionRecorder
from symphony_tui.scheduler.snapshots import build_snapshot
from symphony_tui.scheduler.tokens import TokenLedger
from symphony_tui.scheduler.tools import SessionTools
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.manifest import read_manifest, update_manifest

log = logging.getLogger("symphony_tui.scheduler")

DEFAULT_CONTINUATION = (
    "Continue working on {identifier}. The issue is still in state '{state}'. This is turn "
    "{turn} of at most {max_turns} in this session; pick up where you left off, and when the "
    "work is done move the issue to its next state."
)

SESSION_CLOSE_TIMEOUT_S = 10.0
SHUTDOWN_TIMEOUT_S = 20.0
MAX_COMPLETED = 500

BackendFactory = Callable[[str], AgentBackend]


class StartupError(Exception):
    """Start-up validation failed (spec §6.3): the service must not start."""


@dataclass
class _Retry:
    entry: RetryEntry
    issue: Issue
    token: int
    timer: TimerHandle


class Orchestrator:
    """Polls, dispatches, retries and reconciles. Implements ``SchedulerPort``.

    ``backends`` maps a backend name (``agent.backend``) to a backend instance; it is
    called once per name. ``clock`` defaults to the event loop's clock.
    """

    def __init__(
        self,
        store: WorkflowStore,
        tracker: Tracker,
        workspaces: WorkspaceManager,
        backends: BackendFactory,
        *,
        clock: Clock | None = None,
        event_log: EventLog | None = None,
        watch_workflow: bool = True,
    ) -> None:
        self.store = store
        self.tracker = tracker
        self.workspaces = workspaces
        self._backend_factory = backends
        self._backends: dict[str, AgentBackend] = {}
        self.clock: Clock = clock or RealClock()
        self.events = event_log or EventLog()
        self._watch_workflow = watch_workflow
        #: Set once the WORKFLOW.md watcher is armed (edits before that are caught by the
        #: check at arming time and by the re-check before each dispatch).
        self.watch_ready = asyncio.Event()

        self.running: dict[str, Run] = {}
        self.retrying: dict[str, _Retry] = {}
        self.held = Holds(workspaces)
        self.completed: list[str] = []
        self.known: dict[str, Issue] = {}
        self.ledger = TokenLedger()
        self._recorder = SessionRecorder(
            self.clock, self.ledger, self.events, changed=self._changed
        )
        self._tools = SessionTools(tracker, emit=self._recorder.on_event, moved=self._agent_moved)
        self._approvals = ApprovalDesk(
            self.clock,
            settings=lambda: self.settings,
            runs=lambda: self.running.values(),
            emit=self._recorder.on_event,
            changed=self._changed,
        )
        self._commands = OperatorCommands(self)
        self.recovered: tuple[RecoveredWorkspace, ...] = ()
        self.dispatch_paused = False
        self.config_error: str | None = None
        self.tracker_error: str | None = None
        self.tracker_paused_until: datetime | None = None
        self.started_at: datetime | None = None
        self.last_poll_at: datetime | None = None
        self.next_poll_at: datetime | None = None

        self._ended_seconds = 0.0
        self._retry_tokens = itertools.count(1)
        self._tick_timer: TimerHandle | None = None
        self._tick_lock = asyncio.Lock()
        self._tick_again = False
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self._stopped = asyncio.Event()
        self._snapshot: Snapshot | None = None
        self._dirty = True
        self._snapshot_mono = -1.0
        self._last_change_mono = 0.0
        self._last_tick_done_mono = -1.0
        self._last_tick_eligible = 0
        self.ticks = 0

    # ------------------------------------------------------------------ properties

    @property
    def settings(self) -> Settings:
        return self.store.current.settings

    @property
    def rate_limits(self) -> RateLimits | None:
        """The newest account rate limits any session reported (None before the first)."""
        return self._recorder.rate_limits

    @property
    def stopped(self) -> bool:
        """True once :meth:`shutdown` finished."""
        return self._stopped.is_set()

    @property
    def idle(self) -> bool:
        """Nothing running or retrying, and the newest finished tick came after the last
        change and found nothing to dispatch (``--exit-when-idle``)."""
        return (
            not self.running
            and not self.retrying
            and self._last_tick_done_mono > self._last_change_mono
            and self._last_tick_eligible == 0
            and self.ticks > 0
        )

    @property
    def needs_tick_for_idle(self) -> bool:
        """True when idleness cannot be decided until another tick runs."""
        return (
            not self.running
            and not self.retrying
            and self._last_tick_done_mono <= self._last_change_mono
            and not self._tick_lock.locked()
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Validate, sweep terminal workspaces, start watching the workflow, tick now.

        Raises :class:`StartupError` when dispatch validation fails (spec §6.3, §16.1).
        """
        errors = validate_dispatch(self.settings)
        if errors:
            raise StartupError("; ".join(errors))
        self.started_at = self.clock.now()
        self._log("info", "scheduler starting", workflow=str(self.store.current.path))
        await self._startup_sweep()
        self._refresh_recovered()
        self.held.restore(self.recovered)
        if self._watch_workflow:
            self._spawn(
                self.store.watch(self._on_workflow_changed, ready=self.watch_ready),
                name="workflow-watch",
            )
        self._spawn(self.tick(), name="tick")

    async def run(self) -> None:
        """Start and keep running until :meth:`shutdown` (the console's runner)."""
        await self.start()
        await self._stopped.wait()

    async def shutdown(self) -> None:
        """Stop every worker (process groups killed), cancel timers, close clients."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._log("info", "scheduler stopping", running=len(self.running))
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        for retry in self.retrying.values():
            retry.timer.cancel()
        self.retrying.clear()
        workers = []
        for run in list(self.running.values()):
            self._end_run_early(run, RunOutcome.STOPPED, RunStatus.STOPPED, "scheduler shutdown")
            if run.task is not None:
                run.task.cancel()
                workers.append(run.task)
        if workers:
            await asyncio.wait(workers, timeout=SHUTDOWN_TIMEOUT_S)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, timeout=2)
        for backend in self._backends.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(backend.aclose(), timeout=SESSION_CLOSE_TIMEOUT_S)
        with contextlib.suppress(Exception):
            await self.tracker.aclose()
        self.events.close()
        self._dirty = True
        self._stopped.set()

    def kill_agents_now(self) -> int:
        """Last resort when the event loop is gone (the console crashed): SIGKILL the process
        group of every live agent session. Returns how many groups were signalled."""
        killed = 0
        for run in list(self.running.values()):
            pid = run.session.pid if run.session is not None else None
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                    killed += 1
        return killed

    async def _startup_sweep(self) -> None:
        """Remove workspaces of issues already in terminal states (§8.6). Failures are
        logged; start-up goes on."""
        try:
            terminal = await self.tracker.fetch_issues_by_states(
                list(self.settings.tracker.terminal_states)
            )
        except TrackerError as exc:
            self._log("warning", "startup terminal sweep skipped", error=str(exc))
            return
        for issue in terminal:
            try:
                path = self.workspaces.path_for(issue.identifier)
            except WorkspaceError:
                continue
            if path.exists():
                try:
                    await self.workspaces.remove(issue.identifier)
                    self._emit_system(
                        EventKind.RECONCILE, "removed workspace of terminal issue", issue=issue
                    )
                except Exception as exc:  # a sweep failure never blocks start-up
                    self._log("warning", "workspace sweep failed", error=str(exc))

    # ------------------------------------------------------------------ ticks

    def request_refresh(self) -> None:
        """Poll and reconcile as soon as possible (coalesced with a running tick)."""
        if self._stopping:
            return
        if self._tick_timer is not None:
            self._tick_timer.cancel()
            self._tick_timer = None
        self._spawn(self.tick(), name="tick")

    def _schedule_next_tick(self) -> None:
        if self._stopping:
            return
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        delay = self.settings.polling.interval_ms / 1000
        self.next_poll_at = self.clock.now() + timedelta(seconds=delay)
        self._tick_timer = self.clock.call_later(delay, self.request_refresh)

    async def tick(self) -> None:
        """One poll-and-dispatch cycle (§8.1). Never raises."""
        if self._tick_lock.locked():
            self._tick_again = True
            return
        async with self._tick_lock:
            try:
                await self._tick_once()
            except Exception as exc:  # a tick must never kill the scheduler
                log.exception("tick failed")
                self._emit_system(EventKind.ERROR, f"tick failed: {exc}")
            finally:
                self.ticks += 1
                self._last_tick_done_mono = self.clock.monotonic()
                self._dirty = True
                self._schedule_next_tick()
        if self._tick_again and not self._stopping:
            self._tick_again = False
            self.request_refresh()

    async def _tick_once(self) -> None:
        tick_started = self.clock.monotonic()
        self.last_poll_at = self.clock.now()
        await self._reconcile()
        self._recheck_workflow()
        settings = self.settings
        errors = validate_dispatch(settings)
        # Both matter to the operator: why dispatch is blocked now, and why the newest
        # edit of WORKFLOW.md was not taken.
        self.config_error = "; ".join(e for e in (*errors, self.store.error) if e) or None
        if errors:
            self._log("error", "dispatch validation failed", error=self.config_error)
            self._last_tick_eligible = 1  # not idle: an operator must fix the workflow
            return
        if self.tracker_paused_until is not None:
            if self.clock.now() < self.tracker_paused_until:
                self._last_tick_eligible = 1
                return
            self.tracker_paused_until = None
        try:
            candidates = await self.tracker.fetch_candidate_issues()
        except TrackerError as exc:
            self._on_tracker_error(exc, "candidate fetch failed")
            self._last_tick_eligible = 1
            return
        if self.tracker_error is not None:
            self.tracker_error = None
            self._emit_system(EventKind.TRACKER, "tracker reachable again")
        present = {issue.id for issue in candidates}
        for issue_id in [i for i in self.retrying if i not in present]:
            # Left the active states while waiting: its timer would find the same (§8.4);
            # releasing now keeps the console from showing a stale state and a retry.
            self._release(issue_id, "no longer in an active state")
        self._remember_candidates(candidates)
        eligible_left = 0
        for issue in policy.sort_for_dispatch(candidates):
            if not self._is_eligible(issue, settings):
                continue
            if self.dispatch_paused or not self._slots_free(issue, settings):
                eligible_left += 1
                continue
            self._dispatch(issue, attempt=None)
        self._last_tick_eligible = eligible_left
        if self._last_change_mono > tick_started:
            # Something ended during this tick: its outcome was not seen by this tick.
            self._last_tick_eligible = max(self._last_tick_eligible, 1)

    def _on_tracker_error(self, exc: TrackerError, what: str) -> None:
        repeat = self.tracker_error == str(exc) and exc.retry_at is None
        self.tracker_error = str(exc)
        if repeat:
            # The same failure again (a broken issues file fails every poll and refresh):
            # the status bar keeps showing it; the log and history get it once.
            self._log("debug", what, error=str(exc))
            return
        if exc.retry_at is not None:
            self.tracker_paused_until = exc.retry_at
            self._emit_system(
                EventKind.TRACKER,
                f"tracker rate limited; polling paused until {exc.retry_at.isoformat()}",
            )
        else:
            self._emit_system(EventKind.TRACKER, f"{what}: {exc}")
        self._log("warning", what, error=str(exc))

    def _remember_candidates(self, candidates: list[Issue]) -> None:
        keep: dict[str, Issue] = {}
        for issue in candidates:
            keep[issue.id] = issue
        for issue_id in list(self.running) + list(self.retrying):
            if issue_id not in keep and issue_id in self.known:
                keep[issue_id] = self.known[issue_id]
        for issue in self.known.values():
            if issue.identifier in self.completed and issue.id not in keep:
                keep[issue.id] = issue
        self.held.release_stale(keep, self.known)
        for issue_id, issue in keep.items():
            if issue_id not in self.known or self.known[issue_id] != issue:
                self._dirty = True
        self.known = keep
        self.events.forget(set(keep) | set(self.running))

    # ------------------------------------------------------------------ eligibility

    def _is_eligible(self, issue: Issue, settings: Settings, *, for_retry: bool = False) -> bool:
        """Spec §8.2 candidate selection, plus operator holds."""
        if not policy.has_required_fields(issue):
            return False
        tracker = settings.tracker
        if not tracker.is_active(issue.state) or tracker.is_terminal(issue.state):
            return False
        if issue.id in self.running:
            return False
        if not for_retry and issue.id in self.retrying:
            return False
        if issue.id in self.held:
            return False
        return not policy.blocked_by_open_issue(issue, settings)

    def _slots_free(self, issue: Issue, settings: Settings) -> bool:
        if len(self.running) >= settings.agent.max_concurrent_agents:
            return False
        by_state: dict[str, int] = {}
        for run in self.running.values():
            key = run.issue.state.strip().lower()
            by_state[key] = by_state.get(key, 0) + 1
        return policy.state_slots_free(issue, settings, by_state)

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, issue: Issue, attempt: int | None) -> Run:
        """Claim ``issue`` and start its worker (§16.4)."""
        self._cancel_retry(issue.id)
        now_mono = self.clock.monotonic()
        run = Run(
            issue=issue,
            attempt=attempt,
            backend=self.settings.agent.backend,
            started_at=self.clock.now(),
            started_mono=now_mono,
            last_event_mono=now_mono,
        )
        self.running[issue.id] = run
        self.known[issue.id] = issue
        self._dirty = True
        run.task = self._spawn(self._worker(run), name=f"worker-{issue.identifier}", track=False)
        self._emit_system(
            EventKind.DISPATCH,
            f"dispatched {issue.identifier}" + (f" (attempt {attempt})" if attempt else ""),
            issue=issue,
            attempt=attempt,
        )
        self._log("info", "dispatch", **_issue_fields(issue), attempt=attempt)
        return run

    def _backend(self, name: str) -> AgentBackend:
        backend = self._backends.get(name)
        if backend is None:
            backend = self._backends[name] = self._backend_factory(name)
        return backend

    # ------------------------------------------------------------------ worker

    async def _worker(self, run: Run) -> None:
        outcome, status, error = RunOutcome.FAILED, RunStatus.FAILED, None
        try:
            outcome, status, error = await self._attempt(run)
        except asyncio.CancelledError:
            outcome = run.end_reason or RunOutcome.STOPPED
            status = run.end_status or RunStatus.STOPPED
            error = run.end_error
        except Exception as exc:
            log.exception("worker crashed")
            outcome, status, error = RunOutcome.FAILED, RunStatus.FAILED, f"worker error: {exc}"
        try:
            await self._cleanup_attempt(run, status, error)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("worker cleanup failed")
        finally:
            self._finish(run, outcome, status, error)

    async def _attempt(self, run: Run) -> tuple[RunOutcome, RunStatus, str | None]:
        settings = self.settings
        issue = run.issue
        try:
            path, created = await self.workspaces.ensure(issue)
        except WorkspaceError as exc:
            if getattr(exc, "hook", None) is not None:
                self._emit_hook(run, exc.hook)
            return RunOutcome.FAILED, RunStatus.FAILED, f"workspace: {exc}"
        run.workspace = path
        if created:
            self._emit_system(EventKind.HOOK, f"workspace created at {path}", issue=issue)
        previous = read_manifest(path)
        session_facts = previous.get("session", {}) if isinstance(previous, dict) else {}
        if isinstance(session_facts, dict) and session_facts.get("backend") in (None, run.backend):
            run.resume = dict(session_facts)
        update_manifest(
            path,
            "run",
            attempt=run.attempt,
            status="running",
            started_at=run.started_at.isoformat(),
            ended_at=None,
            error=None,
            backend=run.backend,
        )
        hook = await self.workspaces.run_hook("before_run", path, issue)
        if hook is not None:
            self._emit_hook(run, hook)
            if not hook.ok:
                return RunOutcome.FAILED, RunStatus.FAILED, _hook_error(hook)
        run.status = RunStatus.BUILDING_PROMPT
        try:
            workflow = self.store.current
            prompt = render_prompt(
                workflow.prompt_template, issue, run.attempt, workflow.prompt_first_line
            )
        except WorkflowError as exc:
            return RunOutcome.FAILED, RunStatus.FAILED, str(exc)
        run.status = RunStatus.LAUNCHING_AGENT
        self._dirty = True
        host = RunHost(run, self._tools.specs(), self._recorder, self._approvals, self._tools)
        try:
            session = await self._backend(run.backend).start_session(host)
        except AgentError as exc:
            return RunOutcome.FAILED, RunStatus.FAILED, str(exc)
        run.session = session
        if run.end_reason is not None:
            return run.end_reason, run.end_status or RunStatus.STOPPED, run.end_error
        max_turns = settings.agent.max_turns
        turn = 0
        while True:
            turn += 1
            run.turn_count = turn
            run.status = RunStatus.STREAMING_TURN
            self._dirty = True
            text = prompt if turn == 1 else self._continuation_prompt(run, turn, max_turns)
            result = await self._run_turn(run, session, text, continuation=turn > 1)
            self._recorder.persist_tokens(run)
            if run.end_reason is not None:
                return run.end_reason, run.end_status or RunStatus.STOPPED, run.end_error
            if run.approval_timed_out:
                return RunOutcome.FAILED, RunStatus.FAILED, run.approval_timed_out
            if result.status is TurnStatus.INTERRUPTED:
                return RunOutcome.CANCELLED, RunStatus.INTERRUPTED, result.error or "interrupted"
            if result.status is not TurnStatus.COMPLETED:
                return RunOutcome.FAILED, RunStatus.FAILED, result.error or result.status.value
            try:
                fresh = await self.tracker.fetch_issue_states_by_ids([issue.id])
            except TrackerError as exc:
                if exc.retry_at is None:
                    return RunOutcome.FAILED, RunStatus.FAILED, f"issue state refresh failed: {exc}"
                # The turn went well; only the tracker is rate limited. A normal exit: the
                # continuation retry waits for the reset and resumes the thread, instead of
                # a failure backoff that would redo the turn (§14.2 for other errors).
                self._on_tracker_error(exc, "issue state refresh rate limited")
                return RunOutcome.NORMAL, RunStatus.SUCCEEDED, None
            if not fresh:
                return RunOutcome.NORMAL, RunStatus.SUCCEEDED, None
            run.issue = fresh[0]
            self.known[issue.id] = fresh[0]
            self._dirty = True
            if not self.settings.tracker.is_active(run.issue.state):
                break
            if turn >= max_turns:
                break
        return RunOutcome.NORMAL, RunStatus.SUCCEEDED, None

    def _continuation_prompt(self, run: Run, turn: int, max_turns: int) -> str:
        template = self.settings.agent.continuation_prompt or DEFAULT_CONTINUATION
        try:
            return template.format(
                identifier=run.issue.identifier,
                title=run.issue.title,
                state=run.issue.state,
                turn=turn,
                max_turns=max_turns,
            )
        except (KeyError, IndexError, ValueError):
            return template

    async def _run_turn(
        self, run: Run, session: AgentSession, text: str, *, continuation: bool
    ) -> TurnResult:
        """One turn under ``codex.turn_timeout_ms`` (the deadline applies to every backend)."""
        turn_task = asyncio.ensure_future(session.run_turn(text, continuation=continuation))
        timeout_s = self.settings.codex.turn_timeout_ms / 1000

        def on_deadline() -> None:
            if not turn_task.done():
                self._end_run_early(
                    run,
                    RunOutcome.FAILED,
                    RunStatus.TIMED_OUT,
                    f"turn timed out after {timeout_s:g}s",
                )
                turn_task.cancel()

        timer = self.clock.call_later(timeout_s, on_deadline)
        try:
            return await turn_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return TurnResult(TurnStatus.FAILED, error=run.end_error or "turn cancelled")
        except AgentError as exc:
            return TurnResult(TurnStatus.FAILED, error=str(exc))
        finally:
            timer.cancel()

    async def _cleanup_attempt(self, run: Run, status: RunStatus, error: str | None) -> None:
        self._approvals.cancel(run)
        if run.session is not None:
            try:
                await asyncio.wait_for(run.session.close(), timeout=SESSION_CLOSE_TIMEOUT_S)
            except (TimeoutError, Exception) as exc:
                self._log(
                    "warning", "session close failed", error=str(exc), **_issue_fields(run.issue)
                )
        if run.workspace is None:
            return
        hook = await self.workspaces.run_hook("after_run", run.workspace, run.issue)
        if hook is not None:
            self._emit_hook(run, hook)
        self._recorder.persist_tokens(run)
        try:
            update_manifest(
                run.workspace,
                "run",
                attempt=run.attempt,
                status=status.value,
                ended_at=self.clock.now().isoformat(),
                error=error,
                turn_count=run.turn_count,
                tokens=run.tokens.model_dump(),
                last_event=run.last_event,
            )
            update_manifest(run.workspace, "issue", state=run.issue.state)
        except OSError as exc:
            self._log("warning", "manifest write failed", error=str(exc))
        if run.cleanup_workspace:
            try:
                await self.workspaces.remove(run.issue.identifier)
            except Exception as exc:
                self._log("warning", "workspace removal failed", error=str(exc))

    def _finish(self, run: Run, outcome: RunOutcome, status: RunStatus, error: str | None) -> None:
        """Bookkeeping when a worker ends (§16.6): retry, release or hold."""
        issue = run.issue
        if self.running.get(issue.id) is run:
            del self.running[issue.id]
        self._ended_seconds += max(0.0, self.clock.monotonic() - run.started_mono)
        self._last_change_mono = self.clock.monotonic()
        self._dirty = True
        self._emit_system(
            EventKind.RUN_ENDED,
            f"{issue.identifier} ended: {status.value}" + (f" ({error})" if error else ""),
            issue=issue,
            outcome=outcome.value,
            status=status.value,
            error=error,
        )
        self._log(
            "info" if outcome is RunOutcome.NORMAL else "warning",
            "run ended",
            **_issue_fields(issue),
            session_id=run.session_id,
            outcome=outcome.value,
            status=status.value,
            error=error,
        )
        if not self._stopping:
            if outcome is RunOutcome.NORMAL:
                if issue.identifier not in self.completed:
                    self.completed.append(issue.identifier)
                    del self.completed[:-MAX_COMPLETED]
                if self.settings.tracker.is_active(issue.state):
                    self._schedule_retry(
                        issue, 1, policy.CONTINUATION_RETRY_MS, error=None, continuation=True
                    )
                # else: the worker saw the issue leave its active states after the last turn;
                # a continuation retry would only re-fetch candidates to release the claim.
            elif outcome is RunOutcome.FAILED:
                attempt = (run.attempt or 0) + 1
                delay = policy.failure_backoff_ms(attempt, self.settings.agent.max_retry_backoff_ms)
                self._schedule_retry(issue, attempt, delay, error=error)
            elif outcome in (RunOutcome.CANCELLED, RunOutcome.STOPPED):
                # The operator ended it: hold the issue until they rerun it or the tracker
                # shows a change, so it is not re-dispatched on the next tick.
                self.held.hold(issue, run.workspace)
        self._refresh_recovered()

    # ------------------------------------------------------------------ retries

    def _schedule_retry(
        self,
        issue: Issue,
        attempt: int,
        delay_ms: int,
        *,
        error: str | None,
        continuation: bool = False,
    ) -> None:
        self._cancel_retry(issue.id)
        token = next(self._retry_tokens)
        due = self.clock.now() + timedelta(milliseconds=delay_ms)
        entry = RetryEntry(
            issue_id=issue.id,
            identifier=issue.identifier,
            attempt=attempt,
            due_at=due,
            error=error,
            continuation=continuation,
        )
        timer = self.clock.call_later(
            delay_ms / 1000,
            lambda: self._spawn(self._on_retry_timer(issue.id, token), name="retry"),
        )
        self.retrying[issue.id] = _Retry(entry=entry, issue=issue, token=token, timer=timer)
        self._dirty = True
        if not continuation:
            self._emit_system(
                EventKind.RETRY_SCHEDULED,
                f"retry {attempt} of {issue.identifier} in {delay_ms / 1000:g}s"
                + (f": {error}" if error else ""),
                issue=issue,
                attempt=attempt,
                delay_ms=delay_ms,
            )

    async def _on_retry_timer(self, issue_id: str, token: int) -> None:
        """Retry timer fired (§8.4, §16.6). A stale token means the entry was replaced."""
        retry = self.retrying.get(issue_id)
        if retry is None or retry.token != token or self._stopping:
            return
        del self.retrying[issue_id]
        self._dirty = True
        self._recheck_workflow()  # a retry is a dispatch too (spec §6.2: re-check before it)
        try:
            candidates = await self.tracker.fetch_candidate_issues()
        except TrackerError as exc:
            self._on_tracker_error(exc, "retry poll failed")
            if exc.retry_at is not None:
                # Rate limited: wait for the stated reset without using up an attempt.
                wait = (exc.retry_at - self.clock.now()).total_seconds()
                self._schedule_retry(
                    retry.issue,
                    retry.entry.attempt,
                    max(1000, int(wait * 1000)),
                    error=f"tracker rate limited until {exc.retry_at:%H:%M:%S}",
                    continuation=retry.entry.continuation,
                )
                return
            delay = policy.failure_backoff_ms(
                retry.entry.attempt + 1, self.settings.agent.max_retry_backoff_ms
            )
            self._schedule_retry(
                retry.issue, retry.entry.attempt + 1, delay, error="retry poll failed"
            )
            return
        if self.retrying.get(issue_id) is not None or issue_id in self.running:
            return  # something else claimed it while we were fetching
        issue = next((i for i in candidates if i.id == issue_id), None)
        settings = self.settings
        if issue is None or not self._is_eligible(issue, settings, for_retry=True):
            self._release(issue_id, "no longer eligible")
            return
        if self.dispatch_paused:
            # The operator paused dispatch: wait without using up a retry attempt.
            self._schedule_retry(
                issue,
                retry.entry.attempt,
                self.settings.polling.interval_ms,
                error="dispatch paused by operator",
                continuation=retry.entry.continuation,
            )
            return
        if not self._slots_free(issue, settings):
            delay = policy.failure_backoff_ms(
                retry.entry.attempt + 1, settings.agent.max_retry_backoff_ms
            )
            self._schedule_retry(issue, retry.entry.attempt + 1, delay, error=policy.NO_SLOTS_ERROR)
            return
        self._dispatch(issue, attempt=retry.entry.attempt)

    def _cancel_retry(self, issue_id: str) -> _Retry | None:
        """Drop the issue's retry entry, if any, and cancel its timer; returns the entry."""
        retry = self.retrying.pop(issue_id, None)
        if retry is not None:
            retry.timer.cancel()
        return retry

    def _release(self, issue_id: str, why: str) -> None:
        self._cancel_retry(issue_id)
        self._last_change_mono = self.clock.monotonic()
        self._dirty = True
        issue = self.known.get(issue_id)
        self._log("info", "claim released", issue_id=issue_id, reason=why)
        if issue is not None and issue.identifier not in self.completed:
            self._emit_system(
                EventKind.RECONCILE, f"released {issue.identifier}: {why}", issue=issue
            )

    # ------------------------------------------------------------------ reconcile

    async def _reconcile(self) -> None:
        """Stall detection, then tracker-state refresh of running issues (§8.5)."""
        settings = self.settings
        stall_ms = settings.codex.stall_timeout_ms
        now = self.clock.monotonic()
        if stall_ms > 0:
            for run in list(self.running.values()):
                if run.waiting_for_operator or run.end_reason is not None:
                    continue
                idle_s = now - run.last_event_mono
                if idle_s * 1000 > stall_ms:
                    why = (
                        f"stalled: the model was unreachable for {idle_s:.0f}s "
                        f"({run.last_message or 'retrying'})"
                        if run.status is RunStatus.RETRYING_MODEL
                        else f"stalled: no agent event for {idle_s:.0f}s"
                    )
                    self._stop_run(run, RunOutcome.FAILED, RunStatus.STALLED, why)
        ids = [i for i, r in self.running.items() if r.end_reason is None]
        if not ids:
            return
        try:
            fresh = await self.tracker.fetch_issue_states_by_ids(ids)
        except TrackerError as exc:
            self._on_tracker_error(exc, "running-issue refresh failed; workers kept")
            return
        by_id = {i.id: i for i in fresh}
        for issue_id in ids:
            run = self.running.get(issue_id)
            if run is None or run.end_reason is not None:
                continue
            issue = by_id.get(issue_id)
            if (
                issue is not None
                and run.agent_moved_state is not None
                and issue.state.strip().lower() == run.agent_moved_state.strip().lower()
            ):
                # The agent moved its own issue: the worker sees it when the turn ends.
                run.issue = issue
                self.known[issue_id] = issue
                continue
            if issue is None:
                self._stop_run(
                    run,
                    RunOutcome.RECONCILED,
                    RunStatus.CANCELED_BY_RECONCILIATION,
                    "issue no longer returned by the tracker",
                )
            elif settings.tracker.is_terminal(issue.state):
                run.issue = issue
                run.cleanup_workspace = True
                self._stop_run(
                    run,
                    RunOutcome.RECONCILED,
                    RunStatus.CANCELED_BY_RECONCILIATION,
                    f"issue moved to terminal state {issue.state}",
                )
            elif not settings.tracker.is_active(issue.state):
                run.issue = issue
                self._stop_run(
                    run,
                    RunOutcome.RECONCILED,
                    RunStatus.CANCELED_BY_RECONCILIATION,
                    f"issue moved to non-active state {issue.state}",
                )
            else:
                run.issue = issue
                self.known[issue_id] = issue
        self._dirty = True

    def _end_run_early(
        self, run: Run, outcome: RunOutcome, status: RunStatus, error: str | None
    ) -> None:
        if run.end_reason is None:
            run.end_reason, run.end_status, run.end_error = outcome, status, error

    def _stop_run(self, run: Run, outcome: RunOutcome, status: RunStatus, error: str) -> None:
        """End a worker now: its task is cancelled and its session closed (process group
        killed) by the worker's cleanup."""
        self._end_run_early(run, outcome, status, error)
        self._emit_system(
            EventKind.RECONCILE, f"stopping {run.identifier}: {error}", issue=run.issue
        )
        if run.task is not None and not run.task.done():
            run.task.cancel()

    # ------------------------------------------------------------------ session callbacks, hooks

    def _agent_moved(self, run: Run, moved: Issue) -> None:
        """The agent moved its own issue with the tracker tool (``run.issue`` is ``moved``)."""
        self.known[moved.id] = moved
        self._dirty = True
        self._emit_system(
            EventKind.TRACKER,
            f"{moved.identifier} moved to {moved.state} by the agent",
            issue=moved,
        )

    def _emit_hook(self, run: Run, hook: Any) -> None:
        state = "ok" if hook.ok else ("timed out" if hook.timed_out else f"exit {hook.exit_code}")
        self._emit_system(
            EventKind.HOOK,
            f"{hook.name}: {state} in {hook.duration_ms} ms",
            issue=run.issue,
            hook=hook.name,
            ok=hook.ok,
            exit_code=hook.exit_code,
            output=hook.output[-2000:],
        )
        if run.workspace is not None:
            with contextlib.suppress(OSError):
                update_manifest(run.workspace, "run", **{f"hook_{hook.name}": state})

    # ------------------------------------------------------------------ commands

    async def send(self, command: Command) -> CommandResult:
        """Apply an operator command (DESIGN.md "Operator commands"). ``issue_id`` fields
        also accept an issue identifier (``ABC-12``), as the HTTP API's paths do."""
        return await self._commands.apply(command)

    # ------------------------------------------------------------------ front-end port

    def snapshot(self) -> Snapshot:
        now_mono = self.clock.monotonic()
        if self._snapshot is None or self._dirty or now_mono - self._snapshot_mono >= 0.5:
            self._snapshot = self._build_snapshot()
            self._snapshot_mono = now_mono
            self._dirty = False
        return self._snapshot

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        return self.events.since(seq, limit=limit, issue_id=issue_id)

    def _build_snapshot(self) -> Snapshot:
        return build_snapshot(
            now=self.clock.now(),
            now_mono=self.clock.monotonic(),
            settings=self.settings,
            workflow_path=str(self.store.current.path),
            started_at=self.started_at,
            known=self.known,
            running=self.running,
            retries=[r.entry for r in self.retrying.values()],
            held=self.held,
            completed=self.completed,
            ledger=self.ledger,
            ended_seconds=self._ended_seconds,
            rate_limits=self.rate_limits,
            recovered=self.recovered,
            dispatch_paused=self.dispatch_paused,
            config_error=self.config_error,
            tracker_error=self.tracker_error,
            tracker_paused_until=self.tracker_paused_until,
            last_poll_at=self.last_poll_at,
            next_poll_at=self.next_poll_at,
        )

    # ------------------------------------------------------------------ helpers

    def _refresh_recovered(self) -> None:
        try:
            self.recovered = tuple(self.workspaces.recover())
        except Exception as exc:
            self._log("warning", "workspace recovery scan failed", error=str(exc))
        self._dirty = True

    def _on_workflow_changed(self) -> None:
        self._on_workflow_reloaded()

    def _recheck_workflow(self) -> None:
        """Re-read WORKFLOW.md before dispatching, in case a watch event was missed
        (spec §6.2). A new good version or a new error is announced like a watched change."""
        before = self.store.error
        if self.store.reload_if_changed() or self.store.error != before:
            self._on_workflow_reloaded()

    def _on_workflow_reloaded(self) -> None:
        error = self.store.error
        blocking = validate_dispatch(self.settings)
        self.config_error = "; ".join(e for e in (*blocking, error) if e) or None
        if error:
            self._emit_system(
                EventKind.CONFIG, f"WORKFLOW.md reload failed, keeping last good: {error}"
            )
        else:
            self._emit_system(EventKind.CONFIG, "WORKFLOW.md reloaded")
            self._schedule_next_tick()
        self._dirty = True

    def _changed(self) -> None:
        """Something a snapshot shows changed: the next ``snapshot()`` rebuilds."""
        self._dirty = True

    def _emit_system(
        self, kind: EventKind, message: str, *, issue: Issue | None = None, **data: Any
    ) -> None:
        self.events.append(
            AgentEvent(
                kind=kind,
                message=message,
                issue_id=issue.id if issue else None,
                issue_identifier=issue.identifier if issue else None,
                at=self.clock.now(),
                data={k: v for k, v in data.items() if v is not None},
            )
        )
        self._dirty = True

    def _log(self, level: str, msg: str, **fields: Any) -> None:
        log_kv(log, level, msg, **fields)

    def _spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str, track: bool = True
    ) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        if track:
            self._tasks.add(task)
            task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("background task %s failed: %s", task.get_name(), exc, exc_info=exc)
            self._emit_system(EventKind.ERROR, f"{task.get_name()} failed: {exc}")


def _issue_fields(issue: Issue) -> dict[str, str]:
    return {"issue_id": issue.id, "issue_identifier": issue.identifier}


def _hook_error(hook: Any) -> str:
    why = "timed out" if hook.timed_out else f"exit code {hook.exit_code}"
    return f"hook {hook.name} failed ({why})"
