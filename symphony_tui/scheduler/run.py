"""Mutable state of one running issue (spec §4.1.5, §4.1.6) and how its attempt ends.

A :class:`Run` is part of the scheduler state (``state.SchedulerState.running``); its live
fields are changed through the state's methods and by the session recorder, always on the
event loop. How an attempt ends is not a field on the run: the worker *returns* an
:class:`Ending`, and anyone who wants the attempt to end early sends its worker a stop
request through ``run.worker`` (:class:`WorkerControl`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from symphony_tui.agents.base import AgentSession
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalRequest,
    Issue,
    RunOutcome,
    RunStatus,
    TokenUsage,
)
from symphony_tui.domain.posture import RunPosture
from symphony_tui.scheduler.clock import TimerHandle


@dataclass(frozen=True)
class Ending:
    """How a run attempt ended: its ``outcome`` (what the scheduler does next, §16.6), the
    ``status`` shown and written to the manifest, a one-line ``error``, and whether the
    workspace is removed afterwards (``remove_workspace``: the issue went terminal)."""

    outcome: RunOutcome
    status: RunStatus
    error: str | None = None
    remove_workspace: bool = False


class WorkerControl(Protocol):
    """The handle the scheduler keeps on a run's worker (``worker.Worker`` implements it)."""

    @property
    def stopping(self) -> bool:
        """True once a stop request was accepted (the attempt is ending)."""
        ...

    def stop(self, ending: Ending, *, graceful: bool = False) -> bool:
        """Ask the worker to end its attempt with ``ending`` (the first request wins; returns
        False when one was already accepted). ``graceful`` asks the session to end its turn
        (interrupt) before the worker is cancelled; otherwise the worker is cancelled now,
        unless the scheduler is stopping and the worker is past its session's close (its
        ``after_run`` then gets the hooks' shutdown grace from the stop)."""
        ...

    def interrupt_turn(self) -> None:
        """Interrupt the turn in flight, if any, without ending the attempt (a budget
        hold: the worker then waits for :meth:`budget_extended` or a stop)."""
        ...

    def budget_extended(self) -> None:
        """The operator extended the budget: the held worker goes on."""
        ...

    async def steer(self, text: str) -> str:
        """Send the operator's message to the agent (in the turn in flight, else with the
        next turn); what happened in words. Raises ``AgentError`` when refused."""
        ...


@dataclass
class PendingApproval:
    request: ApprovalRequest
    future: asyncio.Future[ApprovalAnswer]
    timer: TimerHandle | None = None


@dataclass
class Run:
    """A live worker's run. Changed only on the event loop (state methods, the recorder)."""

    issue: Issue
    attempt: int | None
    backend: str
    started_at: datetime
    started_mono: float
    last_event_mono: float
    status: RunStatus = RunStatus.PREPARING_WORKSPACE
    #: Monotonic time of the session's latest output of any kind (``AgentTrouble`` too,
    #: which ``last_event_mono`` leaves out): the turn timeout is the longest silence (§10.6).
    last_output_mono: float = 0.0
    #: Why this attempt is a retry (``continuation`` / ``failure``, §12.3); None on a first
    #: run or an operator's rerun.
    retry_kind: str | None = None
    task: asyncio.Task | None = None
    worker: WorkerControl | None = None
    session: AgentSession | None = None
    workspace: Path | None = None
    session_id: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    turn_count: int = 0
    last_event: str | None = None
    last_event_at: datetime | None = None
    #: Set instead of ``last_event_at`` by streamed fragments (a monotonic reading: no
    #: datetime per delta); the snapshot turns it into a wall time (``settle_event_time``).
    last_event_at_mono: float | None = None
    last_message: str | None = None  # may hold a secret: snapshots mask it
    delta_buffer: str = ""
    tokens: TokenUsage = field(default_factory=TokenUsage)
    #: True once the backend reported usage for this run (a report with non-zero totals
    #: that is not a re-attached session's baseline; scheduler/usage/tokens.py).
    usage_reported: bool = False
    #: What earlier processes counted for this run before a restart re-adopted it (in
    #: ``tokens`` already; the totals hold it from the usage ledger). None: not re-adopted.
    carried: TokenUsage | None = None
    #: The model the session runs, as its backend reported it (or as configured for it);
    #: what prices the run's tokens (config/pricing.py). None: not known.
    model: str | None = None
    #: ``tokens.cost_usd`` when the turn in flight started (the turn's spend is the rest).
    turn_cost_base: float = 0.0
    #: The scheduler said a money budget cannot hold this run (its model has no price).
    money_blind_said: bool = False
    pending: dict[str, PendingApproval] = field(default_factory=dict)
    #: Ids of this run's approvals already settled (a second answer is refused as such).
    answered: set[str] = field(default_factory=set)
    approval_timed_out: str | None = None
    # The state this run's agent moved its own issue to (tracker tool): reconciliation lets
    # the turn finish instead of killing the agent for its own last act.
    agent_moved_state: str | None = None
    resume: dict = field(default_factory=dict)
    #: Set on a run re-adopted at start-up (scheduler/adoption.py): the manifest's session
    #: facts (its detached agent, thread, turn in flight); the worker re-attaches to that
    #: agent and waits for that turn instead of starting a session.
    adopting: dict | None = None
    # Why the run is held by a token budget (scheduler/usage/budgets.py); None when it is not.
    budget_reached: str | None = None
    #: The worker host the run is on (``worker.ssh_hosts``; None: this machine).
    worker_host: str | None = None
    #: What the run can reach (scheduler/posture.py), set at dispatch.
    posture: RunPosture | None = None
    #: The host connection failure that ended the run (one line), when one did.
    host_lost: str | None = None
    #: The link to a detached agent (agents/codex/link.py): ``connected``,
    #: ``reconnecting`` or ``lost``, and since when it is not connected (UTC).
    link_state: str = "connected"
    link_since: datetime | None = None
    #: How that link reaches the agent (``local``, ``ssh``, ``exec-server``) as its last
    #: state change said; None: none said (the row's mode follows ``worker_host``).
    link_mode: str | None = None
    #: Why the attempt failed (one line), set as soon as it is known: the row says it while
    #: the worker's cleanup (``after_run``) still runs.
    error: str | None = None
    #: Feedback on the issue's pull request the first turn's prompt starts with (a
    #: reaction's run, scheduler/feedback.py); None on any other run.
    feedback: str | None = None

    def settle_event_time(self, now: datetime, now_mono: float) -> None:
        """Turn ``last_event_at_mono`` into ``last_event_at`` (a wall time, from the clock
        reading ``now`` / ``now_mono``); once, so the value holds still afterwards."""
        if self.last_event_at_mono is not None:
            ago = max(0.0, now_mono - self.last_event_at_mono)
            self.last_event_at = now - timedelta(seconds=ago)
            self.last_event_at_mono = None

    def release(self) -> None:
        """Drop the handles on the ended attempt's worker, task and session (the scheduler
        calls it once the run's end is applied). They refer back to the run (the worker and
        the session's host hold it), so an ended run kept them would be a reference cycle,
        freed only by a full collection (which must not pause over 50 ms); without
        them the run and its session are freed by reference counting when it is dropped."""
        self.task = None
        self.worker = None
        self.session = None

    @property
    def identifier(self) -> str:
        return self.issue.identifier

    @property
    def usage_unreported(self) -> bool:
        """A turn started and the backend reported no usage for it yet: ``tokens`` are
        zeros that measure nothing (scheduler/usage/tokens.py)."""
        return self.turn_count > 0 and not self.usage_reported

    @property
    def spend(self) -> str:
        """``not reported`` (no usage report: nothing to price), ``unknown model`` (tokens
        counted without a price: the cost is unknown, not zero) or ``priced``."""
        if self.usage_unreported:
            return "not reported"
        if self.tokens.cost_usd is None and self.tokens.total_tokens > 0:
            return "unknown model"
        return "priced"

    @property
    def spend_usd(self) -> float | None:
        """US dollars spent so far; None unless :attr:`spend` is ``priced``."""
        return (self.tokens.cost_usd or 0.0) if self.spend == "priced" else None

    @property
    def turn_spend_usd(self) -> float | None:
        """US dollars of the turn in flight (or the last one); None unless priced."""
        spent = self.spend_usd
        return None if spent is None else max(0.0, spent - self.turn_cost_base)

    @property
    def waiting_for_operator(self) -> bool:
        return bool(self.pending) or self.budget_reached is not None

    @property
    def stopping(self) -> bool:
        """A stop request was sent to this run's worker (it is ending)."""
        return self.worker is not None and self.worker.stopping
