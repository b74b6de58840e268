"""Composition root: build a running scheduler from a WORKFLOW.md path.

Used by the CLI for the console, headless mode and the demo. Nothing here imports Textual.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from symphony_tui.agents.registry import create_backend
from symphony_tui.config.child_env import secret_env_names
from symphony_tui.config.store import WorkflowStore
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.observability.redact import register_secret
from symphony_tui.paths import AUDIT_FILE_NAME, events_file
from symphony_tui.scheduler.audit import AuditLog
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.orchestrator import Orchestrator, StartupError
from symphony_tui.scheduler.project_lock import ProjectLock, project_key_for
from symphony_tui.scheduler.usage.ledger import UsageLedger, usage_file
from symphony_tui.trackers.base import Tracker, TrackerError, declared_secret_names
from symphony_tui.workspaces.manager import WorkspaceManager


@dataclass
class Runtime:
    orchestrator: Orchestrator
    store: WorkflowStore
    lock: ProjectLock | None
    #: What stopped the scheduler (``stopped by SIGTERM``...), once :meth:`close` was told.
    stop_reason: str | None = None

    async def close(self, reason: str | None = None) -> None:
        """The graceful shutdown (``Orchestrator.shutdown``; ``reason``: what stopped it,
        for the log and :attr:`stop_reason`), then the project lock released."""
        if reason is not None and self.stop_reason is None:
            self.stop_reason = reason
        await self.orchestrator.shutdown(reason)
        if self.lock is not None:
            self.lock.release()


def create_tracker(store: WorkflowStore) -> Tracker:
    """Tracker for ``tracker.kind`` (spec §11). Raises TrackerError for unknown kinds."""
    kind = store.current.settings.tracker.kind
    provider = lambda: store.current.settings  # noqa: E731 - settings may be reloaded
    if kind == "local":
        from symphony_tui.trackers.local import LocalTracker

        return LocalTracker(provider)
    if kind == "linear":
        from symphony_tui.trackers.linear import LinearTracker

        return LinearTracker(provider)
    if kind == "github":
        from symphony_tui.trackers.github import GitHubTracker

        return GitHubTracker(provider)
    if kind == "jira":
        from symphony_tui.trackers.jira import JiraTracker

        return JiraTracker(provider)
    if kind == "gitlab":
        from symphony_tui.trackers.gitlab import GitLabTracker

        return GitLabTracker(provider)
    if kind == "asana":
        from symphony_tui.trackers.asana import AsanaTracker

        return AsanaTracker(provider)
    raise TrackerError("unsupported_tracker_kind", f"tracker.kind {kind!r} is not supported")


def scheduler_secret_names(raw: dict) -> frozenset[str]:
    """Environment variables that hold the scheduler's own credentials (the tracker key):
    agents and hooks must not inherit them (an agent steered by a prompt injection could
    send them anywhere). See :func:`symphony_tui.config.child_env.secret_env_names`."""
    return secret_env_names(raw)


def build_runtime(
    workflow_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    lock: bool = True,
    events_path: Path | None = None,
    usage_path: Path | None = None,
    freeze_heap: bool = False,
) -> Runtime:
    """Load the workflow (raises ``WorkflowError``), validate it for dispatch (raises
    ``StartupError``, spec §6.3), take the project lock (raises ``ProjectLockedError``), and
    wire tracker, workspaces, backends and orchestrator. Token and running-time totals go
    to the project's usage ledger (``usage_path``, default :func:`usage_file`).
    ``freeze_heap``: keep each run's long-lived objects out of the full collections'
    reach (``scheduler/heap_freeze.py``); the CLI's own process sets it, a host process
    (a test run, an embedding program) whose heap is not the scheduler's alone leaves it
    off, since freezing would keep that process's garbage cycles until the next reclaim."""
    store = WorkflowStore(workflow_path, env=dict(env) if env is not None else None)
    workflow = store.load_initial()
    register_secret(workflow.settings.tracker.api_key)
    # Validate before anything is built: an unsupported tracker kind must be a one-line
    # start-up failure, not an error from the tracker factory (spec §16.1 order).
    problems = validate_dispatch(workflow.settings)
    if problems:
        raise StartupError("; ".join(problems))
    project_key = project_key_for(workflow.settings)
    # the audit log lives beside the event history (paths.audit_file)
    events_path = events_path or events_file(project_key)
    project_lock = ProjectLock.acquire_for(workflow.settings) if lock else None
    try:
        tracker = create_tracker(store)
        base = dict(env) if env is not None else dict(os.environ)
        # Every child (agents and hooks) gets ``base`` through the one recipe of
        # config/child_env.py, which scrubs these names (and a reloaded workflow's).
        secrets = scheduler_secret_names(workflow.raw) | declared_secret_names(tracker)
        workspaces = WorkspaceManager(lambda: store.current.settings, env=base, unset=secrets)
        orchestrator = Orchestrator(
            store,
            tracker,
            workspaces,
            lambda name: create_backend(
                name, lambda: store.current.settings, env=base, unset=secrets
            ),
            event_log=EventHistory(jsonl_path=events_path),
            audit=AuditLog(events_path.with_name(AUDIT_FILE_NAME)),
            usage=UsageLedger(usage_path or usage_file(project_key)),
            freeze_heap=freeze_heap,
        )
        orchestrator.state.posture.secrets = frozenset(secrets)
        orchestrator.state.posture.env = base
    except BaseException:
        if project_lock is not None:
            project_lock.release()
        raise
    return Runtime(orchestrator=orchestrator, store=store, lock=project_lock)
