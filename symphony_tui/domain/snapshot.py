"""Immutable snapshots of scheduler state, published after every change (spec §13.3, §13.7).

The console renders these; the HTTP API serializes them (``Snapshot.state_payload`` is the
spec's ``/api/v1/state`` shape).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from symphony_tui.domain.approvals import ApprovalRequest
from symphony_tui.domain.kinds import ClaimState, RunStatus
from symphony_tui.domain.posture import RunPosture
from symphony_tui.domain.pull_requests import PullRequestLink
from symphony_tui.domain.run import RecoveredWorkspace
from symphony_tui.domain.tokens import RateLimits, TokenUsage


class IssueRow(BaseModel):
    """An issue the scheduler knows of: last seen candidate, running or retrying.
    ``note``: why it is not dispatched (held by the operator, waiting for memory...)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    identifier: str
    title: str
    state: str
    claim: ClaimState = ClaimState.UNCLAIMED
    priority: int | None = None
    url: str | None = None
    blocked: bool = False
    note: str = ""
    #: The fleet console's name for the scheduler this row comes from (None: one scheduler).
    project: str | None = None


class RunningRow(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    issue_identifier: str
    state: str
    backend: str = ""
    status: RunStatus = RunStatus.PREPARING_WORKSPACE
    #: Null on a first run, 1-based after (§12.3); ``retry_kind`` says why it was retried
    #: (``continuation`` or ``failure``), null on a first run or an operator's rerun.
    attempt: int | None = None
    retry_kind: str | None = None
    session_id: str | None = None
    thread_id: str | None = None
    turn_count: int = 0
    started_at: datetime | None = None
    last_event: str | None = None
    last_message: str | None = None
    last_event_at: datetime | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    #: False: a turn started and the backend reported no usage for this run, so ``tokens``
    #: are zeros that measure nothing (shown as "not reported"; scheduler/usage/tokens.py).
    usage_reported: bool = True
    #: The issue's counted total tokens (earlier runs and processes included) and how many
    #: of its finished runs had no usage report.
    issue_total_tokens: int = 0
    issue_runs_not_reported: int = 0
    #: The model the run's session runs (None: not reported); what the run cost so far in
    #: US dollars and ``spend``: ``priced``, ``unknown model`` (tokens counted, no price:
    #: ``spend_usd`` is null, never 0) or ``not reported`` (no usage report); the turn in
    #: flight's share; the issue's spend over its priced runs and how many of its finished
    #: runs had no price (config/pricing.py, scheduler/usage/tokens.py).
    model: str | None = None
    spend_usd: float | None = None
    spend: str = "priced"
    turn_spend_usd: float | None = None
    issue_spend_usd: float | None = None
    issue_runs_unpriced: int = 0
    workspace_path: str = ""
    pending_approvals: int = 0
    # Why the run is held by a token budget ("12,400 of 10,000 tokens per issue"), or None.
    budget_reached: str | None = None
    #: The worker host the run is on (None: this machine).
    host: str | None = None
    #: How the scheduler reaches the agent (``local``, ``ssh``, ``exec-server``) and the state of that link
    #: (``connected``; ``reconnecting`` or ``lost`` since ``link_since``, UTC).
    link_mode: str = "local"
    link_state: str = "connected"
    link_since: datetime | None = None
    #: Why the attempt failed (one line; ``status`` is then the failed one), shown while its
    #: worker finishes (``after_run``); None while it has not failed.
    error: str | None = None
    #: What the run can reach (docs/security.md), fixed at dispatch.
    posture: RunPosture | None = None
    #: The agent's processes (it and its children) at the last resource sample: resident
    #: memory in bytes and CPU in percent of one core; None before the first sample.
    rss_bytes: int | None = None
    cpu_percent: float | None = None
    #: The fleet console's name for the scheduler this row comes from (None: one scheduler).
    project: str | None = None


class HostRow(BaseModel):
    """One worker host (``worker.ssh_hosts``): ``up``, runs on it now and its
    ``capacity`` (None: no per-host cap), the last connection error (one line) and the
    last probe's round trip in milliseconds. ``since``: when it last went up or down (UTC;
    the scheduler's start for a host never down); ``drained``: the operator drained it
    (``DrainHost``: nothing new is placed there); ``workspaces``: how many issues'
    workspaces are known to be there (where they last ran, and recovered ones)."""

    model_config = ConfigDict(frozen=True)

    name: str
    up: bool = True
    running: int = 0
    capacity: int | None = None
    last_error: str | None = None
    rtt_ms: float | None = None
    since: datetime | None = None
    drained: bool = False
    workspaces: int = 0
    #: Runs on the host whose link to their agent is reconnecting, and since when the
    #: oldest of them is (UTC).
    reconnecting: int = 0
    reconnecting_since: datetime | None = None
    #: The fleet console's name for the scheduler this host serves (None: one scheduler).
    project: str | None = None


class MemoryRow(BaseModel):
    """The memory of one machine agents run on at the last resource sample: ``host``
    (None: this machine), ``available_bytes`` and ``total_bytes`` (None: it does not
    say), ``agents_rss_bytes`` (its runs' agents together) and ``short``: why it takes no
    new run (under ``worker.min_free_memory_mb``, at ``max_memory_mb``), None while it
    does."""

    model_config = ConfigDict(frozen=True)

    host: str | None = None
    available_bytes: int | None = None
    total_bytes: int | None = None
    agents_rss_bytes: int = 0
    short: str | None = None


class RetryRow(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    issue_identifier: str
    attempt: int
    due_at: datetime
    error: str | None = None
    retry_kind: str | None = None
    #: The fleet console's name for the scheduler this row comes from (None: one scheduler).
    project: str | None = None


class ProjectRow(BaseModel):
    """One scheduler as a fleet console (``symphony-tui fleet``) sees it.

    ``name``: the project's short name, unique in the fleet (the project column, and the
    prefix of its rows' ids there); ``target``: what the operator named (a WORKFLOW.md path,
    an ``http(s)://`` URL or ``ssh://[user@]host[:port]``); ``machine``: where the scheduler
    runs (None: this machine). ``link_state``: ``connecting``, ``live``, ``reconnecting``,
    ``stale``, ``down``, ``refused`` (the API refused the fleet's token), ``config`` (the
    token it names cannot be had: nothing was asked of the scheduler), ``lost`` (its
    process or its host's announcement is gone without it saying it stopped: its agents
    may still run), ``stopped`` (it said it was stopping) or ``duplicate`` (it reaches the
    very scheduler process another project shows: ``error`` says which, and it has no
    figures and no rows); ``age_s``: seconds since it
    was last heard from (None: never, and its figures are unknown, not 0); ``error``: the
    link's last failure or the scheduler's last error, one line. The counts, ``totals``
    and the other figures are those of its last snapshot (a console filtered to the
    project shows them in place of the fleet's); while its link is lost or after its
    scheduler stopped, of the last snapshot it sent, ``age_s`` old. A stopped scheduler
    runs nothing and answers no approval: its ``running``, ``retrying``, ``approvals`` and
    ``max_concurrent_agents`` are 0, ``stopped_with`` holds ``(running, retrying,
    approvals)`` as it last said before it stopped, and ``stop_reason`` the reason it gave
    (both None otherwise; a clean stop is no ``error``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    target: str
    workflow_path: str = ""
    machine: str | None = None
    link_state: str = "connecting"
    age_s: float | None = None
    error: str | None = None
    running: int = 0
    retrying: int = 0
    approvals: int = 0
    dispatch_paused: bool = False
    totals: TokenUsage = Field(default_factory=TokenUsage)
    rate_limits: RateLimits | None = None
    max_concurrent_agents: int = 0
    seconds_running: float = 0.0
    token_rate_per_min: float = 0.0
    token_history: tuple[int, ...] = ()
    runs_not_reported: int = 0
    runs_unpriced: int = 0
    stopped_with: tuple[int, int, int] | None = None
    stop_reason: str | None = None

    @property
    def heard(self) -> bool:
        """Its scheduler has been heard from (its figures are known, if maybe old)."""
        return self.age_s is not None


class Snapshot(BaseModel):
    """Everything the console shows, at one instant ``generated_at``.

    ``totals`` include ended sessions; ``seconds_running`` = ended sessions + live elapsed
    (spec §13.5). ``token_rate_per_min`` is total tokens over the last minute.
    ``runs_not_reported``: finished runs (this process and earlier ones) whose backend
    reported no usage; ``totals`` hold nothing of theirs. ``stopping_with``: ``None``
    while the scheduler runs; once it began shutting down, ``(running, retrying,
    approvals)`` it had then (its runs end during the shutdown, before it says it has
    stopped: what a front end says it had comes from here).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    generated_at: datetime
    started_at: datetime | None = None
    workflow_path: str = ""
    tracker_kind: str = ""
    backend: str = ""
    issues: tuple[IssueRow, ...] = ()
    running: tuple[RunningRow, ...] = ()
    retrying: tuple[RetryRow, ...] = ()
    approvals: tuple[ApprovalRequest, ...] = ()
    completed: tuple[str, ...] = ()
    totals: TokenUsage = Field(default_factory=TokenUsage)
    runs_not_reported: int = 0
    runs_unpriced: int = 0
    """Finished runs whose tokens had no price (an unknown model): ``totals.cost_usd``
    holds nothing of theirs."""
    seconds_running: float = 0.0
    token_rate_per_min: float = 0.0
    token_history: tuple[int, ...] = ()
    rate_limits: RateLimits | None = None
    recovered: tuple[RecoveredWorkspace, ...] = ()
    hosts: tuple[HostRow, ...] = ()
    memory: tuple[MemoryRow, ...] = ()
    """Each machine agents run on (this one, or the worker hosts), as last sampled."""
    dispatch_paused: bool = False
    config_error: str | None = None
    tracker_error: str | None = None
    tracker_errors: int = 0
    """Failed tracker calls since the scheduler started (``/metrics``)."""
    tracker_paused_until: datetime | None = None
    last_poll_at: datetime | None = None
    next_poll_at: datetime | None = None
    max_concurrent_agents: int = 0
    tracker_states: tuple[str, ...] = ()
    """The configured active then terminal states (targets for a tracker move)."""
    projects: tuple[ProjectRow, ...] = ()
    stopping_with: tuple[int, int, int] | None = None
    """A fleet console's schedulers, one row each (empty for one scheduler)."""
    pull_requests: dict[str, PullRequestLink] = Field(default_factory=dict)
    """Issue identifier -> its pull request (GitHub: docs/configuration.md ``github``)."""

    def state_payload(self) -> dict:
        """The spec's ``GET /api/v1/state`` body (§13.7.2) plus ``pull_requests``, ``completed``, ``memory``
        (each machine agents run on) and each running row's ``host``, ``rss_bytes`` and
        ``cpu_percent`` (null until sampled). A running row's ``tokens`` is null while its
        backend has reported no usage for it; ``codex_totals.runs_not_reported`` counts
        finished runs that never had one. ``spend`` (a running row) and
        ``codex_totals.spend_usd`` are US dollars, null when nothing was priced;
        ``runs_unpriced`` counts finished runs whose model had no price. A running row's
        ``budget_reached`` says why a budget holds it (null: not held)."""

        def iso(dt: datetime | None) -> str | None:
            return dt.isoformat() if dt else None

        def tok(t: TokenUsage) -> dict:
            return {
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "total_tokens": t.total_tokens,
            }

        return {
            "generated_at": iso(self.generated_at),
            "counts": {"running": len(self.running), "retrying": len(self.retrying)},
            "running": [
                {
                    "issue_id": r.issue_id,
                    "issue_identifier": r.issue_identifier,
                    "state": r.state,
                    "attempt": r.attempt,
                    "retry_kind": r.retry_kind,
                    "session_id": r.session_id,
                    "turn_count": r.turn_count,
                    "last_event": r.last_event,
                    "last_message": r.last_message,
                    "started_at": iso(r.started_at),
                    "last_event_at": iso(r.last_event_at),
                    "tokens": tok(r.tokens) if r.usage_reported else None,
                    "budget_reached": r.budget_reached,
                    "model": r.model,
                    "spend": {
                        "usd": r.spend_usd,
                        "status": r.spend,
                        "turn_usd": r.turn_spend_usd,
                        "issue_usd": r.issue_spend_usd,
                        "issue_runs_unpriced": r.issue_runs_unpriced,
                        "issue_runs_not_reported": r.issue_runs_not_reported,
                    },
                    "host": r.host,
                    "rss_bytes": r.rss_bytes,
                    "cpu_percent": r.cpu_percent,
                    "link": {
                        "mode": r.link_mode,
                        "state": r.link_state,
                        "since": iso(r.link_since),
                        "host": r.host,
                    },
                }
                for r in self.running
            ],
            "retrying": [
                {
                    "issue_id": r.issue_id,
                    "issue_identifier": r.issue_identifier,
                    "attempt": r.attempt,
                    "retry_kind": r.retry_kind,
                    "due_at": iso(r.due_at),
                    "error": r.error,
                }
                for r in self.retrying
            ],
            "codex_totals": {
                **tok(self.totals),
                "cached_input_tokens": self.totals.cached_input_tokens,
                "reasoning_tokens": self.totals.reasoning_tokens,
                "seconds_running": round(self.seconds_running, 3),
                "runs_not_reported": self.runs_not_reported,
                "spend_usd": self.totals.cost_usd,
                "runs_unpriced": self.runs_unpriced,
            },
            "rate_limits": self.rate_limits.raw if self.rate_limits else None,
            "completed": list(self.completed),
            "memory": [m.model_dump() for m in self.memory],
            "pull_requests": {k: v.public() for k, v in self.pull_requests.items()},
        }
