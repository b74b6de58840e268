"""Building the immutable :class:`Snapshot` front ends read (spec §13.3, §13.7;
docs/architecture.md).

Pure: scheduler state in, a new ``Snapshot`` out. Nothing here mutates its inputs, reads a
clock or does I/O, so the orchestrator decides when to rebuild (and caches the result).
An :class:`IssueRowCache` passed in keeps the issue rows of the last build and reuses each
one whose inputs are the same objects (issue rows are most of a build with a big tracker:
33 ms of 35 at 2,000 issues, rebuilt on every agent event otherwise); the result is the
same as without it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime

from symphony_tui.config.settings import Settings
from symphony_tui.domain import (
    ApprovalRequest,
    ClaimState,
    Issue,
    IssueRow,
    RateLimits,
    RecoveredWorkspace,
    RetryEntry,
    RetryRow,
    RunningRow,
    Snapshot,
)
from symphony_tui.domain.pull_requests import PullRequestLink
from symphony_tui.domain.snapshot import HostRow
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.resources import ResourceBook
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.tokens import TokenLedger


def build_snapshot(
    *,
    now: datetime,
    now_mono: float,
    settings: Settings,
    workflow_path: str,
    started_at: datetime | None,
    known: Mapping[str, Issue],
    running: Mapping[str, Run],
    retries: Iterable[RetryEntry],
    held: Collection[str],
    completed: Sequence[str],
    ledger: TokenLedger,
    ended_seconds: float,
    rate_limits: RateLimits | None,
    recovered: tuple[RecoveredWorkspace, ...],
    dispatch_paused: bool,
    config_error: str | None,
    tracker_error: str | None,
    tracker_paused_until: datetime | None,
    last_poll_at: datetime | None,
    next_poll_at: datetime | None,
    tracker_errors: int = 0,
    hosts: tuple[HostRow, ...] = (),
    row_cache: IssueRowCache | None = None,
    resources: ResourceBook | None = None,
    pull_requests: Mapping[str, PullRequestLink] | None = None,
    stopping_with: tuple[int, int, int] | None = None,
) -> Snapshot:
    """The scheduler's state as one frozen ``Snapshot``.

    ``now`` is wall-clock time (UTC) and ``now_mono`` the scheduler clock's monotonic
    seconds: running time (``ended_seconds`` of finished runs plus each live run's age) and
    the token rate are measured on the latter. ``known`` maps issue id -> last seen issue,
    ``running`` issue id -> live run, ``held`` holds issue ids the operator holds, and
    ``completed`` lists identifiers oldest first. Issues are listed in dispatch order
    (§8.2), workers by start, retries by due time, approvals by creation then id.
    ``resources``: the last resource sample (agent memory and CPU, machines' memory,
    issues waiting for memory). ``pull_requests``: issue identifier -> its pull request.
    ``stopping_with``: what ran and waited when the shutdown began (``None``: it runs).
    """
    book = resources or ResourceBook()
    retries = sorted(retries, key=lambda e: e.due_at)
    live_seconds = sum(max(0.0, now_mono - r.started_mono) for r in running.values())
    return Snapshot(
        generated_at=now,
        started_at=started_at,
        workflow_path=workflow_path,
        tracker_kind=settings.tracker.kind or "",
        backend=settings.agent.backend,
        issues=_issue_rows(
            known,
            running,
            {e.issue_id for e in retries},
            held,
            completed,
            settings,
            row_cache or IssueRowCache(),
            book.waiting,
        ),
        running=_running_rows(running, ledger, book),
        retrying=tuple(
            RetryRow(
                issue_id=e.issue_id,
                issue_identifier=e.identifier,
                attempt=e.attempt,
                due_at=e.due_at,
                error=e.error,
                retry_kind=e.retry_kind,
            )
            for e in retries
        ),
        approvals=_open_approvals(running, now),
        completed=tuple(completed),
        totals=ledger.totals,
        runs_not_reported=ledger.unreported_runs,
        runs_unpriced=ledger.unpriced_runs,
        seconds_running=ended_seconds + live_seconds,
        token_rate_per_min=ledger.rate_per_min(now_mono),
        token_history=ledger.history(now_mono),
        rate_limits=rate_limits,
        recovered=recovered,
        hosts=hosts,
        memory=book.rows(settings.worker, running),
        dispatch_paused=dispatch_paused,
        config_error=config_error,
        tracker_error=tracker_error,
        tracker_errors=tracker_errors,
        tracker_paused_until=tracker_paused_until,
        last_poll_at=last_poll_at,
        next_poll_at=next_poll_at,
        max_concurrent_agents=settings.agent.max_concurrent_agents,
        tracker_states=tuple(
            dict.fromkeys((*settings.tracker.active_states, *settings.tracker.terminal_states))
        ),
        pull_requests=dict(pull_requests or {}),
        stopping_with=stopping_with,
    )


class IssueRowCache:
    """The issue rows of the last build (see the module docstring). A row is reused when
    its issue and the settings are the very objects it was built from (both frozen) and
    its claim and note are equal; the dispatch order is reused while ``known`` holds the
    very same issue objects in the same order."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[Issue, Settings, ClaimState, str, IssueRow]] = {}
        self._given: list[Issue] = []
        self._sorted: list[Issue] = []
        #: The claims' inputs of the last build and its whole tuple of rows.
        self.claims: tuple[object, ...] = ()
        self.last: tuple[IssueRow, ...] = ()

    def dispatch_order(self, issues: list[Issue]) -> tuple[list[Issue], bool]:
        """``issues`` in dispatch order, and whether they are the last call's very ones."""
        given = self._given
        if len(given) != len(issues) or any(a is not b for a, b in zip(given, issues, strict=True)):
            self._given, self._sorted = issues, policy.sort_for_dispatch(issues)
            return self._sorted, False
        return self._sorted, True


def _issue_rows(
    known: Mapping[str, Issue],
    running: Mapping[str, Run],
    retrying: Collection[str],
    held: Collection[str],
    completed: Sequence[str],
    settings: Settings,
    cache: IssueRowCache,
    waiting: Mapping[str, str],
) -> tuple[IssueRow, ...]:
    order, same_issues = cache.dispatch_order(list(known.values()))
    claims = (
        settings,
        frozenset(running),
        frozenset(retrying),
        frozenset(held),
        tuple(completed),
        tuple(waiting.items()),
    )
    if same_issues and claims == cache.claims:  # e.g. only agent traffic changed
        return cache.last
    rows = []
    done = set(completed)
    last, kept = cache.rows, {}
    for issue in order:
        if issue.id in running:
            claim = ClaimState.RUNNING
        elif issue.id in retrying:
            claim = ClaimState.RETRY_QUEUED
        elif issue.id in held:
            claim = ClaimState.RELEASED
        else:
            claim = ClaimState.UNCLAIMED
        note = ""
        if issue.id in held:
            note = "held by operator"
        elif issue.identifier in done and claim is ClaimState.UNCLAIMED:
            note = "completed"
        elif (unsafe := policy.unsafe_identifier(issue)) is not None:
            note = f"not dispatched: {unsafe}"
        elif claim is ClaimState.UNCLAIMED and issue.id in waiting:
            note = waiting[issue.id]
        hit = last.get(issue.id)
        if (
            hit is not None
            and hit[0] is issue
            and hit[1] is settings
            and hit[2] is claim
            and hit[3] == note
        ):
            row = hit[4]
        else:
            row = IssueRow(
                issue_id=issue.id,
                identifier=issue.identifier,
                title=issue.title,
                state=issue.state,
                claim=claim,
                priority=issue.priority,
                url=issue.url,
                blocked=not issue.dispatchable,
                note=note,
            )
        kept[issue.id] = (issue, settings, claim, note, row)
        rows.append(row)
    cache.rows, cache.claims, cache.last = kept, claims, tuple(rows)
    return cache.last


def _running_rows(
    running: Mapping[str, Run], ledger: TokenLedger, book: ResourceBook
) -> tuple[RunningRow, ...]:
    by_issue, unreported = ledger.by_issue, ledger.unreported_by_issue
    return tuple(
        RunningRow(
            issue_id=r.issue.id,
            issue_identifier=r.issue.identifier,
            state=r.issue.state,
            backend=r.backend,
            status=r.status,
            attempt=r.attempt,
            retry_kind=r.retry_kind,
            session_id=r.session_id,
            thread_id=r.thread_id,
            turn_count=r.turn_count,
            started_at=r.started_at,
            last_event=r.last_event,
            last_message=redact(r.last_message) if r.last_message else r.last_message,
            last_event_at=r.last_event_at,
            tokens=r.tokens,
            usage_reported=not r.usage_unreported,
            issue_total_tokens=t.total_tokens if (t := by_issue.get(r.issue.id)) else 0,
            issue_runs_not_reported=unreported.get(r.issue.id, 0),
            model=r.model,
            spend_usd=r.spend_usd,
            spend=r.spend,
            turn_spend_usd=r.turn_spend_usd,
            issue_spend_usd=t.cost_usd if (t := by_issue.get(r.issue.id)) else None,
            issue_runs_unpriced=ledger.unpriced_by_issue.get(r.issue.id, 0),
            workspace_path=str(r.workspace or ""),
            pending_approvals=len(r.pending),
            budget_reached=r.budget_reached,
            host=r.worker_host,
            link_mode=r.link_mode or ("local" if r.worker_host is None else "ssh"),
            link_state=r.link_state,
            link_since=r.link_since,
            error=redact(r.error) if r.error else None,
            posture=r.posture,
            rss_bytes=u.rss_bytes if (u := book.of(r)) is not None else None,
            cpu_percent=u.cpu_percent if u is not None else None,
        )
        for r in sorted(running.values(), key=lambda r: r.started_mono)
    )


def _open_approvals(running: Mapping[str, Run], now: datetime) -> tuple[ApprovalRequest, ...]:
    return tuple(
        sorted(
            (p.request for r in running.values() for p in r.pending.values()),
            key=lambda a: (a.created_at or now, a.id),
        )
    )
