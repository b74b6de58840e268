"""Reconciliation of running issues (spec §8.5): stall detection, then the tracker's view
of each running issue decides whether its worker goes on or is stopped.
"""

from __future__ import annotations

from symphony_tui.domain import EventKind, Issue, RunOutcome, RunStatus
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.trackers.base import TrackerError


def stop_run(state: SchedulerState, run: Run, ending: Ending) -> bool:
    """Send ``run``'s worker a stop request: it is cancelled and its session closed (process
    group killed) by its own cleanup, and it returns ``ending``. Announced as a
    ``RECONCILE`` event. False when the run was already ending."""
    if run.worker is None or not run.worker.stop(ending):
        return False
    state.emit_system(
        EventKind.RECONCILE, f"stopping {run.identifier}: {ending.error}", issue=run.issue
    )
    return True


def stop_stalled(state: SchedulerState) -> list[str]:
    """Stop runs with no agent event for ``Settings.stall_timeout_ms`` (a run waiting for the
    operator is never stalled); returns the ids of running issues to refresh from the
    tracker (those not already ending)."""
    stall_ms = state.settings.stall_timeout_ms  # agent.*, else codex.*
    now = state.clock.monotonic()
    if stall_ms > 0:
        for run in list(state.running.values()):
            if run.waiting_for_operator or run.stopping:
                continue
            idle_s = now - run.last_event_mono
            if idle_s * 1000 > stall_ms:
                why = (
                    f"stalled: the model was unreachable for {idle_s:.0f}s "
                    f"({redact(run.last_message or 'retrying')})"
                    if run.status is RunStatus.RETRYING_MODEL
                    else f"stalled: no agent event for {idle_s:.0f}s"
                )
                stop_run(state, run, Ending(RunOutcome.FAILED, RunStatus.STALLED, why))
    return [i for i, r in state.running.items() if not r.stopping]


def states_fetched(
    state: SchedulerState,
    ids: list[str],
    fresh: list[Issue] | None,
    error: TrackerError | None,
) -> None:
    """The tracker's current view of running issues ``ids`` (or the fetch's ``error``:
    workers are kept). A run whose issue is gone, terminal (its workspace is removed), no
    longer active, or active but no longer routable (``dispatchable`` false or a required
    label gone) is stopped, the workspace kept but for terminal; one whose agent moved it
    itself goes on (§8.5)."""
    if error is not None:
        state.tracker_failed(error, "running-issue refresh failed; workers kept")
        return
    settings = state.settings
    by_id = {i.id: i for i in fresh or ()}
    reconciled = (RunOutcome.RECONCILED, RunStatus.CANCELED_BY_RECONCILIATION)
    for issue_id in ids:
        run = state.running.get(issue_id)
        if run is None or run.stopping:
            continue
        issue = by_id.get(issue_id)
        if (
            issue is not None
            and run.agent_moved_state is not None
            and issue.state.strip().lower() == run.agent_moved_state.strip().lower()
        ):
            # The agent moved its own issue: the worker sees it when the turn ends.
            state.run_issue_seen(run, issue)
            continue
        if issue is None:
            stop_run(state, run, Ending(*reconciled, "issue no longer returned by the tracker"))
        elif settings.tracker.is_terminal(issue.state):
            state.run_issue_seen(run, issue, remember=False)
            stop_run(
                state,
                run,
                Ending(
                    *reconciled, f"issue moved to terminal state {issue.state}",
                    remove_workspace=True,
                ),
            )  # fmt: skip
        elif not settings.tracker.is_active(issue.state):
            state.run_issue_seen(run, issue, remember=False)
            stop_run(
                state, run, Ending(*reconciled, f"issue moved to non-active state {issue.state}")
            )
        elif not policy.issue_routable(issue, settings):
            # Still active, but the adapter no longer routes it here (reassigned, blocked)
            # or it lost a required label: stop, keep the workspace (§8.5).
            state.run_issue_seen(run, issue, remember=False)
            stop_run(state, run, Ending(*reconciled, "issue active but no longer routable"))
        else:
            state.run_issue_seen(run, issue)
