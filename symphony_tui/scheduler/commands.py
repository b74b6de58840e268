"""Operator commands applied to the scheduler (DESIGN.md "Operator commands"; the
``SchedulerPort.send`` side of ``port.py``).

Front ends (console, HTTP API) send ``Command`` models; :class:`OperatorCommands` logs each
one as an ``OPERATOR`` event and applies it through the orchestrator's own verbs (dispatch,
stop, retry, refresh), on the event loop, so a command never races a tick or a worker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

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
    Interrupt,
    MoveIssue,
    PauseDispatch,
    Refresh,
    RemoveWorkspace,
    Rerun,
    Stop,
)
from symphony_tui.observability.logs import log_kv
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.port import CommandResult
from symphony_tui.text import one_line
from symphony_tui.trackers.base import TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.paths import workspace_key

log = logging.getLogger("symphony_tui.scheduler")

if TYPE_CHECKING:
    from symphony_tui.scheduler.orchestrator import Orchestrator

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
            return f"{what} for the session"
        case Deny(cancel=True):
            return f"{what} and cancel the turn"
        case Deny(message=message) if message:
            return f"{what} with a message"
        case PauseDispatch(paused=paused):
            return "pause dispatch" if paused else "resume dispatch"
        case RemoveWorkspace(issue_identifier=identifier):
            return f"{what} {one_line(identifier, 60)}"
    return what


class OperatorCommands:
    """Applies operator commands to one orchestrator (its ``running``, ``retrying``, ``known``
    and ``held`` state, its tracker and workspaces, its approval desk).

    :meth:`apply` never raises for a refused or failed command: the answer is a
    :class:`CommandResult` with ``ok`` False and a one-line reason.
    """

    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orch = orchestrator

    async def apply(self, command: Command) -> CommandResult:
        """Apply ``command``; ``issue_id`` fields also accept an issue identifier
        (``ABC-12``), as the HTTP API's paths do. Each command is an ``OPERATOR`` event and a
        log line, and so is its refusal when it does not apply."""
        issue_ref = getattr(command, "issue_id", None)
        if issue_ref is not None:
            command = command.model_copy(update={"issue_id": self._resolve_issue_id(issue_ref)})
        issue = self._command_issue(command)
        what = describe_command(command)
        self._orch._emit_system(
            EventKind.OPERATOR, f"operator: {what}", issue=issue, command=command.type
        )
        result = await self._apply(command)
        log_kv(
            log,
            "info" if result.ok else "warning",
            "operator command" if result.ok else "operator command refused",
            command=what,
            issue_identifier=issue.identifier if issue else None,
            result=result.message,
        )
        if not result.ok:
            self._orch._emit_system(
                EventKind.OPERATOR, f"operator: {what} refused: {result.message}", issue=issue
            )
        return result

    async def _apply(self, command: Command) -> CommandResult:
        orch = self._orch
        match command:
            case Refresh():
                orch.request_refresh()
                orch._refresh_recovered()
                return CommandResult(True, "refresh requested")
            case Interrupt(issue_id=issue_id):
                return await self._interrupt(issue_id)
            case Stop(issue_id=issue_id):
                run = orch.running.get(issue_id)
                if run is None:
                    return CommandResult(False, "no running worker for that issue")
                orch._stop_run(run, RunOutcome.STOPPED, RunStatus.STOPPED, "stopped by operator")
                return CommandResult(True, f"stopping {run.identifier}")
            case Approve(approval_id=aid, for_session=for_session, permissions=granted):
                decision = (
                    ApprovalDecision.ACCEPT_FOR_SESSION if for_session else ApprovalDecision.ACCEPT
                )
                return orch._approvals.answer(
                    aid, ApprovalAnswer(decision=decision, permissions=granted)
                )
            case Deny(approval_id=aid, message=message, cancel=cancel):
                decision = ApprovalDecision.CANCEL if cancel else ApprovalDecision.DECLINE
                return orch._approvals.answer(
                    aid, ApprovalAnswer(decision=decision, message=message)
                )
            case Answer(approval_id=aid, answers=answers):
                return orch._approvals.answer(
                    aid, ApprovalAnswer(decision=ApprovalDecision.ACCEPT, answers=answers)
                )
            case Rerun(issue_id=issue_id):
                return self._rerun(issue_id)
            case PauseDispatch(paused=paused):
                orch.dispatch_paused = paused
                orch._changed()
                if not paused:
                    orch.request_refresh()
                return CommandResult(True, "dispatch paused" if paused else "dispatch resumed")
            case MoveIssue(issue_id=issue_id, state=state):
                try:
                    moved = await orch.tracker.move_issue(issue_id, state)
                except TrackerError as exc:
                    return CommandResult(False, str(exc))
                orch.known[moved.id] = moved
                orch._changed()
                orch.request_refresh()
                return CommandResult(True, f"{moved.identifier} moved to {moved.state}")
            case RemoveWorkspace(issue_identifier=identifier):
                return await self._remove_workspace(identifier)
        return CommandResult(False, f"unknown command {command!r}")

    def _resolve_issue_id(self, ref: str) -> str:
        """The id of the issue ``ref`` names: an id the scheduler knows is kept; otherwise an
        identifier of a running, known or retrying issue; otherwise ``ref`` unchanged."""
        orch = self._orch
        if ref in orch.running or ref in orch.retrying or ref in orch.known or ref in orch.held:
            return ref
        for issue in (*(r.issue for r in orch.running.values()), *orch.known.values()):
            if issue.identifier == ref:
                return issue.id
        for retry in orch.retrying.values():
            if retry.issue.identifier == ref:
                return retry.issue.id
        return ref

    def _command_issue(self, command: Command) -> Issue | None:
        """The issue a command is about, for the event log (None for process-wide ones)."""
        orch = self._orch
        issue_id = getattr(command, "issue_id", None)
        if issue_id is None and getattr(command, "approval_id", None) is not None:
            owner = orch._approvals.owner(command.approval_id)
            issue_id = owner.issue.id if owner is not None else None
        if issue_id is None:
            return None
        run = orch.running.get(issue_id)
        return run.issue if run is not None else orch.known.get(issue_id)

    async def _interrupt(self, issue_id: str) -> CommandResult:
        """End the run as cancelled (its issue is then held): ask the session to interrupt
        its turn, and cancel the worker if that fails or takes over INTERRUPT_GRACE_S."""
        orch = self._orch
        run = orch.running.get(issue_id)
        if run is None:
            return CommandResult(False, "no running worker for that issue")
        orch._end_run_early(
            run, RunOutcome.CANCELLED, RunStatus.INTERRUPTED, "interrupted by operator"
        )
        session = run.session
        if session is None or (run.turn_count == 0 and run.status is not RunStatus.STREAMING_TURN):
            if run.task is not None:
                run.task.cancel()
            return CommandResult(True, f"{run.identifier} cancelled before its turn started")
        task = run.task

        def force() -> None:
            if task is not None and not task.done():
                task.cancel()

        orch.clock.call_later(INTERRUPT_GRACE_S, force)
        try:
            await asyncio.wait_for(session.interrupt(), timeout=INTERRUPT_GRACE_S)
        except (TimeoutError, Exception) as exc:
            force()
            return CommandResult(
                True, f"{run.identifier}: interrupt failed ({exc}); worker stopped"
            )
        return CommandResult(True, f"interrupt sent to {run.identifier}")

    def _rerun(self, issue_id: str) -> CommandResult:
        """Clear the hold and any backoff, then dispatch now when eligible and a slot is
        free (a full house queues a short retry; an ineligible issue waits for a poll)."""
        orch = self._orch
        if issue_id in orch.running:
            return CommandResult(False, "already running")
        orch.held.release(issue_id, orch.known.get(issue_id))
        retry = orch._cancel_retry(issue_id)
        issue = retry.issue if retry is not None else orch.known.get(issue_id)
        if issue is None:
            orch.request_refresh()
            return CommandResult(True, "hold cleared; the next poll decides")
        settings = orch.settings
        attempt = retry.entry.attempt if retry is not None else None
        if not orch._is_eligible(issue, settings) or orch.dispatch_paused:
            orch.request_refresh()
            return CommandResult(True, f"{issue.identifier} is not eligible now; will poll")
        if not orch._slots_free(issue, settings):
            orch._schedule_retry(
                issue, attempt or 1, policy.CONTINUATION_RETRY_MS, error=policy.NO_SLOTS_ERROR
            )
            return CommandResult(True, f"{issue.identifier} queued: no free slot")
        orch._dispatch(issue, attempt=attempt)
        return CommandResult(True, f"{issue.identifier} dispatched")

    async def _remove_workspace(self, identifier: str) -> CommandResult:
        """Operator removal of a (recovered) workspace: refused while its issue is claimed
        (running or waiting for a retry), otherwise ``before_remove`` then delete."""
        orch = self._orch
        key = workspace_key(identifier)
        claimed = [r.issue for r in orch.running.values()]
        claimed += [r.issue for r in orch.retrying.values()]
        if any(workspace_key(i.identifier) == key for i in claimed):
            return CommandResult(False, f"{identifier} is running or retrying; stop it first")
        try:
            exists = orch.workspaces.path_for(identifier).exists()
            hook = await orch.workspaces.remove(identifier) if exists else None
        except WorkspaceError as exc:
            return CommandResult(False, str(exc))
        finally:
            orch._refresh_recovered()
        if not exists:
            return CommandResult(False, f"no workspace for {identifier}")
        note = ""
        if hook is not None and not hook.ok:
            note = f" (before_remove failed: {hook.summary()})"
        known = next((i for i in orch.known.values() if workspace_key(i.identifier) == key), None)
        orch._emit_system(EventKind.HOOK, f"workspace {key} removed by operator{note}", issue=known)
        return CommandResult(True, f"workspace {key} removed{note}")
