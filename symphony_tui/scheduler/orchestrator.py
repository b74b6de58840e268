"""The scheduling loop (spec §7, §8, §16; docs/architecture.md): one task that takes the
inputs of one inbox, one at a time, and applies each to the scheduler state.

- ``state.SchedulerState`` owns what the scheduler knows; its methods are the only mutators.
- ``inbox.Inbox`` holds the typed inputs: a control lane (operator commands, approvals),
  served first, and a main lane (agent traffic, tick steps and tracker results, due
  retries, ended workers, reloads) in arrival order.
- Tracker calls, sessions and workspace work never run in the loop: a tick is a task that
  fetches and posts each result (``TickStarted`` -> ``RunningStates`` -> ``Candidates`` ->
  ``TickEnded``); a worker (``worker.Worker``) runs its attempt, posts what happens to its
  run (``RunUpdated``, ``TurnStarted``, ``HookRan``...) and returns an ``Ending``, posted
  as ``WorkerEnded``.
- The rules live by concept: ``dispatch`` (eligibility, slots, dispatch), ``retries``
  (retry entries, what follows a run's end), ``reconcile`` (stalls, tracker refresh),
  ``commands`` (operator commands), ``manifests`` (every manifest write), ``approvals``,
  ``session_events`` (what sessions report), ``snapshots`` (pure snapshot building).

Tick (§8.1): reconcile running issues -> re-check the workflow -> validate -> fetch
candidates -> sort -> dispatch while slots are free. Tick cycles never overlap. Front ends
read :meth:`snapshot` and :meth:`events_since` and call :meth:`send` (``SchedulerPort``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from symphony_tui.agents.base import AgentBackend
from symphony_tui.config.settings import Settings
from symphony_tui.config.store import WorkflowStore
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.domain import AgentEvent, EventKind, Snapshot
from symphony_tui.domain.audit import AuditEntry
from symphony_tui.domain.commands import Command, StopScheduler
from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
from symphony_tui.domain.payloads import LinkChanged
from symphony_tui.hosts.ssh import HostTargets
from symphony_tui.scheduler import workspace_view
from symphony_tui.scheduler.adoption import (
    Leftover,
    adopt_host_leftovers,
    adopt_leftovers,
    end_host_leftover,
    take_over_servers,
)
from symphony_tui.scheduler.agent_tools import AgentTools
from symphony_tui.scheduler.approvals import ApprovalDesk
from symphony_tui.scheduler.audit import AuditLog, local_operator
from symphony_tui.scheduler.clock import Clock, RealClock
from symphony_tui.scheduler.commands import OperatorCommands
from symphony_tui.scheduler.dispatch import Dispatcher
from symphony_tui.scheduler.feedback import Feedback
from symphony_tui.scheduler.heap_freeze import HeapFreezer
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.inbox import (
    AgentTraffic,
    ApprovalAsked,
    ApprovalExpired,
    ApprovalsCancelled,
    ApprovalWithdrawn,
    AttemptEnded,
    Barrier,
    BudgetCheck,
    Candidates,
    CommandDone,
    FeedbackHold,
    FeedbackReady,
    HoldsFound,
    HookRan,
    HostFailed,
    HostLeftovers,
    HostProbed,
    Inbox,
    Input,
    IssueMoved,
    IssueRefreshed,
    MoveIntended,
    OperatorCommand,
    PullRequestsRead,
    Recovered,
    Reload,
    RescanDue,
    ResourcesSampled,
    RetryDue,
    RetryFetched,
    RunningStates,
    RunNoted,
    RunUpdated,
    RunWorkspaceRemoved,
    SessionClosed,
    SessionFacts,
    SessionOpened,
    SystemNoted,
    Tick,
    TickEnded,
    TickStarted,
    TrackerFailed,
    TurnEnded,
    TurnStarted,
    WorkerEnded,
    WorkspaceReady,
    WorkspaceRemoved,
    reply,
    reply_of,
)
from symphony_tui.scheduler.lifecycle import (
    close_clients,
    close_records,
    kill_agent_groups,
    restore_usage,
    stop_workers,
)
from symphony_tui.scheduler.notify_hook import watch_for_hook
from symphony_tui.scheduler.polling import Polling
from symphony_tui.scheduler.port import CommandResult, SchedulerPort, TranscriptGap
from symphony_tui.scheduler.posture import ControlSurface
from symphony_tui.scheduler.recovered_scans import RecoveredScans
from symphony_tui.scheduler.resources import ResourceSampler, apply_sample
from symphony_tui.scheduler.retries import Retries
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.startup import (
    HostArrivals,
    reap_leftovers,
    sweep_terminal_workspaces,
)
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.scheduler.usage.ledger import UsageLedger
from symphony_tui.scheduler.worker import Backends, WorkerContext
from symphony_tui.trackers.base import Tracker
from symphony_tui.workspaces.hooks import KILL_GRACE_S
from symphony_tui.workspaces.manager import WorkspaceManager

log = logging.getLogger("symphony_tui.scheduler")

SESSION_CLOSE_TIMEOUT_S = 10.0
SHUTDOWN_TIMEOUT_S = 20.0
#: Seconds the worker wait of shutdown leaves past a hook's shutdown grace and its group's
#: SIGTERM-to-SIGKILL wait (a worker's after_run starts after its agent was stopped).
SHUTDOWN_MARGIN_S = 5.0
#: Inputs handled before the loop lets other tasks run (readers, the API, the console).
LOOP_BATCH = 64
#: The same while the inbox is busy (``Inbox.busy``): every flooding session's reader gets
#: a turn of the loop between two of the loop's, so the loop takes more per turn to keep up.
BUSY_LOOP_BATCH = 256

BackendFactory = Callable[[str], AgentBackend]


class StartupError(Exception):
    """Start-up validation failed (spec §6.3): the service must not start."""


class Orchestrator(SchedulerPort):
    """The loop and its public face (``SchedulerPort``): see the module docstring.

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
        event_log: EventHistory | None = None,
        watch_workflow: bool = True,
        usage: UsageLedger | None = None,
        audit: AuditLog | None = None,
        freeze_heap: bool = False,
    ) -> None:
        self.store = store
        self.tracker = tracker
        self.workspaces = workspaces
        self.clock: Clock = clock or RealClock()
        self.events = event_log or EventHistory()
        self.audit = audit or AuditLog()
        self._watch_workflow = watch_workflow
        #: Set once the WORKFLOW.md watcher is armed (edits before that are caught by the
        #: check at arming time and by the re-check before each dispatch).
        self.watch_ready = asyncio.Event()

        #: The agent backends by name, each made on first use.
        self.backends = Backends(backends)
        self._inbox = Inbox()
        self._loop_gone = False
        self._tasks: set[asyncio.Task] = set()
        #: Freezes each run's long-lived objects (``scheduler/heap_freeze.py``; the real
        #: scheduler process only: it changes the collector for the whole process).
        self.heap: HeapFreezer | None = (
            HeapFreezer(quiet=lambda: not self._inbox.busy) if freeze_heap else None
        )
        # The parts, by concept; each holds this orchestrator as its mailbox (post, ask,
        # spawn: ``mailbox.Mailbox``) and none of them imports this module.
        state = self.state = SchedulerState(store, self.clock, self.events, workspaces)
        state.usage = usage
        for identifier in self.events.completed_before:  # done in an earlier life
            state.mark_completed(identifier)
        self.retries = Retries(state, self)
        self._worker_ctx = WorkerContext(
            state=state,
            tracker=tracker,
            workspaces=workspaces,
            backends=self.backends,
            agent_tools=AgentTools(tracker, self),
            mailbox=self,
            inbox=self._inbox,
            heap=self.heap,
        )
        self.dispatcher = Dispatcher(state, self.retries, self._worker_ctx)
        self._approvals = ApprovalDesk(state, self)
        self._scans = RecoveredScans(state, workspaces, self)
        self._commands = OperatorCommands(
            state,
            dispatcher=self.dispatcher,
            retries=self.retries,
            approvals=self._approvals,
            tracker=tracker,
            workspaces=workspaces,
            scans=self._scans,
            mailbox=self,
        )
        self.polling = Polling(state, store, tracker, self.dispatcher, self)
        #: Pull request links and the reactions to their feedback (scheduler/feedback.py).
        self.feedback = Feedback(
            state,
            tracker,
            self,
            self.audit,
            dispatch=self.dispatcher.dispatch_feedback,
            send=self.send,
        )
        self._loop_task: asyncio.Task | None = None
        self._stopped = asyncio.Event()

    # ------------------------------------------------------------------ state, read-only

    @property
    def settings(self) -> Settings:
        return self.store.current.settings

    def serve_controls(self, surface: ControlSurface | None) -> None:
        """The control API now served (None: none); runs dispatched from now on say so in
        their posture (scheduler/posture.py). Called on the loop's thread."""
        self.state.posture.control = surface

    def on_stop_command(self, stop: Callable[[str], None] | None) -> None:
        """How a ``stop_scheduler`` command (``StopScheduler``) ends this process: ``stop``
        is called once, on the loop, with who sent it (``user@host via HTTP API from ...``), and must
        start the same graceful shutdown as ``symphony-tui stop`` (the CLI sends itself
        SIGTERM). None: the command is refused."""
        self._commands.stop_process = stop

    running = property(lambda self: self.state.running, doc="Issue id -> live run.")
    retrying = property(lambda self: self.state.retrying, doc="Issue id -> retry entry.")
    held = property(lambda self: self.state.held, doc="Operator holds (issue ids).")
    known = property(lambda self: self.state.known, doc="Issue id -> last seen issue.")
    completed = property(lambda self: self.state.completed, doc="Identifiers, oldest first.")
    ledger = property(lambda self: self.state.ledger, doc="Token totals (TokenLedger).")
    usage = property(lambda self: self.state.usage, doc="The usage ledger, or None.")
    recovered = property(lambda self: self.state.recovered, doc="Recovered workspaces.")
    dispatch_paused = property(lambda self: self.state.dispatch_paused)
    ticks = property(lambda self: self.state.ticks, doc="Finished tick cycles.")
    next_poll_at = property(lambda self: self.state.next_poll_at)
    rate_limits = property(lambda self: self.state.rate_limits)

    @property
    def stopped(self) -> bool:
        """True once :meth:`shutdown` finished."""
        return self._stopped.is_set()

    @property
    def idle(self) -> bool:
        """Nothing running or retrying, and the newest finished tick came after the last
        change and found nothing to dispatch (``--exit-when-idle``)."""
        return self.state.idle

    @property
    def problems(self) -> tuple[str | None, str | None]:
        """(config error, tracker error) as the next snapshot will show them, without
        building one (a snapshot at 200 workers costs milliseconds)."""
        return self.state.config_error, self.state.tracker_error

    @property
    def tracker_refused(self) -> bool:
        """True while the tracker's newest answer refused the credentials (HTTP 401)."""
        return self.state.tracker_refusals > 0

    @property
    def needs_tick_for_idle(self) -> bool:
        """True when idleness cannot be decided until another tick runs."""
        return self.polling.needs_tick_for_idle

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Validate, end leftover agents of a crashed scheduler, sweep terminal
        workspaces (and list again the terminal issues done in an earlier life), start
        watching the workflow, tick now.

        Raises :class:`StartupError` when dispatch validation fails (spec §6.3, §16.1).
        """
        errors = validate_dispatch(self.settings)
        if errors:
            raise StartupError("; ".join(errors))
        self._ensure_loop()
        if self.state.usage is not None:
            await restore_usage(self.state, self.state.usage)
        self.state.mark_started()
        self.state.log("info", "scheduler starting", workflow=str(self.store.current.path))
        await reap_leftovers(self.state)  # before any dispatch: no issue runs twice
        # Workspaces under the keys of earlier releases move to their collision-safe keys
        # before anything looks them up (§4.2); none is deleted.
        for old, new in await asyncio.to_thread(self.state.workspaces.carry_over_all):
            self.state.log("info", "workspace carried over", old=old, new=new)
        # Agents a crashed scheduler left working: claimed again (or ended) before the
        # sweep and any dispatch (scheduler/adoption.py).
        await adopt_leftovers(self.state, self.tracker, self.dispatcher.adopt)
        try:
            backend = self.backends.get(self.settings.agent.backend)
        except Exception as exc:  # its first dispatch says it again, on the run
            self.state.log("warning", "agent backend unavailable at start-up", error=str(exc))
        else:
            await take_over_servers(self.state, backend)
        terminal = await sweep_terminal_workspaces(self.state, self.tracker, hosts=False)
        # Issues done in an earlier life (the history file) and terminal now are listed as
        # they were before the restart: no candidate fetch returns them.
        done = set(self.state.completed)
        for issue in terminal.values():
            if issue.identifier in done:
                self.state.remember(issue)
        # Worker hosts are reached in the background: nothing here, nor the
        # first tick, waits for one that cannot be reached.
        self.dispatcher.probes.start(HostArrivals(self.state, terminal, self).reached)
        self.refresh_recovered()
        self.state.restore_holds()
        if self._watch_workflow:
            self.spawn(
                self.store.watch(lambda: self._inbox.post(Reload()), ready=self.watch_ready),
                name="workflow-watch",
            )
        self.spawn(watch_for_hook(self.snapshot, lambda: self.settings), name="notify-watch")
        sampler = ResourceSampler(self.state, self.post, HostTargets(lambda: self.settings))
        if self.settings.worker.resource_sample_ms > 0:
            # This machine's memory is known before the first dispatch (posted ahead of
            # the first tick, so admission by memory holds from the start).
            await sampler.post_one()
        self.spawn(sampler.run(wait_first=True), name="resource-sampler")
        if self.feedback.pulls is not None:
            self.spawn(self.feedback.watch(), name="pull-request-watch")
        if self.heap is not None:
            self.heap.watch()  # freeze after full collections too (the console's caches)
        self.request_refresh()

    async def run(self) -> None:
        """Start and keep running until :meth:`shutdown` (the console's runner)."""
        await self.start()
        await self._stopped.wait()

    async def shutdown(self, reason: str | None = None) -> None:
        """Stop every worker (process groups killed), cancel timers, close clients. Hooks
        running or started meanwhile each end ``hooks.shutdown_grace_ms`` after their own
        start (one running now: after now; their process groups ended: SIGTERM, 2 s,
        SIGKILL; said in the event log and :attr:`hooks_cut_short`). ``reason``: what
        stopped it (``stopped by SIGTERM``...), for the log."""
        state = self.state
        if state.stopping:
            await self._stopped.wait()
            return
        state.mark_stopping()
        state.log(
            "info", "scheduler stopping", reason=reason or "shut down", running=len(state.running)
        )
        # A hung hook must not hold the exit for its timeout (a hang-up, ``q``, SIGTERM):
        # what runs now or starts during the stop (``after_run``) gets a grace from its start.
        grace_s = self.settings.hooks.shutdown_grace_ms / 1000
        state.workspaces.stop_hooks("scheduler shutdown", grace_s)
        # The worker wait outlasts a late after_run's whole grace and its group's ending.
        timeout = max(SHUTDOWN_TIMEOUT_S, grace_s + KILL_GRACE_S + SHUTDOWN_MARGIN_S)
        await stop_workers(state, self.polling, timeout=timeout)
        await self.barrier()  # the ended workers are applied to the state
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, timeout=2)
        await close_clients(self.backends.made(), self.tracker, SESSION_CLOSE_TIMEOUT_S)
        await self.barrier()
        await close_records(state, timeout=SHUTDOWN_TIMEOUT_S)
        self._stop_loop()
        if self.heap is not None:
            self.heap.close()
        self.events.close()
        self.audit.close()
        state.changed()
        self._stopped.set()

    @property
    def hooks_cut_short(self) -> list[str]:
        """One line per hook the shutdown ended before it finished, for the front ends to
        print on exit (``ABC-1: after_run hook cut short (scheduler shutdown); ...``)."""
        return self.state.workspaces.hooks_cut_short

    def kill_agents_now(self) -> int:
        """Last resort when the event loop is gone (the console crashed): SIGKILL the process
        group of every live agent session, and every detached agent a backend still holds
        (``CodexBackend.kill_detached``). Returns how many groups were signalled."""
        killed = kill_agent_groups(self.state.running.values())
        for backend in self.backends.made():
            kill = getattr(backend, "kill_detached", None)
            if kill is not None:
                killed += kill()
        return killed

    # ------------------------------------------------------------------ front-end port

    async def send(
        self, command: Command, *, who: str | None = None, via: str = "console"
    ) -> CommandResult:
        """Apply an operator command as a control input (docs/architecture.md "The path of one
        operator command") and write it to the audit log (``who``: ``user@host``, default
        this process's user; ``via``: ``console`` or ``HTTP API from <address>``).
        ``issue_id`` fields also accept an issue identifier (``ABC-12``).

        With no other control input waiting, the command is handled at once, by this task:
        the loop is always between two inputs while another task runs (handlers never
        await), so this is exactly the order of the loop taking it next, ahead of all
        queued agent traffic, without a wake-up in between."""
        if self._loop_gone:
            return CommandResult(False, "scheduler stopped")
        answered: asyncio.Future[CommandResult | None] = asyncio.get_running_loop().create_future()
        item = OperatorCommand(command, answered)
        if isinstance(command, StopScheduler):
            self._commands.stop_by = f"{who or local_operator()} via {via}"
        if self._inbox.control_waiting:
            self.post(item, control=True)
        else:
            self._ensure_loop()
            self._handle(item)
        result = await answered
        result = result if result is not None else CommandResult(False, "scheduler stopped")
        self.audit.record_command(
            command,
            result.ok,
            result.message,
            who=who or local_operator(),
            via=via,
            label=self._identifier_of,
            issue=result.issue,
        )
        return result

    def _identifier_of(self, issue: str) -> str:
        """The identifier (``ABC-12``) of issue id ``issue`` when known, else ``issue``."""
        known = self.state.known.get(issue)
        return known.identifier if known is not None else issue

    def snapshot(self) -> Snapshot:
        """The state as an immutable snapshot (``SchedulerState.cached_snapshot``: rebuilt
        when the state changed or half a second passed)."""
        return self.state.cached_snapshot()

    def events_since(
        self, seq: int, *, limit: int = 2000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        return self.events.since(seq, limit=limit, issue_id=issue_id)

    def transcript_gap(self, issue_id: str) -> TranscriptGap:
        events, size = self.events.transcripts.dropped_of(issue_id)
        path = self.events.jsonl_path
        return TranscriptGap(events, size, str(path) if path is not None else None)

    # Workspace diffs and the audit log (the port's read side; scheduler/workspace_view.py).
    async def diff(self, issue: str) -> WorkspaceDiff:
        return await workspace_view.diff_of(self.snapshot(), issue)

    async def diff_file(
        self, issue: str, path: str, *, offset: int = 0, limit: int = 400
    ) -> DiffPage:
        return await workspace_view.file_diff_of(
            self.snapshot(), issue, path, offset=offset, limit=limit
        )

    async def audit_entries(self, limit: int = 500) -> list[AuditEntry]:
        return self.audit.recent(limit)

    async def note_action(self, what: str, **fields: Any) -> AuditEntry:
        """Audit an operator action done outside the scheduler (a shell in a workspace, an
        export): ``fields`` are :meth:`AuditLog.record`'s (``who`` defaults to this user)."""
        fields.setdefault("who", local_operator())
        return self.audit.record(what, **fields)

    # ------------------------------------------------------------------ inputs from outside

    def request_refresh(self) -> None:
        """Poll and reconcile as soon as possible (coalesced with a running tick)."""
        if not self.state.stopping:
            self.post(Tick())

    async def tick(self) -> None:
        """Run one poll-and-dispatch cycle (§8.1) and wait for it; when one is already
        running, another follows it and this returns at once. Never raises."""
        await self.ask(Tick())

    async def retry_due(self, issue_id: str, token: int) -> None:
        """What a retry timer does (``RetryDue``), waited for until its fetch is applied."""
        task = await self.ask(RetryDue(issue_id, token))
        if task is not None:
            await task

    async def reconcile(self) -> None:
        """Reconcile running issues now (§8.5: stalls, then a tracker refresh)."""
        ids = await self.ask(TickStarted())
        await self.polling.apply_running_states(ids or [])

    async def barrier(self) -> None:
        """Wait until every input posted before this call was handled and the manifest
        writes made until then are on disk (``WorkspaceManager.manifests``)."""
        await self.ask(Barrier())
        await self.workspaces.manifests.flush()

    def refresh_recovered(self) -> None:
        """Rescan workspaces left by earlier runs (shown as recovered), now. A background
        rescan still running is then outdated: its result is dropped."""
        self._scans.now()

    # ------------------------------------------------------------------ the loop

    def _ensure_loop(self) -> None:
        if self._loop_task is None and not self._loop_gone:
            self._loop_task = asyncio.get_running_loop().create_task(
                self._loop(), name="scheduler-loop"
            )

    def _stop_loop(self) -> None:
        self._loop_gone = True
        if self._loop_task is not None:
            self._loop_task.cancel()
        for item in self._inbox.drop_all():
            reply(reply_of(item), None)

    # ------------------------------------------------------------------ the parts' mailbox

    def post(self, item: Input, *, control: bool = False) -> None:
        """Queue ``item`` for the loop (``mailbox.Mailbox``)."""
        if self._loop_gone:
            reply(reply_of(item), None)
            return
        self._ensure_loop()
        (self._inbox.post_control if control else self._inbox.post)(item)

    async def ask(self, item: Any, *, control: bool = False) -> Any:
        """Post ``item`` with a reply future and wait for the handler's result."""
        if self._loop_gone:
            return None
        item.reply = asyncio.get_running_loop().create_future()
        self.post(item, control=control)
        return await item.reply

    async def _loop(self) -> None:
        try:
            await self._take_inputs()
        finally:
            # Cancelled (shutdown, or the event loop closing under us): nobody will handle
            # what is queued, so nobody may wait for it.
            self._loop_gone = True
            for item in self._inbox.drop_all():
                reply(reply_of(item), None)

    async def _take_inputs(self) -> None:
        inbox = self._inbox
        handled = 0
        while True:
            await inbox.wait()
            item = inbox.take()
            while item is not None:
                self._handle_safely(item)
                handled += 1
                if handled >= (BUSY_LOOP_BATCH if inbox.busy else LOOP_BATCH):
                    handled = 0
                    self._scans.rescan_if_stale()
                    await asyncio.sleep(0)
                item = inbox.take()
            self._scans.rescan_if_stale()

    def _handle_safely(self, item: Input) -> None:
        try:
            self._handle(item)
        except Exception as exc:  # one bad input must never stop the scheduler
            log.exception("scheduler input failed: %s", type(item).__name__)
            self.state.emit_system(EventKind.ERROR, f"scheduler error: {exc}")
            future = reply_of(item)
            if future is not None and not future.done():
                future.set_exception(exc)

    def _apply_ahead(self, run: Run) -> None:
        """Apply ``run``'s queued inputs now, in their order, ahead of every other
        session's queued traffic (``Inbox.take_of``): its approval request is filed right
        after, so it is never applied before what the agent reported before asking."""
        for item in self._inbox.take_of(run):
            self._handle_safely(item)

    def _handle(self, item: Input) -> None:
        """Apply one input to the state (synchronously: a handler never awaits)."""
        state = self.state
        match item:
            case AgentTraffic(run=run, event=event):
                if isinstance(event.payload, LinkChanged):
                    state.run_link(run, event.payload)
                state.recorder.on_event(run, event)
            case SessionFacts(run=run, fields=fields):
                state.recorder.record_session(run, fields)
            # What workers report (inbox.py "what a worker reports").
            case RunUpdated(run=run, status=status, error=error):
                state.run_status(run, status, error)
            case WorkspaceReady(run=run, path=path, resume=resume, created=created):
                state.run_workspace(run, path, resume, created=created, started=item.started)
            case SessionOpened(run=run, session=session, record_group=record_group):
                state.run_session(run, session, record_group=record_group)
            case SessionClosed(run=run):
                state.run_session_closed(run)
            case TurnStarted(run=run, turn=turn, record=record):
                state.run_turn_started(run, turn, record=record)
            case TurnEnded(run=run, reply=answer):
                reply(answer, state.run_turn_ended(run))
            case BudgetCheck(run=run, reply=answer):
                state.check_budget(run)
                reply(answer, run.budget_reached)
            case IssueRefreshed(run=run, issue=issue):
                state.run_issue_seen(run, issue)
            case HookRan(run=run, hook=hook, summary=summary, message=message):
                state.run_hook_ran(run, hook, summary, message, item.payload)
            case RunNoted(run=run, kind=kind, message=message, payload=payload):
                state.emit_system(kind, message, issue=run.issue, payload=payload)
            case HostFailed(run=run, host=host, lost=lost):
                state.run_host_failed(run, host, lost)
            case HostLeftovers(host=host, found=found):
                self._adopt_on_host(host, found)
            case TrackerFailed(error=error, what=what):
                state.tracker_failed(error, what)
            case AttemptEnded(run=run, ending=ending, reply=answer):
                state.run_attempt_ended(run, ending)
                reply(answer, None)
            case RunWorkspaceRemoved(run=run):
                state.hosts.forget(run.issue.id)
            case ApprovalAsked(run=run, request=request, reply=answer):
                self._apply_ahead(run)
                self._approvals.file(run, request, answer)
            case ApprovalExpired(run=run, approval_id=approval_id, timeout_s=timeout_s):
                self._approvals.expired(run, approval_id, timeout_s)
            case ApprovalWithdrawn(run=run, approval_id=approval_id):
                self._approvals.withdrawn(run, approval_id)
            case ApprovalsCancelled(run=run, reply=answer):
                self._approvals.cancel(run)
                reply(answer, None)
            case HostProbed():
                self.dispatcher.probes.probed(item)
            case HoldsFound(workspaces=kept):
                state.restore_holds(kept)
            case SystemNoted(kind=kind, message=message, issue=issue):
                state.emit_system(kind, message, issue=issue)
            case RescanDue():
                self._scans.mark_stale()
            case PullRequestsRead():
                self.feedback.read(item)
            case FeedbackReady():
                self.feedback.ready(item)
            case FeedbackHold():
                self.feedback.hold(item)
            case OperatorCommand(command=command, reply=answer):
                self._commands.receive(command, answer)
            case CommandDone(issue=issue, what=what, result=result, reply=answer):
                self._commands.finish(issue, what, result)
                reply(answer, result)
            case IssueMoved(issue=issue, run=None):
                self._commands.issue_moved(issue)
            case IssueMoved(issue=issue, run=Run() as run):
                state.run_moved_by_agent(run, issue)
                state.remember(issue)
                state.emit_system(
                    EventKind.TRACKER, f"{issue.identifier} moved to {issue.state} by the agent",
                    issue=issue,
                )  # fmt: skip
            case MoveIntended(run=run, state=target, reply=answer):
                reply(answer, state.run_move_intended(run, target))
            case WorkspaceRemoved(key=key, removed=removed, note=note):
                self._commands.workspace_removed(key, removed, note)
            case Tick(reply=answer):
                self.polling.on_tick(answer)
            case TickStarted(reply=answer):
                reply(answer, self.polling.on_started())
            case RunningStates(ids=ids, issues=issues, error=error, reply=answer):
                reply(answer, self.polling.on_running_states(ids, issues, error))
            case Candidates(issues=issues, error=error, started_mono=started, reply=answer):
                self.polling.on_candidates(issues, error, started)
                reply(answer, None)
            case TickEnded():
                self.polling.on_tick_ended()
            case RetryDue(issue_id=issue_id, token=token, reply=answer):
                reply(answer, self.polling.on_retry_due(issue_id, token))
            case RetryFetched(retry=retry, issues=issues, error=error, reply=answer):
                self.dispatcher.retry_fetched(retry, issues, error)
                reply(answer, None)
            case WorkerEnded(run=run, ending=ending):
                self.retries.after_run(run, ending)
                run.release()  # no cycle through it is left
                if self.heap is not None:
                    self.heap.run_ended()
                # One rescan for all the runs that end together, off the loop (it reads
                # every workspace's manifests).
                self._scans.mark_stale()
            case Recovered(workspaces=found, generation=generation):
                self._scans.apply(found, generation)
            case Reload():
                self.polling.on_workflow_reloaded()
            case ResourcesSampled():
                if apply_sample(state, item):
                    self.request_refresh()  # a machine has memory again
            case Barrier(reply=answer):
                reply(answer, None)

    # ------------------------------------------------------------------ tasks

    def _adopt_on_host(self, host: str, found: tuple[Leftover, ...]) -> None:
        """Re-adopt (or end) the detached agents an earlier scheduler left on ``host``."""
        target = HostTargets(lambda: self.settings)(host)

        def end(left: Leftover, why: str) -> None:
            self.spawn(end_host_leftover(self.state, target, left, why), name="end-leftover")

        adopt_host_leftovers(self.state, host, found, self.dispatcher.adopt, end)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task:
        """Run ``coro`` as a tracked task (cancelled at shutdown; a failure is said)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("background task %s failed: %s", task.get_name(), exc, exc_info=exc)
            self.state.emit_system(EventKind.ERROR, f"{task.get_name()} failed: {exc}")
