"""One snapshot out of many: the fleet's ids and its merged :class:`Snapshot`.

Every row of a project carries ``project`` and its ids are namespaced ``"<project>/<id>"``
(issues, running and retry rows, approvals and their issue, events, completed issues);
identifiers (``ABC-12``) stay as the tracker has them. :func:`split_id` undoes it for a
command. Project names never hold ``/``, so the first ``/`` ends the name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import zip_longest
from typing import Any

from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.domain.approvals import ApprovalRequest
from symphony_tui.domain.run import RecoveredWorkspace
from symphony_tui.domain.snapshot import (
    HostRow,
    IssueRow,
    MemoryRow,
    ProjectRow,
    RetryRow,
    RunningRow,
)
from symphony_tui.domain.tokens import TokenUsage


def namespaced(project: str, raw: str) -> str:
    return f"{project}/{raw}"


def split_id(value: str, projects: Sequence[str] | set[str] | dict) -> tuple[str, str] | None:
    """``(project, raw id)`` of a namespaced id whose project is one of ``projects``."""
    name, sep, raw = value.partition("/")
    if not sep or name not in projects or not raw:
        return None
    return name, raw


def event_of(project: str, event: AgentEvent, seq: int | None = None) -> AgentEvent:
    """``event`` as the fleet shows it: ``project`` set, ``issue_id`` namespaced, and the
    fleet's ``seq`` when given (else the scheduler's)."""
    update: dict[str, object] = {"project": project}
    if event.issue_id is not None:
        update["issue_id"] = namespaced(project, event.issue_id)
    if seq is not None:
        update["seq"] = seq
    return event.model_copy(update=update)


@dataclass(frozen=True)
class Parts:
    """One project's rows as the fleet shows them (namespaced), made once per snapshot of
    that project's scheduler."""

    source: Snapshot
    issues: tuple[IssueRow, ...]
    running: tuple[RunningRow, ...]
    retrying: tuple[RetryRow, ...]
    approvals: tuple[ApprovalRequest, ...]
    completed: tuple[str, ...]
    hosts: tuple[HostRow, ...]
    recovered: tuple[RecoveredWorkspace, ...]
    memory: tuple[MemoryRow, ...]


def parts_of(project: str, snap: Snapshot, previous: Parts | None = None) -> Parts:
    """Namespace one scheduler's snapshot (its rows get ``project`` and prefixed ids).
    ``previous``: this project's last parts; a row of ``snap`` that is the very object
    a row of its source was (the stream client keeps rows a change did not touch) takes
    that row's namespaced copy again instead of a new one."""

    def ns(raw: str) -> str:
        return f"{project}/{raw}"

    def each(name: str, make: Callable[[Any], Any]) -> tuple[Any, ...]:
        rows: tuple[Any, ...] = getattr(snap, name)
        if previous is None:
            return tuple(make(r) for r in rows)
        before: tuple[Any, ...] = getattr(previous.source, name)
        shown: tuple[Any, ...] = getattr(previous, name)
        if rows is before:
            return shown
        # ``previous.source`` holds every ``before`` row alive, so no id is reused here
        done = {id(r): s for r, s in zip(before, shown, strict=True)}
        return tuple(done[id(r)] if id(r) in done else make(r) for r in rows)

    return Parts(
        source=snap,
        issues=each(
            "issues",
            lambda r: r.model_copy(update={"project": project, "issue_id": ns(r.issue_id)}),
        ),
        running=each(
            "running",
            lambda r: r.model_copy(update={"project": project, "issue_id": ns(r.issue_id)}),
        ),
        retrying=each(
            "retrying",
            lambda r: r.model_copy(update={"project": project, "issue_id": ns(r.issue_id)}),
        ),
        approvals=each(
            "approvals",
            lambda a: a.model_copy(
                update={"project": project, "id": ns(a.id), "issue_id": ns(a.issue_id)}
            ),
        ),
        completed=each("completed", ns),
        hosts=each("hosts", lambda h: h.model_copy(update={"project": project})),
        recovered=each(
            "recovered",
            lambda w: w.model_copy(update={"issue_id": ns(w.issue_id)}) if w.issue_id else w,
        ),
        memory=snap.memory,
    )


def _sum_history(histories: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """Element-wise sum, aligned at the newest end (histories may differ in length)."""
    newest_first = zip_longest(*(reversed(h) for h in histories), fillvalue=0)
    return tuple(map(sum, newest_first))[::-1]


def _sum_tokens(usages: Sequence[TokenUsage]) -> TokenUsage:
    total = TokenUsage()
    for usage in usages:
        total = total + usage
    return total


def merge(
    parts: Sequence[Parts], projects: tuple[ProjectRow, ...], *, capacity: int | None = None
) -> Snapshot:
    """The fleet's snapshot: every project's rows (in ``parts`` order), sums of totals,
    ``rate_limits`` None (each project's is on its :class:`ProjectRow`), ``backend`` and
    ``tracker_kind`` ``fleet``. ``capacity``: its ``max_concurrent_agents`` (the fleet
    passes that of the schedulers that can run work now); None: the sum of every part's."""
    sources = [p.source for p in parts]
    started = [s.started_at for s in sources if s.started_at is not None]
    polled = [s.last_poll_at for s in sources if s.last_poll_at is not None]
    next_polls = [s.next_poll_at for s in sources if s.next_poll_at is not None]
    states: list[str] = []
    for source in sources:
        states.extend(s for s in source.tracker_states if s not in states)
    return Snapshot(
        generated_at=datetime.now(UTC),
        started_at=min(started) if started else None,
        workflow_path="",
        tracker_kind="fleet",
        backend="fleet",
        issues=tuple(row for p in parts for row in p.issues),
        running=tuple(row for p in parts for row in p.running),
        retrying=tuple(row for p in parts for row in p.retrying),
        approvals=tuple(row for p in parts for row in p.approvals),
        completed=tuple(row for p in parts for row in p.completed),
        totals=_sum_tokens([s.totals for s in sources]),
        runs_not_reported=sum(s.runs_not_reported for s in sources),
        runs_unpriced=sum(s.runs_unpriced for s in sources),
        seconds_running=sum(s.seconds_running for s in sources),
        token_rate_per_min=sum(s.token_rate_per_min for s in sources),
        token_history=_sum_history([s.token_history for s in sources]),
        rate_limits=None,
        recovered=tuple(row for p in parts for row in p.recovered),
        hosts=tuple(row for p in parts for row in p.hosts),
        memory=tuple(row for p in parts for row in p.memory),
        dispatch_paused=bool(sources) and all(s.dispatch_paused for s in sources),
        tracker_errors=sum(s.tracker_errors for s in sources),
        last_poll_at=max(polled) if polled else None,
        next_poll_at=min(next_polls) if next_polls else None,
        max_concurrent_agents=(
            sum(s.max_concurrent_agents for s in sources) if capacity is None else capacity
        ),
        tracker_states=tuple(states),
        projects=projects,
    )
