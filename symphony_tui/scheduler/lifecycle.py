"""The start-up and shutdown steps of one scheduler (docs/architecture.md "Shutdown"),
which ``orchestrator.Orchestrator`` takes around its loop.

:func:`restore_usage` is the start-up step that loads the project's usage ledger;
:func:`stop_workers`, :func:`close_clients` and :func:`close_records` are the shutdown
steps the orchestrator takes in that order, and :func:`kill_agent_groups` is the last
resort when the event loop is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable

from symphony_tui.agents.base import AgentBackend
from symphony_tui.domain import EventKind, RunOutcome, RunStatus, TokenUsage
from symphony_tui.scheduler.polling import Polling
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.session_events import session_key
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.scheduler.usage.ledger import UsageLedger
from symphony_tui.trackers.base import Tracker


async def restore_usage(state: SchedulerState, usage: UsageLedger) -> None:
    """Count what earlier processes used (tokens, running seconds) and checkpoint the live
    runs from now on (``usage/ledger.py``). The ledger file is read in a thread."""
    loaded = await asyncio.to_thread(usage.open)
    state.ledger.restore(
        {issue_id: u.tokens for issue_id, u in loaded.by_issue.items()},
        loaded.unreported,
        loaded.unpriced,
    )
    for key, totals in loaded.threads.items():
        state.ledger.seed(key, totals)  # a resumed thread counts on from what was counted

    def session_totals(run: Run) -> tuple[str, TokenUsage] | None:
        key = session_key(run)
        totals = state.ledger.baseline(key) if run.thread_id else None
        return (key, totals) if totals is not None else None

    usage.session_totals = session_totals
    state.ended_seconds += loaded.seconds
    if loaded.warning:
        state.emit_system(EventKind.WARNING, loaded.warning)
    usage.start_checkpoints(state.clock, lambda: state.running.values())
    state.changed()


async def stop_workers(state: SchedulerState, polling: Polling, *, timeout: float) -> None:
    """Shutdown, first step: no more ticks or retries; every worker is told to stop
    (``STOPPED``, "scheduler shutdown") and cancelled, and waited for up to ``timeout``
    seconds (their sessions' process groups are killed by their cleanup). A worker already
    in its cleanup's hooks is not cancelled (``Worker.sheltered``): the hooks' cutoff, set
    before this, ends its hook ``hooks.shutdown_grace_ms`` after the stop."""
    polling.cancel_timer()
    for issue_id in list(state.retrying):
        state.pop_retry(issue_id)
    workers = []
    for run in list(state.running.values()):
        if run.worker is not None:
            # The worker's stop cancels it, unless it is past its session (its hooks).
            run.worker.stop(Ending(RunOutcome.STOPPED, RunStatus.STOPPED, "scheduler shutdown"))
        elif run.task is not None:
            run.task.cancel()
        if run.task is not None:
            workers.append(run.task)
    if workers:
        await asyncio.wait(workers, timeout=timeout)


async def close_clients(backends: Iterable[AgentBackend], tracker: Tracker, timeout: float) -> None:
    """Shutdown: close every backend (each within ``timeout`` seconds) and the tracker
    client; their errors are ignored (the process is ending)."""
    for backend in list(backends):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(backend.aclose(), timeout=timeout)
    with contextlib.suppress(Exception):
        await tracker.aclose()


async def close_records(state: SchedulerState, *, timeout: float) -> None:
    """Shutdown, last step: checkpoint and close the usage ledger, and wait (up to
    ``timeout`` seconds) until the queued manifest writes are on disk; a write still queued
    then is logged."""
    if state.usage is not None:
        state.usage.checkpoint(state.running.values(), state.clock.monotonic())
        await asyncio.to_thread(state.usage.close)
    if not await state.workspaces.manifests.flush(timeout=timeout):
        state.log("warning", "manifest writes still queued at shutdown")


def kill_agent_groups(runs: Iterable[Run]) -> int:
    """SIGKILL the process group of every live session of ``runs`` (no event loop
    needed). Returns how many groups were signalled."""
    killed = 0
    for run in list(runs):
        pid = run.session.pid if run.session is not None else None
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
    return killed
