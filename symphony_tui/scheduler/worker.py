"""The worker of one run attempt (spec §10, §16.5): workspace, hooks, prompt, session and
turns, then cleanup. One asyncio task per run; it *returns* how the attempt ended.

Ending early is a request to the worker (:meth:`Worker.stop`, the ``run.WorkerControl``
the scheduler holds on ``run.worker``): a hard stop cancels the worker now; a graceful one
(an operator interrupt) lets the session end its turn, and a turn deadline cancels only the
turn. A worker already past its session's close (in ``after_run``, the manifest, a
workspace removal) when the scheduler stops is not cancelled: the shutdown's hook cutoff
(workspaces/hooks.py ``HookCutoff``) gives its hook ``hooks.shutdown_grace_ms`` from the
stop, then ends it. In every case the worker returns the requested :class:`~symphony_tui.scheduler.run.Ending`
once its cleanup is done, and the scheduling loop applies it (``retries.Retries.after_run``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentBackend, AgentError, AgentSession, TurnResult, TurnStatus
from symphony_tui.agents.codex.detached import DetachedAgent, kill_pgid
from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.prompt import prompt_repeats, render_prompt, render_prompt_within
from symphony_tui.domain import EventKind, Issue, RunOutcome, RunStatus
from symphony_tui.domain.payloads import HookResult, NoteDelivered
from symphony_tui.scheduler import manifests, policy
from symphony_tui.scheduler.agent_tools import AgentTools
from symphony_tui.scheduler.channel import RunChannel
from symphony_tui.scheduler.clock import Clock, TimerHandle
from symphony_tui.scheduler.heap_freeze import HeapFreezer
from symphony_tui.scheduler.inbox import (
    ApprovalsCancelled,
    AttemptEnded,
    BudgetCheck,
    HookRan,
    HostFailed,
    Inbox,
    InboxFlow,
    IssueRefreshed,
    RunNoted,
    RunUpdated,
    RunWorkspaceRemoved,
    SessionClosed,
    SessionOpened,
    TrackerFailed,
    TurnEnded,
    TurnStarted,
    WorkerEnded,
    WorkspaceReady,
)
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.prompt_inputs import issue_for_prompt
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.state import SchedulerState, TurnReview
from symphony_tui.scheduler.worker_hosts.book import HOST_DOWN_PREFIX
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.hooks import HookResult as HookRun
from symphony_tui.workspaces.manager import WorkspaceManager

log = logging.getLogger("symphony_tui.scheduler")

DEFAULT_CONTINUATION = (
    "Continue working on {identifier}. The issue is still in state '{state}'. This is turn "
    "{turn} of at most {max_turns} in this session; pick up where you left off, and when the "
    "work is done move the issue to its next state."
)

SESSION_CLOSE_TIMEOUT_S = 10.0

_SUCCEEDED = Ending(RunOutcome.NORMAL, RunStatus.SUCCEEDED)


def _failed(error: str) -> Ending:
    return Ending(RunOutcome.FAILED, RunStatus.FAILED, error)


class Backends:
    """The agent backends of one scheduler by name (``agent.backend``): each is made by
    ``factory`` the first time it is asked for (:meth:`get`), then kept."""

    def __init__(self, factory: Callable[[str], AgentBackend]) -> None:
        self._factory = factory
        self._made: dict[str, AgentBackend] = {}

    def get(self, name: str) -> AgentBackend:
        """The backend ``name``; raises what its factory raises (an unknown name)."""
        backend = self._made.get(name)
        if backend is None:
            backend = self._made[name] = self._factory(name)
        return backend

    def made(self) -> list[AgentBackend]:
        """The backends made so far (closed at shutdown)."""
        return list(self._made.values())


@dataclass(frozen=True)
class WorkerContext:
    """What every worker uses: the scheduler ``state`` (read only: the worker changes it
    by posting inputs, ``inbox.py`` "what a worker reports"), the ``tracker``,
    ``workspaces``, the agent ``backends``, the session tools, and the loop's ``mailbox``
    (the main lane for the worker's and its session's reports; ``ask`` waits for the
    loop's reply, None once the loop is gone)."""

    state: SchedulerState
    tracker: Tracker
    workspaces: WorkspaceManager
    backends: Backends
    agent_tools: AgentTools
    mailbox: Mailbox
    #: The loop's inbox, which paces each session's reader (``inbox.InboxFlow``).
    inbox: Inbox
    #: Told once a run's session is open (``HeapFreezer.session_opened``); None: the
    #: collector is left as it is (only the CLI's own process freezes its heap).
    heap: HeapFreezer | None = None


class Worker:
    """Runs one attempt of ``run`` (:meth:`run`); implements ``run.WorkerControl``."""

    def __init__(self, run: Run, ctx: WorkerContext) -> None:
        self._run = run
        self._ctx = ctx
        self._ending: Ending | None = None
        self.task: asyncio.Task | None = None
        self._in_turn = False
        self._queued: list[str] = []  # operator messages for the next turn's prompt
        self._go_on = asyncio.Event()  # a budget hold ends: extended, or a stop request
        self._interrupting: asyncio.Task | None = None
        self._closed = False  # the cleanup is past the session's close (hooks, manifest)
        # The worker's own view of what it posted (the loop applies it to the run later).
        self._workspace: Path | None = run.workspace
        self._session: AgentSession | None = None
        self._host_lost: str | None = None  # the connection to the run's host was lost

    @property
    def stopping(self) -> bool:
        return self._ending is not None

    @property
    def requested(self) -> Ending | None:
        """The ending a stop request asked for (None when none came)."""
        return self._ending

    def stop(self, ending: Ending, *, graceful: bool = False) -> bool:
        taken = self._ending is None
        if taken:
            self._ending = ending
        self._go_on.set()  # a run held by its budget ends now
        if not graceful and not self.sheltered and self.task is not None and not self.task.done():
            self.task.cancel()
        return taken

    @property
    def sheltered(self) -> bool:
        """True when a hard stop must not cancel this worker: the scheduler is stopping
        (the workspaces' hook cutoff is set) and the worker is past its session's close.
        Its cleanup then ends by itself: a hook running or started there has
        ``hooks.shutdown_grace_ms`` from the later of its start and the stop (docs/keys.md
        "Stopping", docs/conformance.md), not cut at once by a cancellation."""
        return self._closed and self._ctx.workspaces.hooks_cutoff.active

    def interrupt_turn(self) -> None:
        session = self._session
        if not self._in_turn or session is None:
            return
        if self._interrupting is None or self._interrupting.done():
            self._interrupting = asyncio.ensure_future(session.interrupt())

    def budget_extended(self) -> None:
        self._go_on.set()

    async def _budget_hold(self) -> Ending | None:
        """While the run is over a token budget (``SchedulerState.check_budget``): wait
        for the operator. The ending to return when they stopped it, else None (go on)."""
        ctx, run = self._ctx, self._run
        state = ctx.state
        if run.budget_reached is None and state.budgets.over(run, state.settings.agent) is None:
            return None  # under every budget: nothing for the loop to record
        # a crossing between turns is caught here
        if await ctx.mailbox.ask(BudgetCheck(run)) is None:
            return self._ending
        ctx.mailbox.post(RunUpdated(run, RunStatus.WAITING_FOR_OPERATOR))
        self._go_on.clear()
        while run.budget_reached is not None and self._ending is None:
            await self._go_on.wait()
            self._go_on.clear()
        if self._ending is not None:
            return self._ending
        ctx.mailbox.post(RunUpdated(run, RunStatus.STREAMING_TURN))
        return None

    async def steer(self, text: str) -> str:
        """Send the operator's ``text`` to the agent: into the turn in flight
        (``AgentSession.steer``), else with the next turn's prompt. Returns what happened
        in words; raises :class:`AgentError` when the backend refused it."""
        session = self._session
        if self._in_turn and session is not None and await session.steer(text):
            self._note(text, queued=False)
            return "sent to the agent in the running turn"
        if self._ending is not None:
            raise AgentError("run_ending", "the run is ending; no turn will follow")
        self._queued.append(text)
        return "queued: it goes with the next turn"

    def _note(self, text: str, *, queued: bool) -> None:
        """The operator's message in the issue's transcript (``NoteDelivered``)."""
        run = self._run
        self._ctx.mailbox.post(
            RunNoted(
                run,
                EventKind.NOTIFICATION,
                f"sent to the agent: {text}",
                NoteDelivered(turn_id=run.turn_id, steered=True, queued=queued),
            )
        )

    def _with_queued(self, prompt: str) -> str:
        """``prompt`` after the operator's queued messages (each then shown as sent)."""
        if not self._queued:
            return prompt
        notes, self._queued = self._queued, []
        for text in notes:
            self._note(text, queued=True)
        said = "\n\n".join(notes)
        return f"A message from the operator:\n{said}\n\n{prompt}"

    async def run(self) -> Ending:
        """The attempt, then its cleanup; returns how it ended. Never raises."""
        ending = _failed("worker ended without an outcome")
        try:
            ending = await self._attempt()
        except asyncio.CancelledError:
            ending = self._ending or Ending(RunOutcome.STOPPED, RunStatus.STOPPED)
        except Exception as exc:
            log.exception("worker crashed")
            ending = _failed(f"worker error: {exc}")
        if self._queued:
            count, self._queued = len(self._queued), []
            self._ctx.mailbox.post(
                RunNoted(
                    self._run,
                    EventKind.WARNING,
                    f"{count} operator message(s) not delivered: the run ended before another turn",
                )
            )
        run = self._run
        if run.worker_host is not None:
            session = self._session
            lost = self._host_lost or run.host_lost or (session.host_lost if session else None)
            if lost and self._ending is None:
                self._host_lost = (
                    lost
                    if isinstance(lost, str) and " " in lost
                    else (f"host {run.worker_host} connection lost")
                )
                ending = _failed(f"{HOST_DOWN_PREFIX}: {self._host_lost}")
                self._ctx.mailbox.post(HostFailed(run, run.worker_host, self._host_lost))
        if ending.outcome is RunOutcome.FAILED:
            # Said now, not once after_run (which may take its whole timeout) is done.
            self._ctx.mailbox.post(RunUpdated(run, ending.status, ending.error))
        try:
            await self._cleanup(ending)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("worker cleanup failed")
        return ending

    async def _attempt(self) -> Ending:
        ctx, run = self._ctx, self._run
        state = ctx.state
        issue = run.issue
        if run.adopting is not None:
            return await self._adopted(run.adopting)
        where = run.worker_host
        try:
            path, created = await ctx.workspaces.ensure(issue, host=where)
        except WorkspaceError as exc:
            if exc.hook is not None:
                self._hook_ran(exc.hook)
            if exc.host_lost:
                self._host_lost = exc.host_lost
            elif where is not None:
                ctx.mailbox.post(HostFailed(run, where))  # no workspace there: go elsewhere
            return _failed(f"workspace: {exc}")
        if where is None:
            resume = manifests.resume_facts(path, run.backend)
        else:
            facts = await asyncio.to_thread(ctx.workspaces.manifests.read, path, "session")
            resume = facts if facts.get("backend") in (None, run.backend) else {}
        self._workspace = path
        ctx.mailbox.post(WorkspaceReady(run, path, resume, created))
        hook = await self._hook("before_run")
        if hook is not None:
            self._hook_ran(hook)
            if not hook.ok:
                if hook.host_lost is not None and where is not None:
                    self._host_lost = hook.host_lost  # the host down path, not a hook failure
                return _failed(_hook_error(hook))
        ctx.mailbox.post(RunUpdated(run, RunStatus.BUILDING_PROMPT))
        current = state.store.current
        try:
            issue = await issue_for_prompt(
                ctx.tracker, issue, current.prompt_template, current.prompt_first_line
            )
        except TrackerError as exc:
            return _failed(f"issue comments for the prompt: {exc}")
        except WorkflowError as exc:
            return _failed(str(exc))
        try:
            workflow = state.store.current
            args = (workflow.prompt_template, issue, run.attempt, workflow.prompt_first_line)
            if prompt_repeats(workflow.prompt_template, workflow.prompt_first_line):
                # Loops over the issue's data: off the loop, within the deadline.
                prompt = await asyncio.to_thread(
                    render_prompt_within, *args, retry_kind=run.retry_kind
                )
            else:
                prompt = render_prompt(*args, retry_kind=run.retry_kind)
        except WorkflowError as exc:
            return _failed(str(exc))
        if run.feedback:
            prompt = f"{run.feedback}\n\n{prompt}"
        ctx.mailbox.post(RunUpdated(run, RunStatus.LAUNCHING_AGENT))
        host = self._host(path, resume)
        try:
            session = await ctx.backends.get(run.backend).start_session(host)
        except AgentError as exc:
            if where is not None and exc.host_lost:
                self._host_lost = str(exc.message)
            elif where is not None and created:
                # nothing of value in a workspace made for this attempt: try another host
                ctx.mailbox.post(HostFailed(run, where))
            return _failed(str(exc))
        self._session = session
        # Its agent's process group is recorded with the run, so a scheduler that starts
        # after a crash ends it.
        ctx.mailbox.post(SessionOpened(run, session, record_group=True))
        if ctx.heap is not None:
            ctx.heap.session_opened()
        if self._ending is not None:
            return self._ending
        stopped = await self._budget_hold()  # an issue already over its budget
        if stopped is not None:
            return stopped
        return await self._turns(session, prompt, 0)

    def _host(self, workspace: Path, resume: dict[str, Any]) -> RunChannel:
        ctx = self._ctx
        return RunChannel(
            self._run,
            workspace,
            resume,
            ctx.agent_tools.specs(),
            ctx.mailbox,
            ctx.agent_tools,
            InboxFlow(ctx.inbox),
        )

    async def _adopted(self, facts: dict[str, Any]) -> Ending:
        """The attempt of a run re-adopted at start-up (scheduler/adoption.py): re-attach
        to the agent an earlier scheduler left running, wait for its turn in flight, then
        go on with the attempt's turns. No ``before_run`` (it ran for this attempt), no new
        thread, no new turn for the one in flight."""
        ctx, run = self._ctx, self._run
        assert self._workspace is not None  # a re-adopted run is claimed with its workspace
        ctx.mailbox.post(WorkspaceReady(run, self._workspace, facts, started=False))
        ctx.mailbox.post(RunUpdated(run, RunStatus.LAUNCHING_AGENT))
        backend = ctx.backends.get(run.backend)
        adopt = getattr(backend, "adopt_session", None)
        agent = DetachedAgent.from_facts(facts.get("agent"))
        if adopt is None or agent is None:
            if agent is not None and agent.host is None:
                await kill_pgid(agent.pgid)  # not re-attached: ended, as the deadline does
            return _failed(f"re-adopt: backend {run.backend} cannot re-attach to its agent")
        try:
            session = await adopt(self._host(self._workspace, facts), agent)
        except AgentError as exc:
            return _failed(f"re-adopt: {exc}")
        self._session = session
        ctx.mailbox.post(SessionOpened(run, session))
        if ctx.heap is not None:
            ctx.heap.session_opened()
        if self._ending is not None:
            return self._ending
        return await self._turns(session, None, run.turn_count, follow=True)

    async def _turns(
        self, session: AgentSession, prompt: str | None, turn: int, *, follow: bool = False
    ) -> Ending:
        """The attempt's turns after ``turn`` turns; ``follow``: the first one is the turn
        in flight the session re-attached to (numbered ``turn``), not a new one."""
        ctx, run = self._ctx, self._run
        state = ctx.state
        issue = run.issue
        seen = issue  # the issue as the last refresh after a turn gave it
        max_turns = state.settings.agent.max_turns
        while True:
            if not follow:
                turn += 1
            ctx.mailbox.post(TurnStarted(run, turn, record=not follow))
            self._in_turn = True
            try:
                if follow:
                    result = await self._run_turn(session, None, continuation=turn > 1)
                else:
                    text = prompt if turn == 1 else self._continuation_prompt(seen, turn, max_turns)
                    result = await self._run_turn(
                        session, self._with_queued(text or ""), continuation=turn > 1
                    )
            finally:
                self._in_turn = False
            follow = False
            # Answered once what the session reported during the turn is applied.
            review: TurnReview | None = await ctx.mailbox.ask(TurnEnded(run))
            if self._ending is not None:
                return self._ending
            if review is None:  # the scheduler's loop is gone
                return Ending(RunOutcome.STOPPED, RunStatus.STOPPED)
            if review.approval_timed_out:
                return _failed(review.approval_timed_out)
            if review.moved_out:
                # The agent moved its held issue out of the active states: the refresh
                # below ends the attempt (``SchedulerState.run_turn_ended``).
                pass
            elif review.held:
                # The budget, not the turn's end, decides (its interrupt ended the turn).
                stopped = await self._budget_hold()
                if stopped is not None:
                    return stopped
            elif result.status is TurnStatus.INTERRUPTED:
                return Ending(
                    RunOutcome.CANCELLED, RunStatus.INTERRUPTED, result.error or "interrupted"
                )
            elif result.status is not TurnStatus.COMPLETED:
                return _failed(result.error or result.status.value)
            try:
                fresh = await ctx.tracker.fetch_issues_by_ids([issue.id])
            except TrackerError as exc:
                if exc.retry_at is None:
                    return _failed(f"issue state refresh failed: {exc}")
                # The turn went well; only the tracker is rate limited. A normal exit: the
                # continuation retry waits for the reset and resumes the thread, instead of
                # a failure backoff that would redo the turn (§14.2 for other errors).
                ctx.mailbox.post(TrackerFailed(exc, "issue state refresh rate limited"))
                return _SUCCEEDED
            if not fresh:
                return _SUCCEEDED
            seen = fresh[0]
            ctx.mailbox.post(IssueRefreshed(run, seen))
            if (
                not state.settings.tracker.is_active(seen.state)
                or not policy.issue_routable(seen, state.settings)
                or turn >= max_turns
            ):
                return _SUCCEEDED

    def _continuation_prompt(self, issue: Issue, turn: int, max_turns: int) -> str:
        template = self._ctx.state.settings.agent.continuation_prompt or DEFAULT_CONTINUATION
        try:
            return template.format(
                identifier=issue.identifier,
                title=issue.title,
                state=issue.state,
                turn=turn,
                max_turns=max_turns,
            )
        except (KeyError, IndexError, ValueError):
            return template

    async def _run_turn(
        self, session: AgentSession, text: str | None, *, continuation: bool
    ) -> TurnResult:
        """One turn under ``Settings.turn_timeout_ms`` (``agent.*``, else ``codex.*``), the
        longest silence while the turn streams (§10.6): every session output resets it,
        so a turn that keeps talking runs as long as it needs. When it runs out the attempt
        ends as timed out and only the turn is cancelled. ``text`` None: the turn in flight
        a re-attached session follows."""
        state = self._ctx.state
        if text is None:
            turn_task = asyncio.ensure_future(session.follow_turn())  # type: ignore[attr-defined]  # re-adopted: a codex session
        else:
            turn_task = asyncio.ensure_future(session.run_turn(text, continuation=continuation))
        timeout_s = state.settings.turn_timeout_ms / 1000

        def expired() -> None:
            if not turn_task.done():
                self.stop(
                    Ending(
                        RunOutcome.FAILED,
                        RunStatus.TIMED_OUT,
                        f"turn timed out: no output for {timeout_s:g}s",
                    ),
                    graceful=True,
                )
                turn_task.cancel()

        deadline = SilenceDeadline(state.clock, timeout_s, self._run, expired)
        try:
            return await turn_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            error = self._ending.error if self._ending is not None else None
            return TurnResult(TurnStatus.FAILED, error=error or "turn cancelled")
        except AgentError as exc:
            return TurnResult(TurnStatus.FAILED, error=str(exc))
        finally:
            deadline.cancel()

    async def _cleanup(self, ending: Ending) -> None:
        """Settle open approvals, close the session (its process group is killed), run
        ``after_run``, write the manifest, and remove the workspace of a terminal issue."""
        ctx, run = self._ctx, self._run
        state = ctx.state
        await ctx.mailbox.ask(ApprovalsCancelled(run), control=True)
        session = self._session
        if session is not None:
            try:
                await asyncio.wait_for(session.close(), timeout=SESSION_CLOSE_TIMEOUT_S)
                ctx.mailbox.post(SessionClosed(run))
            except (TimeoutError, Exception) as exc:
                why = str(exc) or type(exc).__name__
                if isinstance(exc, TimeoutError):
                    why = f"no answer within {SESSION_CLOSE_TIMEOUT_S:g} s"
                state.log(
                    "warning", "session close failed", error=why,
                    issue_id=run.issue.id, issue_identifier=run.issue.identifier,
                )  # fmt: skip
        self._closed = True  # from here a stopping scheduler lets the cleanup finish
        workspace = self._workspace
        if workspace is None or self._host_lost or run.host_lost:
            return  # (a lost host: its workspace waits there for the host to come back)
        hook = await self._hook("after_run")
        if hook is not None:
            self._hook_ran(hook)
        # Behind the session's last reports: they are applied before they are saved.
        await ctx.mailbox.ask(AttemptEnded(run, ending))
        requested = self._ending
        if ending.remove_workspace or (requested is not None and requested.remove_workspace):
            try:
                await ctx.workspaces.remove(
                    run.issue.identifier, host=run.worker_host, path=workspace
                )
                ctx.mailbox.post(RunWorkspaceRemoved(run))
            except Exception as exc:
                state.log("warning", "workspace removal failed", error=str(exc))

    async def _hook(self, name: str) -> HookRun | None:
        """Run hook ``name`` in the run's workspace (its result, None when not configured).
        A stop that cancels the worker mid-hook ends the hook's process group
        (workspaces/hooks.py) and is said in the event log before the cancellation goes on."""
        run = self._run
        assert self._workspace is not None
        started = time.monotonic()
        try:
            return await self._ctx.workspaces.run_hook(
                name, self._workspace, run.issue, host=run.worker_host
            )
        except asyncio.CancelledError:
            requested = self._ending.error if self._ending is not None else None
            why = requested or "run stopped"
            self._hook_cut(name, why, int((time.monotonic() - started) * 1000))
            raise

    def _hook_cut(self, name: str, why: str, duration_ms: int) -> None:
        summary = f"cut short ({why})"
        self._ctx.mailbox.post(
            HookRan(
                self._run,
                name,
                summary,
                f"{name}: {summary} in {duration_ms} ms; its process group was ended",
                HookResult(hook=name, ok=False, duration_ms=duration_ms, cut_short=why),
            )
        )

    def _hook_ran(self, hook: HookRun) -> None:
        summary = "ok" if hook.ok else _hook_why(hook, "exit")
        ended = "; its process group was ended" if hook.cut_short else ""
        self._ctx.mailbox.post(
            HookRan(
                self._run,
                hook.name,
                summary,
                f"{hook.name}: {summary} in {hook.duration_ms} ms{ended}",
                HookResult(
                    hook=hook.name,
                    ok=hook.ok,
                    exit_code=hook.exit_code,
                    timed_out=hook.timed_out,
                    duration_ms=hook.duration_ms,
                    output=hook.output[-2000:],
                    cut_short=hook.cut_short,
                ),
            )
        )


def _hook_why(hook: HookRun, exit_word: str) -> str:
    cut = hook.cut_short
    if cut is not None:
        return f"cut short ({cut})"
    if hook.timed_out:
        return "timed out"
    lost = hook.host_lost
    if lost is not None:
        return f"host unreachable: {lost}"
    return f"{exit_word} {hook.exit_code}"


def _hook_error(hook: HookRun) -> str:
    return f"hook {hook.name} failed ({_hook_why(hook, 'exit code')})"


def start_worker(run: Run, ctx: WorkerContext) -> Worker:
    """Start ``run``'s worker task (``run.task``, ``run.worker`` set); its :class:`Ending`
    is posted as ``WorkerEnded`` when the task is done, even one cancelled before it
    started."""
    worker = Worker(run, ctx)
    task = asyncio.get_running_loop().create_task(
        worker.run(), name=f"worker-{run.issue.identifier}"
    )
    worker.task = task
    ctx.state.worker_started(run, task, worker)

    def done(task: asyncio.Task) -> None:
        if task.cancelled():  # cancelled before it even started
            ending = worker.requested or Ending(RunOutcome.STOPPED, RunStatus.STOPPED)
        else:
            ending = task.result()  # Worker.run never raises
        ctx.mailbox.post(WorkerEnded(run, ending))

    task.add_done_callback(done)
    return worker


class SilenceDeadline:
    """The turn timeout as the longest silence (§10.6): fires ``expired`` once ``timeout_s``
    seconds pass without output from the run's session (``run.last_output_mono``, or since
    the deadline was set), re-arming itself while output keeps coming. A class, not a
    closure that re-arms itself, so nothing of an ended run waits for the cycle collector."""

    def __init__(
        self, clock: Clock, timeout_s: float, run: Run, expired: Callable[[], None]
    ) -> None:
        self._clock = clock
        self._timeout_s = timeout_s
        self._run = run
        self._expired = expired
        self._since = clock.monotonic()
        self._handle: TimerHandle | None = clock.call_later(timeout_s, self._fire)

    def _fire(self) -> None:
        silent = self._clock.monotonic() - max(self._since, self._run.last_output_mono)
        if silent < self._timeout_s:
            self._handle = self._clock.call_later(self._timeout_s - silent, self._fire)
            return
        self._handle = None
        self._expired()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
