"""Wiring of one scheduler (docs/architecture.md "Who owns which state"): the parts the loop in
``orchestrator.py`` drives, built once and connected to it by callbacks.

:func:`build_parts` makes the state owner (``state.SchedulerState``), the inbox, and the
rule objects by concept (``retries``, ``dispatch``, ``tools``, ``approvals``,
``commands``, ``polling``, ``recovered_scans``) plus the context every worker gets (``worker.WorkerContext``).
Each part reaches the loop only through a :class:`LoopSide` callback (post an input, ask
and wait for a reply, spawn a task...), so none of them imports the orchestrator.
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
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from symphony_tui.agents.base import AgentBackend
from symphony_tui.config.settings import Settings
from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import EventKind, RunOutcome, RunStatus, TokenUsage
from symphony_tui.scheduler.approvals import ApprovalDesk
from symphony_tui.scheduler.clock import Clock
from symphony_tui.scheduler.commands import OperatorCommands
from symphony_tui.scheduler.dispatch import Dispatcher
from symphony_tui.scheduler.eventlog import EventHistory
from symphony_tui.scheduler.inbox import AgentTraffic, Inbox, IssueMoved, MoveIntended
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.polling import Polling
from symphony_tui.scheduler.recovered_scans import RecoveredScans
from symphony_tui.scheduler.retries import Retries
from symphony_tui.scheduler.run import Ending, Run
from symphony_tui.scheduler.session_events import session_key
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.scheduler.tools import SessionTools
from symphony_tui.scheduler.usage_ledger import UsageLedger
from symphony_tui.scheduler.worker import WorkerContext
from symphony_tui.trackers.base import Tracker
from symphony_tui.workspaces.manager import WorkspaceManager


@dataclass(frozen=True)
class LoopSide:
    """What the parts call on the loop's owner (the orchestrator): the current
    ``settings``, ``start_worker(run)``, ``backend(name)``, ``post(item, control=)``,
    ``ask(item, control=)`` (post and wait for the reply),
    ``spawn(coro, name=)`` (a tracked task), ``request_refresh()`` and
    ``refresh_recovered()``."""

    settings: Callable[[], Settings]
    start_worker: Callable[[Run], None]
    backend: Callable[[str], AgentBackend]
    post: Callable[..., None]
    ask: Callable[..., Awaitable[Any]]
    spawn: Callable[..., asyncio.Task]
    request_refresh: Callable[[], None]
    refresh_recovered: Callable[[], None]


@dataclass(frozen=True)
class SchedulerParts:
    """One scheduler's parts (see the module docstring)."""

    state: SchedulerState
    inbox: Inbox
    retries: Retries
    dispatcher: Dispatcher
    tools: SessionTools
    approvals: ApprovalDesk
    commands: OperatorCommands
    worker_ctx: WorkerContext
    polling: Polling
    scans: RecoveredScans


def build_parts(
    side: LoopSide,
    mailbox: Mailbox,
    *,
    store: WorkflowStore,
    tracker: Tracker,
    workspaces: WorkspaceManager,
    clock: Clock,
    events: EventHistory,
    usage: UsageLedger | None,
    opened: Callable[[], None] | None = None,
) -> SchedulerParts:
    """Build and connect the parts of one scheduler whose loop is ``side``; ``opened`` is
    called each time a run's session opened (``WorkerContext.opened``)."""
    state = SchedulerState(store, clock, events, workspaces)
    state.usage = usage
    inbox = Inbox()
    retries = Retries(state, inbox.post)
    dispatcher = Dispatcher(state, retries, side.start_worker, mailbox)

    async def intend(run: Run, target: str | None) -> str | None:
        # On the control lane: recorded before the tracker write starts.
        return await side.ask(MoveIntended(run, target), control=True)

    tools = SessionTools(
        tracker,
        emit=lambda run, event: inbox.post(AgentTraffic(run, event)),
        moved=lambda run, moved: inbox.post(IssueMoved(moved, run)),
        intend=intend,
    )
    approvals = ApprovalDesk(state, mailbox)
    commands = OperatorCommands(
        state,
        dispatcher=dispatcher,
        retries=retries,
        approvals=approvals,
        tracker=tracker,
        workspaces=workspaces,
        post_control=inbox.post_control,
        request_refresh=side.request_refresh,
        refresh_recovered=side.refresh_recovered,
        spawn=side.spawn,
    )

    worker_ctx = WorkerContext(
        state=state,
        tracker=tracker,
        workspaces=workspaces,
        backend=side.backend,
        tools=tools,
        mailbox=mailbox,
        room=inbox.room,
        hurry=inbox.hurry,
        busy=lambda: inbox.busy,
        opened=opened,
    )
    polling = Polling(
        state,
        store,
        tracker,
        dispatcher,
        ask=side.ask,
        post=side.post,
        spawn=side.spawn,
        request_refresh=side.request_refresh,
    )
    scans = RecoveredScans(state, workspaces, post=side.post, spawn=side.spawn)
    return SchedulerParts(
        state, inbox, retries, dispatcher, tools, approvals, commands, worker_ctx, polling, scans
    )


async def restore_usage(state: SchedulerState, usage: UsageLedger) -> None:
    """Count what earlier processes used (tokens, running seconds) and checkpoint the live
    runs from now on (``usage_ledger.py``). The ledger file is read in a thread."""
    loaded = await asyncio.to_thread(usage.open)
    state.ledger.restore(
        {issue_id: u.tokens for issue_id, u in loaded.by_issue.items()}, loaded.unreported
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
