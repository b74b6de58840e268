"""A workspace's diff for front ends: which folder an issue's workspace is (its live run,
else its recovered workspace) and the git work done off the event loop, in a thread
(:mod:`symphony_tui.workspaces.diff`; the shapes are :mod:`symphony_tui.domain.diff`).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from symphony_tui.domain import Snapshot
from symphony_tui.domain.diff import DiffPage, WorkspaceDiff
from symphony_tui.workspaces import diff as workspace_diffs


def workspace_host(row: object) -> str | None:
    """The worker host a run or workspace is on (``worker.ssh_hosts``), ``None``: here."""
    for name in ("host", "worker_host"):
        value = getattr(row, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def locate(
    snapshot: Snapshot, issue: str
) -> tuple[str, str | None, str, datetime | None, str | None] | None:
    """``(issue_id, identifier, workspace path, run start, worker host)`` of ``issue`` (an
    issue id or identifier): the live run's workspace, else the recovered one; ``None``
    when neither. The host is ``None`` for a workspace on this machine."""
    for row in snapshot.running:
        if issue in (row.issue_id, row.issue_identifier) and row.workspace_path:
            return (row.issue_id, row.issue_identifier, row.workspace_path, row.started_at,
                    workspace_host(row))  # fmt: skip
    for ws in snapshot.recovered:
        if issue in (ws.issue_id, ws.issue_identifier, ws.key):
            return (ws.issue_id or ws.key, ws.issue_identifier, ws.path, ws.started_at,
                    workspace_host(ws))  # fmt: skip
    return None


def _elsewhere(host: str) -> str:
    return f"the workspace is on worker host {host}: diffs there are not computed yet"


async def diff_of(snapshot: Snapshot, issue: str) -> WorkspaceDiff:
    """The changed files of ``issue``'s workspace (an ``error`` when it has none)."""
    found = locate(snapshot, issue)
    if found is None:
        return WorkspaceDiff(issue_identifier=issue, error=f"{issue} has no workspace here")
    issue_id, identifier, path, since, host = found
    if host is not None:
        return WorkspaceDiff(
            issue_id=issue_id, issue_identifier=identifier, workspace_path=path,
            error=_elsewhere(host),
        )  # fmt: skip
    return await asyncio.to_thread(
        workspace_diffs.workspace_diff,
        path,
        since=since,
        issue_id=issue_id,
        issue_identifier=identifier,
    )


async def file_diff_of(
    snapshot: Snapshot, issue: str, path: str, *, offset: int = 0, limit: int = 400
) -> DiffPage:
    """One page of the diff of the file ``path`` (relative) in ``issue``'s workspace."""
    found = locate(snapshot, issue)
    if found is None:
        return DiffPage(path=path, error=f"{issue} has no workspace here")
    _, _, folder, since, host = found
    if host is not None:
        return DiffPage(path=path, error=_elsewhere(host))
    return await asyncio.to_thread(
        workspace_diffs.file_diff, folder, path, offset=offset, limit=limit, since=since
    )
