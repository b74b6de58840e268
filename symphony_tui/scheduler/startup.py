"""Start-up work before the first tick (spec §8.6 terminal workspace cleanup)."""

from __future__ import annotations

from symphony_tui.domain import EventKind
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError


async def sweep_terminal_workspaces(state: SchedulerState, tracker: Tracker) -> None:
    """Remove workspaces of issues already in terminal states (§8.6). Failures are logged;
    start-up goes on."""
    try:
        terminal = await tracker.fetch_issues_by_states(
            list(state.settings.tracker.terminal_states)
        )
    except TrackerError as exc:
        state.log("warning", "startup terminal sweep skipped", error=str(exc))
        return
    for issue in terminal:
        try:
            path = state.workspaces.path_for(issue.identifier)
        except WorkspaceError:
            continue
        if path.exists():
            try:
                await state.workspaces.remove(issue.identifier)
                state.emit_system(
                    EventKind.RECONCILE, "removed workspace of terminal issue", issue=issue
                )
            except Exception as exc:  # a sweep failure never blocks start-up
                state.log("warning", "workspace sweep failed", error=str(exc))
