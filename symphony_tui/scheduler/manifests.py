"""Every workspace-manifest read and write the scheduler makes, in one place (the manifest
layout is ``workspaces/manifest.py``'s; spec §9 recovery).

The scheduler writes the ``run`` section (attempt start and end, hook results, operator
holds) and the ``session`` section (session facts, thread token totals); the workspace
manager writes ``issue`` and ``run.hooks`` itself. A failed write is logged and the run goes
on: memory is what the scheduler acts on, the manifest is for recovery after a restart.

Writes go through the workspace manager's :class:`ManifestWriter` (``WorkspaceManager.
manifests``): they never block the event loop, land in order per file, and are on disk after
``await writer.flush()`` (the manager flushes before its own writes, removal and recovery;
the orchestrator on shutdown and in ``barrier()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from symphony_tui.domain import Issue, TokenUsage
from symphony_tui.hosts.local_group import identify
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.workspaces.manifest import read_manifest
from symphony_tui.workspaces.manifest_writer import ManifestWriter


def _write(writer: ManifestWriter, ws: Path, section: str, what: str, **fields: Any) -> None:
    writer.write(ws, section, what, **fields)


def resume_facts(ws: Path, backend: str) -> dict[str, Any]:
    """The session facts of ``ws``'s previous attempt when it used ``backend`` (or did not
    say which), for the backend to re-attach; ``{}`` otherwise."""
    previous = read_manifest(ws)
    facts = previous.get("session", {}) if isinstance(previous, dict) else {}
    if isinstance(facts, dict) and facts.get("backend") in (None, backend):
        return dict(facts)
    return {}


def attempt_started(writer: ManifestWriter, run: Run) -> None:
    """``run`` section at the start of an attempt (status ``running``)."""
    if run.workspace is None:
        return
    _write(
        writer,
        run.workspace,
        "run",
        "attempt",
        attempt=run.attempt,
        status="running",
        started_at=run.started_at.isoformat(),
        ended_at=None,
        error=None,
        backend=run.backend,
        turn_count=0,
    )


def attempt_ended(writer: ManifestWriter, run: Run, ending: Ending, now: datetime) -> None:
    """``run`` section at the end of an attempt, and the issue's last seen state."""
    if run.workspace is None:
        return
    _write(
        writer,
        run.workspace,
        "run",
        "attempt",
        attempt=run.attempt,
        status=ending.status.value,
        ended_at=now.isoformat(),
        error=ending.error,
        turn_count=run.turn_count,
        tokens=run.tokens.model_dump(),
        usage_reported=not run.usage_unreported,
        last_event=run.last_event,
    )
    _write(writer, run.workspace, "issue", "issue", state=run.issue.state)


def turn_started(writer: ManifestWriter, run: Run) -> None:
    """``run.turn_count``: the turn of this attempt now running (a re-adopted run goes on
    counting from it)."""
    if run.workspace is not None:
        _write(writer, run.workspace, "run", "turn", turn_count=run.turn_count)


def hook_ran(writer: ManifestWriter, run: Run, hook_name: str, summary: str) -> None:
    """``run.hook_<name>``: how a hook of this attempt went (``ok``, ``exit 2``...)."""
    if run.workspace is not None:
        _write(writer, run.workspace, "run", "hook", **{f"hook_{hook_name}": summary})


def session_facts(writer: ManifestWriter, run: Run, fields: Mapping[str, Any]) -> None:
    """Merge a backend's session facts (``thread_id``, ``session_id``, resume data) into
    the ``session`` section, with the run's backend."""
    if run.workspace is not None:
        _write(writer, run.workspace, "session", "session", **{"backend": run.backend, **fields})


def thread_tokens(writer: ManifestWriter, run: Run, totals: TokenUsage) -> None:
    """``session.thread_tokens``: the thread's absolute token totals, so a re-attached
    thread counts only new usage."""
    if run.workspace is not None:
        _write(writer, run.workspace, "session", "token", thread_tokens=totals.model_dump())


def hold(writer: ManifestWriter, ws: Path, issue: Issue) -> None:
    """``run.held``: the operator holds the issue (with its ``updated_at`` then)."""
    stamp = issue.updated_at.isoformat() if issue.updated_at else None
    _write(writer, ws, "run", "hold", held=True, held_updated_at=stamp)


def unhold(writer: ManifestWriter, ws: Path) -> None:
    """Clear ``run.held``."""
    _write(writer, ws, "run", "hold", held=False)


def budget_extended(writer: ManifestWriter, ws: Path, extra: int, extra_usd: float = 0.0) -> None:
    """``run.budget_extra`` / ``run.budget_extra_usd``: the tokens and US dollars the
    operator added to the issue's budgets so far."""
    _write(writer, ws, "run", "budget", budget_extra=extra, budget_extra_usd=extra_usd)


def agent_group(writer: ManifestWriter, run: Run, pid: int | None, *, adoptable: bool) -> None:
    """``session.agent_group``: the process group a local run's agent leads (``pid``),
    as ``hosts/local_group.identify`` names it, and whether the agent outlives a
    scheduler on purpose to be re-adopted (``adoptable``: a backend's session says so with
    a true ``adoptable`` attribute). A scheduler that starts after a crash ends the
    groups recorded here, but the adoptable ones, which it leaves to recovery
    (``WorkspaceManager.reap``). Nothing for a run on a worker host (its pgid files do
    that there) or a session without a process of its own."""
    if run.workspace is None or run.worker_host is not None:
        return
    record = identify(pid)
    if record is not None:
        record["adoptable"] = adoptable
        _write(writer, run.workspace, "session", "agent_group", agent_group=record)


def agent_group_ended(writer: ManifestWriter, run: Run) -> None:
    """Clear ``session.agent_group``: the session closed and its group was ended."""
    if run.workspace is not None and run.worker_host is None:
        _write(writer, run.workspace, "session", "agent_group", agent_group=None)
