"""Operator commands applied to the scheduler state (docs/architecture.md "The path of one
operator command"; the ``SchedulerPort.send`` side of ``port.py``).

Front ends (console, HTTP API) send ``Command`` models; the scheduling loop takes them from
the inbox's control lane (before queued agent traffic) and hands them to
:class:`OperatorCommands`, which announces each one as an ``OPERATOR`` event and applies it
to the state through the dispatcher, the retry queue and the approval desk. A command that
needs I/O (the tracker, a session, a workspace) returns a coroutine for that part: the loop
runs it as a task, and whatever it changes comes back through the control lane
(``IssueMoved``, ``WorkspaceRemoved``, ``CommandDone``), so a command never races a tick or
a worker and never blocks the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from symphony_tui.agents.base import AgentError
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalDecision,
    EventKind,
    Issue,
    RunOutcome,
    RunStatus,
)
from symphony_tui.domain.commands import (
    Answer,
    Approve,
    Command,
    Deny,
    DrainHost,
    ExtendBudget,
    Interrupt,
    MoveIssue,
    PauseDispatch,
    ProbeHost,
    Refresh,
    RemoveWorkspace,
    Rerun,
    Steer,
    Stop,
    StopScheduler,
    UndrainHost,
)
from symphony_tui.domain.kinds import decision_asked
from symphony_tui.domain.payloads import OperatorAction
from symphony_tui.observability.logs import log_kv
from symphony_tui.scheduler import manifests, policy
from symphony_tui.scheduler.approvals import ApprovalDesk
from symphony_tui.scheduler.dispatch import Dispatcher
from symphony_tui.scheduler.inbox import (
    CommandDone,
    Input,
    IssueMoved,
    Tick,
    WorkspaceRemoved,
    reply,
)
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.scheduler.reconcile import stop_run
from symphony_tui.scheduler.recovered_scans import RecoveredScans
from symphony_tui.scheduler.retries import Retries
from symphony_tui.scheduler.run import Ending
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.scheduler.usage import budgets
from symphony_tui.scheduler.worker_hosts import commands as host_commands
from symphony_tui.text import one_line
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.paths import workspace_key

if TYPE_CHECKING:
    from symphony_tui.config.settings import Settings

log = logging.getLogger("symphony_tui.scheduler")

#: What applying a command gives: its result now, or a coroutine doing its I/O part.
Applied = CommandResult | Coroutine[Any, Any, CommandResult]

#: Seconds a steer may take to reach the backend before the operator is told it failed.
STEER_TIMEOUT_S = 30.0

#: Seconds an interrupted session gets to end its turn before its worker is cancelled.
INTERRUPT_GRACE_S = 10.0


def describe_command(command: Command) -> str:
    """A command in words for the event log and the log file: ``move issue to Done``,
    ``approve for the session``, ``deny with a message``... (the message itself is not
    repeated: the approval event carries it)."""
    what = command.type.replace("_", " ")
    match command:
        case MoveIssue(state=state):
            return f"{what} to {one_line(state, 60)}"
        case Approve(for_session=True):
            return decision_asked(ApprovalDecision.ACCEPT_FOR_SESSION)
        case Deny(cancel=True):
            return decision_asked(ApprovalDecision.CANCEL)
        case Deny(message=message) if message:
            return f"{what} with a message"
        case PauseDispatch(paused=paused):
            return "pause dispatch" if paused else "resume dispatch"
        case RemoveWorkspace(issue_identifier=identifier):
            return f"{what} {one_line(identifier, 60)}"
        case ExtendBudget(tokens=tokens, usd=dollars):
            parts = [f"{tokens:,} tokens"] if tokens else []
            parts += [budgets.usd(dollars)] if dollars else []
            return f"extend the budget by {' and '.join(parts)}"
        case DrainHost(host=name) | UndrainHost(host=name) | ProbeHost(host=name):
            return f"{what} {one_line(name, 60)}"
        case StopScheduler():
            return "stop the scheduler"
    return what


def about(result: CommandResult, issue: Issue | None) -> CommandResult:
    """``result`` naming ``issue`` (its identifier), taken when the command was announced:
    an approval's owner is known then, not once the answer has settled it."""
    if issue is None or result.issue is not None:
        return result
    return dataclasses.replace(result, issue=issue.identifier)


class OperatorCommands:
    """Applies operator commands to one scheduler ``state`` (its ``running``, ``retrying``,
    ``known`` and ``held``), through the ``dispatcher``, the ``retries`` queue and the
    ``approvals`` desk, with the ``tracker`` and ``workspaces`` for the commands that need
    them, and the recovered workspaces' ``scans``. A command's I/O part is a task of
    ``mailbox``, and its follow-ups go to the control lane there. :attr:`stop_process` is how a
    ``stop_scheduler`` command ends this process (set by its owner; None refuses it): it is
    called with :attr:`stop_by`, who sent the command (``user@host via ...``).

    Nothing here raises for a refused or failed command: the answer is a
    :class:`CommandResult` with ``ok`` False and a one-line reason.
    """

    def __init__(
        self,
        state: SchedulerState,
        *,
        dispatcher: Dispatcher,
        retries: Retries,
        approvals: ApprovalDesk,
        tracker: Tracker,
        workspaces: WorkspaceManager,
        scans: RecoveredScans,
        mailbox: Mailbox,
    ) -> None:
        self._state = state
        self._dispatcher = dispatcher
        self._retries = retries
        self._approvals = approvals
        self._tracker = tracker
        self._workspaces = workspaces
        self._scans = scans
        self._mailbox = mailbox
        self.stop_process: Callable[[str], None] | None = None
        self.stop_by = "an operator"
        self._stop_asked = False

    def _post_control(self, item: Input) -> None:
        self._mailbox.post(item, control=True)

    def _request_refresh(self) -> None:
        """Poll and reconcile soon (a ``Tick``, coalesced with a running cycle)."""
        self._mailbox.post(Tick())

    def _refresh_recovered(self) -> None:
        self._scans.now()

    def receive(self, command: Command, answer: asyncio.Future | None) -> None:
        """Handle an ``OperatorCommand`` input: announce, apply, and answer ``answer`` now,
        or once the command's I/O part is done (posted back as ``CommandDone``)."""
        command, issue, what = self.announce(command)
        applied = self.apply(command)
        if isinstance(applied, CommandResult):
            applied = about(applied, issue)
            self.finish(issue, what, applied)
            reply(answer, applied)
            return

        async def finish_io() -> None:
            try:
                result = await applied
            except Exception as exc:
                result = CommandResult(False, f"{what} failed: {exc}")
            self._post_control(CommandDone(command, issue, what, about(result, issue), answer))

        self._mailbox.spawn(finish_io(), name=f"command-{command.type}")

    def announce(self, command: Command) -> tuple[Command, Issue | None, str]:
        """Resolve an issue identifier (``ABC-12``, as the HTTP API's paths use) to its id
        and record the command as an ``OPERATOR`` event. Returns the resolved command, the
        issue it is about (None for process-wide ones) and the command in words."""
        issue_ref = getattr(command, "issue_id", None)
        if issue_ref is not None:
            command = command.model_copy(update={"issue_id": self._resolve_issue_id(issue_ref)})
        issue = self._command_issue(command)
        what = describe_command(command)
        self._state.emit_system(
            EventKind.OPERATOR,
            f"operator: {what}",
            issue=issue,
            payload=OperatorAction(command=command.type),
        )
        return command, issue, what

    def finish(self, issue: Issue | None, what: str, result: CommandResult) -> None:
        """Log the command's result; a refusal is also an ``OPERATOR`` event."""
        log_kv(
            log,
            "info" if result.ok else "warning",
            "operator command" if result.ok else "operator command refused",
            command=what,
            issue_identifier=issue.identifier if issue else None,
            result=result.message,
        )
        if not result.ok:
            self._state.emit_system(
                EventKind.OPERATOR,
                f"operator: {what} refused: {result.message}",
                issue=issue,
            )

    def apply(self, command: Command) -> Applied:
        """Apply ``command`` (already announced) to the state; see the module docstring."""
        state = self._state
        match command:
            case Refresh():
                self._request_refresh()
                self._refresh_recovered()
                return CommandResult(True, "refresh requested")
            case Interrupt(issue_id=issue_id):
                return self._interrupt(issue_id)
            case Stop(issue_id=issue_id):
                run = state.running.get(issue_id)
                if run is None:
                    return CommandResult(False, "no running worker for that issue")
                stop_run(
                    state, run, Ending(RunOutcome.STOPPED, RunStatus.STOPPED, "stopped by operator")
                )
                return CommandResult(True, f"stopping {run.identifier}")
            case Approve(approval_id=aid, for_session=for_session, permissions=granted):
                decision = (
                    ApprovalDecision.ACCEPT_FOR_SESSION if for_session else ApprovalDecision.ACCEPT
                )
                return self._approvals.answer(
                    aid, ApprovalAnswer(decision=decision, permissions=granted)
                )
            case Deny(approval_id=aid, message=message, cancel=cancel):
                decision = ApprovalDecision.CANCEL if cancel else ApprovalDecision.DECLINE
                return self._approvals.answer(
                    aid, ApprovalAnswer(decision=decision, message=message)
                )
            case Answer(approval_id=aid, answers=answers):
                return self._approvals.answer(
                    aid,
                    ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers=answers),
                    chooses=True,
                )
            case Rerun(issue_id=issue_id):
                return self._rerun(issue_id)
            case PauseDispatch(paused=paused):
                state.set_dispatch_paused(paused)
                if not paused:
                    self._request_refresh()
                return CommandResult(True, "dispatch paused" if paused else "dispatch resumed")
            case MoveIssue(issue_id=issue_id, state=target):
                return self._move(issue_id, target)
            case RemoveWorkspace(issue_identifier=identifier):
                return self._remove_workspace(identifier)
            case Steer(issue_id=issue_id, text=text):
                return self._steer(issue_id, text)
            case ExtendBudget(issue_id=issue_id, tokens=tokens, usd=dollars):
                return self._extend_budget(issue_id, tokens, dollars)
            case DrainHost(host=name) | UndrainHost(host=name):
                drained = isinstance(command, DrainHost)
                return host_commands.drain(state, name, drained, self._mailbox)
            case ProbeHost(host=name):
                return host_commands.probe(state, name, self._dispatcher.probes)
            case StopScheduler():
                return self._stop_scheduler()
        return CommandResult(False, f"unknown command {command!r}")

    def _stop_scheduler(self) -> CommandResult:
        """Ask this process to stop (:attr:`stop_process`, once): the graceful shutdown,
        in which each worker's hooks get ``hooks.shutdown_grace_ms``."""
        if self._state.stopping or self._stop_asked:
            return CommandResult(True, "the scheduler is already stopping")
        if self.stop_process is None:
            return CommandResult(
                False, "this scheduler does not take a stop command; stop it where it runs"
            )
        self._stop_asked = True
        stop = self.stop_process
        running = len(self._state.running)
        grace = self._state.settings.hooks.shutdown_grace_ms / 1000
        stop(self.stop_by)
        return CommandResult(
            True,
            f"stopping the scheduler: {running} agent(s) end, their hooks get {grace:g} s",
        )

    def issue_moved(self, moved: Issue) -> None:
        """The operator moved ``moved`` in the tracker: remember it and poll now."""
        self._state.remember(moved)
        self._request_refresh()

    def workspace_removed(self, key: str, removed: bool, note: str) -> None:
        """A workspace removal ended: rescan recovered workspaces, announce a removal. A
        removed workspace on a worker host no longer ties its issue to that host
        (``HostBook.forget``): its next run may go to any host, e.g. off a drained one."""
        hosts = self._state.hosts
        for w in self._state.recovered if removed else ():
            if w.key == key and w.host and w.issue_id and hosts.home.get(w.issue_id) == w.host:
                hosts.forget(w.issue_id)
        self._refresh_recovered()
        if removed:
            known = next(
                (i for i in self._state.known.values() if workspace_key(i.identifier) == key),
                None,
            )
            self._state.emit_system(
                EventKind.HOOK, f"workspace {key} removed by operator{note}", issue=known
            )

    def _resolve_issue_id(self, ref: str) -> str:
        """The id of the issue ``ref`` names: an id the scheduler knows is kept; otherwise an
        identifier of a running, known or retrying issue; otherwise ``ref`` unchanged."""
        state = self._state
        if ref in state.running or ref in state.retrying or ref in state.known or ref in state.held:
            return ref
        for issue in (*(r.issue for r in state.running.values()), *state.known.values()):
            if issue.identifier == ref:
                return issue.id
        for retry in state.retrying.values():
            if retry.issue.identifier == ref:
                return retry.issue.id
        return ref

    def _command_issue(self, command: Command) -> Issue | None:
        """The issue a command is about, for the event log (None for process-wide ones)."""
        state = self._state
        issue_id = getattr(command, "issue_id", None)
        approval_id = getattr(command, "approval_id", None)
        if issue_id is None and approval_id is not None:
            owner = self._approvals.owner(approval_id)
            issue_id = owner.issue.id if owner is not None else None
        if issue_id is None:
            return None
        run = state.running.get(issue_id)
        return run.issue if run is not None else state.known.get(issue_id)

    def _interrupt(self, issue_id: str) -> Applied:
        """End the run as cancelled (its issue is then held): a graceful stop request to its
        worker, then ask the session to interrupt its turn; the worker is cancelled if that
        fails or takes over INTERRUPT_GRACE_S. Before its first turn, the worker is
        cancelled at once."""
        state = self._state
        run = state.running.get(issue_id)
        if run is None or run.worker is None:
            return CommandResult(False, "no running worker for that issue")
        why = "interrupted by operator"
        if run.budget_reached is not None:
            why = f"budget reached ({run.budget_reached}); stopped by operator"
        ending = Ending(RunOutcome.CANCELLED, RunStatus.INTERRUPTED, why)
        session = run.session
        if session is None or (run.turn_count == 0 and run.status is not RunStatus.STREAMING_TURN):
            run.worker.stop(ending)
            return CommandResult(True, f"{run.identifier} cancelled before its turn started")
        run.worker.stop(ending, graceful=True)
        worker, identifier = run.worker, run.identifier
        hard = Ending(RunOutcome.CANCELLED, RunStatus.INTERRUPTED, "interrupt not answered")
        timer = state.clock.call_later(INTERRUPT_GRACE_S, lambda: worker.stop(hard))

        async def interrupt_session() -> CommandResult:
            try:
                await asyncio.wait_for(session.interrupt(), timeout=INTERRUPT_GRACE_S)
            except (TimeoutError, Exception) as exc:
                timer.cancel()
                worker.stop(hard)
                why = (
                    f"no answer within {INTERRUPT_GRACE_S:g} s"
                    if isinstance(exc, TimeoutError)
                    else str(exc) or type(exc).__name__
                )
                return CommandResult(
                    True, f"{identifier}: interrupt failed ({why}); worker stopped"
                )
            return CommandResult(True, f"interrupt sent to {identifier}")

        return interrupt_session()

    def _steer(self, issue_id: str, text: str) -> Applied:
        """Send the operator's message to the run's agent (``Worker.steer``): into the turn
        in flight, else queued for the next turn. Refused without a running worker or once
        it is ending; a backend's refusal or a timeout is a failed result."""
        run = self._state.running.get(issue_id)
        if run is None or run.worker is None:
            return CommandResult(False, "no running worker for that issue")
        if run.stopping:
            return CommandResult(False, f"{run.identifier} is ending; no turn will follow")
        worker, identifier = run.worker, run.identifier

        async def steer() -> CommandResult:
            try:
                said = await asyncio.wait_for(worker.steer(text), STEER_TIMEOUT_S)
            except TimeoutError:
                return CommandResult(False, f"{identifier}: not delivered (no answer in time)")
            except AgentError as exc:
                return CommandResult(False, f"{identifier}: not delivered: {exc.message}")
            return CommandResult(True, f"{identifier}: {said}")

        return steer()

    def _extend_budget(self, issue_id: str, tokens: int, dollars: float) -> CommandResult:
        """Raise the issue's budgets (``budgets.Budgets.extend``: ``tokens`` and ``dollars``
        US dollars) and let its held run go on. Refused when the run is not held by a
        budget, or when the extension would not take it back under (the answer names the
        least that would)."""
        state = self._state
        run = state.running.get(issue_id)
        if run is None or run.worker is None or run.budget_reached is None:
            return CommandResult(False, "that issue's run is not held by a budget")
        need = state.budgets.needed(run, state.settings.agent)
        short = []
        if tokens < need.tokens:
            short.append(f"{need.tokens:,} more tokens")
        if dollars + 1e-9 < need.usd:
            short.append(f"{budgets.usd(need.usd)} more")
        if short:
            return CommandResult(False, f"not enough: at least {' and '.join(short)} needed")
        extra, extra_usd = state.budgets.extend(issue_id, tokens, dollars)
        if run.workspace is not None:
            manifests.budget_extended(state.workspaces.manifests, run.workspace, extra, extra_usd)
        state.budget_extended(run)
        run.worker.budget_extended()
        granted = [f"{tokens:,} tokens"] if tokens else []
        granted += [budgets.usd(dollars)] if dollars else []
        return CommandResult(True, f"{run.identifier}: budget extended by {' and '.join(granted)}")

    def _rerun(self, issue_id: str) -> CommandResult:
        """Clear the hold and any backoff, then dispatch now when eligible and a slot is
        free (a full house queues a short retry). An issue its own fields rule out (a
        terminal or inactive state, a missing label, an open blocker) is refused with the
        reason; otherwise an ineligible issue waits for a poll."""
        state = self._state
        if issue_id in state.running:
            return CommandResult(False, "already running")
        state.unhold(issue_id)
        retry = self._retries.cancel(issue_id)
        issue = retry.issue if retry is not None else state.known.get(issue_id)
        if issue is None:
            self._request_refresh()
            return CommandResult(True, "hold cleared; the next poll decides")
        settings = state.settings
        attempt = retry.entry.attempt if retry is not None else None
        if not self._dispatcher.is_eligible(issue, settings) or state.dispatch_paused:
            self._request_refresh()
            why = not_eligible_reason(issue, settings)
            if why is not None:
                return CommandResult(False, f"{issue.identifier} not dispatched: {why}")
            if state.dispatch_paused:
                return CommandResult(True, f"{issue.identifier} waits: dispatching is paused")
            return CommandResult(True, f"{issue.identifier} is not eligible now; will poll")
        if not self._dispatcher.slots_free(issue, settings):
            self._retries.schedule(
                issue, attempt or 1, policy.CONTINUATION_RETRY_MS, error=policy.NO_SLOTS_ERROR
            )
            return CommandResult(True, f"{issue.identifier} queued: no free slot")
        self._dispatcher.dispatch(issue, attempt=attempt)
        return CommandResult(True, f"{issue.identifier} dispatched")

    async def _move(self, issue_id: str, target: str) -> CommandResult:
        try:
            moved = await self._tracker.move_issue(issue_id, target)
        except TrackerError as exc:
            return CommandResult(False, str(exc))
        self._post_control(IssueMoved(moved))
        return CommandResult(True, f"{moved.identifier} moved to {moved.state}")

    def _remove_workspace(self, identifier: str) -> Applied:
        """Operator removal of a (recovered) workspace: refused while its issue is claimed
        (running or waiting for a retry), otherwise ``before_remove`` then delete."""
        state = self._state
        key = workspace_key(identifier)
        claimed = [r.issue for r in state.running.values()]
        claimed += [r.issue for r in state.retrying.values()]
        if any(workspace_key(i.identifier) == key for i in claimed):
            return CommandResult(False, f"{identifier} is running or retrying; stop it first")

        # A recovered workspace on a worker host is removed there.
        remote = next((w for w in state.recovered if w.key == key and w.host), None)

        async def remove() -> CommandResult:
            try:
                if remote is not None:
                    exists = True
                    hook = await self._workspaces.remove(
                        identifier, host=remote.host, path=Path(remote.path)
                    )
                else:
                    exists = self._workspaces.path_for(identifier).exists()
                    hook = await self._workspaces.remove(identifier) if exists else None
            except WorkspaceError as exc:
                self._post_control(WorkspaceRemoved(key, removed=False))
                return CommandResult(False, str(exc))
            if not exists:
                self._post_control(WorkspaceRemoved(key, removed=False))
                return CommandResult(False, f"no workspace for {identifier}")
            note = ""
            if hook is not None and not hook.ok:
                note = f" (before_remove failed: {hook.summary()})"
            self._post_control(WorkspaceRemoved(key, removed=True, note=note))
            return CommandResult(True, f"workspace {key} removed{note}")

        return remove()


def not_eligible_reason(issue: Issue, settings: Settings) -> str | None:
    """Why ``issue`` is not a dispatch candidate (spec §8.2), in the operator's words, from
    what the issue itself says (its state, labels, blockers, fields); ``None`` when none of
    those rules out the issue (it is then held back by a claim)."""
    tracker = settings.tracker
    if tracker.is_terminal(issue.state):
        return (
            f"its state {issue.state!r} is terminal (tracker.terminal_states); "
            "move it to an active state to run it again"
        )
    if not tracker.is_active(issue.state):
        active = ", ".join(tracker.active_states)
        return f"its state {issue.state!r} is not active (tracker.active_states: {active})"
    if not policy.has_required_fields(issue):
        return "the tracker gave it no id, identifier, title or state"
    if not tracker.has_required_labels(issue.labels):
        have = {label.strip().lower() for label in issue.labels}
        missing = [label for label in tracker.required_labels if label not in have]
        return f"it lacks the required label(s) {', '.join(missing)} (tracker.required_labels)"
    open_ = [
        b.identifier or b.id or "?"
        for b in issue.blocked_by
        if b.state is None or not tracker.is_terminal(b.state)
    ]
    # The adapter folds the blocker rule into ``dispatchable`` (§8.2); its open blockers
    # are what the operator can act on.
    if not issue.dispatchable:
        if open_:
            return f"it is blocked by an issue not yet done ({', '.join(open_)})"
        return "the tracker says it cannot be dispatched now"
    return None
