"""Operator holds: issues the scheduler must not dispatch on its own (docs/architecture.md
"The path of one operator command").

When the operator interrupts or stops a run, its issue is held so the next tick does not
simply start it again. A hold ends when the operator reruns the issue, when the tracker shows
the issue changed (a new ``updated_at``) or when the issue is no longer a candidate. Holds
are written to the workspace's run manifest (``held``, ``held_updated_at``) so that a
restarted scheduler keeps them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

from symphony_tui.domain import Issue, RecoveredWorkspace
from symphony_tui.scheduler import manifests
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manager import WorkspaceManager


class Holds:
    """The held issue ids, each with the issue's ``updated_at`` when the hold began (None when
    the tracker gives none: such a hold only ends by rerun or by leaving the candidates).

    A collection of issue ids (``issue_id in holds``). Only the orchestrator's event loop
    uses it.
    """

    def __init__(self, workspaces: WorkspaceManager) -> None:
        self._workspaces = workspaces
        self._held: dict[str, datetime | None] = {}
        #: Where each held issue's workspace is, when known: (path, worker host or None).
        self._where: dict[str, tuple[Path, str | None]] = {}

    def __contains__(self, issue_id: object) -> bool:
        return issue_id in self._held

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, issue: Issue, workspace: Path | None) -> None:
        """Hold ``issue`` as it is now, and record it in ``workspace``'s run manifest (a
        failed write is logged by the manifest module; the hold stands in memory)."""
        self._held[issue.id] = issue.updated_at
        if workspace is not None:
            self._where.setdefault(issue.id, (workspace, None))
            # Survives a restart: a held issue must not be dispatched by the next console
            # just because this one's memory is gone.
            manifests.hold(self._workspaces.manifests, workspace, issue)

    def release(self, issue_id: str, issue: Issue | None) -> None:
        """End the hold on ``issue_id`` (if any); with its ``issue`` known, also clear the
        manifest flag. Manifest errors are ignored: memory is what dispatch reads."""
        self._held.pop(issue_id, None)
        where = self._where.pop(issue_id, None)
        if where is not None and self._unhold_at(*where):
            return
        if issue is None:
            return
        with contextlib.suppress(WorkspaceError, OSError):
            path = self._workspaces.path_for(issue.identifier)
            if path.is_dir():
                manifests.unhold(self._workspaces.manifests, path)

    def _unhold_at(self, path: Path, host: str | None) -> bool:
        """Clear the flag in the manifest of the workspace at ``path`` (on ``host``, whose
        manifests the writer then sends there); False when that workspace is not there."""
        writer = self._workspaces.manifests
        with contextlib.suppress(WorkspaceError, OSError, KeyError, ValueError):
            if host is not None:
                self._workspaces.remote.mount(host, path)
            if writer.store(path) is not None or path.is_dir():
                manifests.unhold(writer, path)
                return True
        return False

    def release_stale(self, current: Mapping[str, Issue], previous: Mapping[str, Issue]) -> None:
        """After a candidate fetch: release holds on issues missing from ``current`` (issue
        id -> issue) and on issues whose ``updated_at`` moved since the hold. ``previous``
        (the issues known before the fetch) names the missing ones' workspaces."""
        for issue_id, stamp in list(self._held.items()):
            fresh = current.get(issue_id)
            if fresh is None:
                self.release(issue_id, previous.get(issue_id))
            elif stamp is not None and fresh.updated_at is not None and fresh.updated_at != stamp:
                # Someone changed the issue in the tracker: the operator's hold has served.
                self.release(issue_id, fresh)

    def restore(self, recovered: Iterable[RecoveredWorkspace]) -> None:
        """Re-hold issues an operator interrupted or stopped before a restart, as their run
        manifests say. Unreadable manifests or stamps hold without a stamp or not at all.
        The manifests were read where the workspaces are (a worker host's over SSH), by the
        scan that found them (``workspaces/recovery.py``)."""
        for workspace in recovered:
            if workspace.issue_id and workspace.held:
                self._held[workspace.issue_id] = workspace.held_updated_at
                self._where[workspace.issue_id] = (Path(workspace.path), workspace.host)
