"""Every workspace-manifest read and write the scheduler makes, in one place (the manifest
layout is ``workspaces/manifest.py``'s; spec §9 recovery).

The scheduler writes the ``run`` section (attempt start and end, hook results, operator
holds) and the ``session`` section (session facts, thread token totals); the workspace
manager writes ``issue`` and ``run.hooks`` itself. A failed write is logged and the run goes
on: memory is what the scheduler acts on, the manifest is for recovery after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from symphony_tui.domain import Issue, TokenUsage
from symphony_tui.observability.logs import log_kv
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.workspaces.manifest import read_manifest, read_section, update_manifest

log = logging.getLogger("symphony_tui.scheduler")


def _write(ws: Path, section: str, what: str, **fields: Any) -> None:
    try:
        update_manifest(ws, section, **fields)
    except (OSError, TypeError, ValueError) as exc:
        log_kv(log, "warning", f"{what} manifest write failed", path=str(ws), error=str(exc))


def resume_facts(ws: Path, backend: str) -> dict[str, Any]:
    """The session facts of ``ws``'s previous attempt when it used ``backend`` (or did not
    say which), for the backend to re-attach; ``{}`` otherwise."""
    previous = read_manifest(ws)
    facts = previous.get("session", {}) if isinstance(previous, dict) else {}
    if isinstance(facts, dict) and facts.get("backend") in (None, backend):
        return dict(facts)
    return {}


def attempt_started(run: Run) -> None:
    """``run`` section at the start of an attempt (status ``running``)."""
    if run.workspace is None:
        return
    _write(
        run.workspace,
        "run",
        "attempt",
        attempt=run.attempt,
        status="running",
        started_at=run.started_at.isoformat(),
        ended_at=None,
        error=None,
        backend=run.backend,
    )


def attempt_ended(run: Run, ending: Ending, now: datetime) -> None:
    """``run`` section at the end of an attempt, and the issue's last seen state."""
    if run.workspace is None:
        return
    _write(
        run.workspace,
        "run",
        "attempt",
        attempt=run.attempt,
        status=ending.status.value,
        ended_at=now.isoformat(),
        error=ending.error,
        turn_count=run.turn_count,
        tokens=run.tokens.model_dump(),
        last_event=run.last_event,
    )
    _write(run.workspace, "issue", "issue", state=run.issue.state)


def hook_ran(run: Run, hook_name: str, summary: str) -> None:
    """``run.hook_<name>``: how a hook of this attempt went (``ok``, ``exit 2``...)."""
    if run.workspace is not None:
        _write(run.workspace, "run", "hook", **{f"hook_{hook_name}": summary})


def session_facts(run: Run, fields: Mapping[str, Any]) -> None:
    """Merge a backend's session facts (``thread_id``, ``session_id``, resume data) into
    the ``session`` section, with the run's backend."""
    if run.workspace is not None:
        _write(run.workspace, "session", "session", **{"backend": run.backend, **fields})


def thread_tokens(run: Run, totals: TokenUsage) -> None:
    """``session.thread_tokens``: the thread's absolute token totals, so a re-attached
    thread counts only new usage."""
    if run.workspace is not None:
        _write(run.workspace, "session", "token", thread_tokens=totals.model_dump())


def hold(ws: Path, issue: Issue) -> None:
    """``run.held``: the operator holds the issue (with its ``updated_at`` then)."""
    stamp = issue.updated_at.isoformat() if issue.updated_at else None
    _write(ws, "run", "hold", held=True, held_updated_at=stamp)


def unhold(ws: Path) -> None:
    """Clear ``run.held``."""
    _write(ws, "run", "hold", held=False)


def read_hold(ws: Path) -> tuple[bool, datetime | None]:
    """Whether ``ws``'s manifest says its issue is held, and the stamp of the hold (None
    when absent or unreadable)."""
    run = read_section(ws, "run")
    if not run.get("held"):
        return False, None
    stamp = run.get("held_updated_at")
    try:
        return True, (datetime.fromisoformat(stamp) if stamp else None)
    except (TypeError, ValueError):
        return True, None
