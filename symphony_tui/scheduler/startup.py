"""Start-up work before the first tick (spec §8.6 terminal workspace cleanup)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from symphony_tui.domain import EventKind
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.paths import workspace_key


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
    if state.settings.worker.enabled:
        await _sweep_hosts(state, {workspace_key(i.identifier): i for i in terminal})


async def _sweep_hosts(state: SchedulerState, terminal: dict) -> None:
    """The same on every worker host (issue 14): workspaces whose manifests name a
    terminal issue are removed there, ``before_remove`` included. An unreachable host
    lists nothing and is left for the next start."""
    for host in state.settings.worker.ssh_hosts:
        try:
            found = await asyncio.to_thread(state.workspaces.remote.recover_sync, host)
        except Exception as exc:
            state.log("warning", "workspace sweep failed", host=host, error=str(exc))
            continue
        for ws in found:
            issue = terminal.get(ws.key)
            if issue is None:
                continue
            try:
                await state.workspaces.remove(issue.identifier, host=host, path=Path(ws.path))
                state.emit_system(
                    EventKind.RECONCILE,
                    f"removed workspace of terminal issue on {host}",
                    issue=issue,
                )
            except Exception as exc:  # a sweep failure never blocks start-up
                state.log("warning", "workspace sweep failed", host=host, error=str(exc))
