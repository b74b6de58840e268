"""An in-memory :class:`~symphony_tui.trackers.base.Tracker` for tests of code that sits on
top of a tracker (the scheduler, the console, your own workflow tooling).

Every call is recorded in ``calls``; ``fail_next`` makes the next calls raise a
:class:`TrackerError` of the given category, so error paths are easy to exercise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from symphony_tui.domain import Issue
from symphony_tui.trackers.base import TrackerError, TrackerProfile, dedupe_ids

MEMORY_PROFILE = TrackerProfile(
    kind="memory",
    config="None: built in code with its issues and active states (tests only).",
    scope="Every issue it holds; no pages.",
    identity="`id`, `identifier` and `native_ref` as given.",
    normalization="Issues are returned as given, `dispatchable` included.",
    agent_tools="None.",
    errors="`fail_next(category)` raises that category; unknown moves `unsupported_operation`.",
)


class MemoryTracker:
    kind = "memory"
    profile = MEMORY_PROFILE

    def __init__(
        self,
        issues: Iterable[Issue] = (),
        *,
        active_states: Sequence[str] = ("Todo", "In Progress"),
    ) -> None:
        self.issues: dict[str, Issue] = {i.id: i for i in issues}
        self.active_states = tuple(active_states)
        self.calls: list[tuple[str, tuple]] = []
        self._failures: list[TrackerError] = []
        self.closed = False

    # -- test controls ---------------------------------------------------------------
    def put(self, issue: Issue) -> None:
        self.issues[issue.id] = issue

    def set_state(self, issue_id: str, state: str) -> None:
        self.issues[issue_id] = self.issues[issue_id].model_copy(update={"state": state})

    def delete(self, issue_id: str) -> None:
        self.issues.pop(issue_id, None)

    def fail_next(
        self, category: str = "linear_api_status", count: int = 1, retry_at: datetime | None = None
    ) -> None:
        for _ in range(count):
            self._failures.append(TrackerError(category, "injected failure", retry_at=retry_at))

    def _maybe_fail(self) -> None:
        if self._failures:
            raise self._failures.pop(0)

    # -- Tracker protocol --------------------------------------------------------------
    async def fetch_candidate_issues(self) -> list[Issue]:
        self.calls.append(("candidates", ()))
        self._maybe_fail()
        active = {s.strip().lower() for s in self.active_states}
        return [i for i in self.issues.values() if i.state.strip().lower() in active]

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        if not states:
            return []
        self.calls.append(("by_states", tuple(states)))
        self._maybe_fail()
        wanted = {s.strip().lower() for s in states}
        return [i for i in self.issues.values() if i.state.strip().lower() in wanted]

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        ids = dedupe_ids(issue_ids)
        if not ids:
            return []
        self.calls.append(("by_ids", tuple(ids)))
        self._maybe_fail()
        return [self.issues[i] for i in ids if i in self.issues]

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        self.calls.append(("move", (issue_id, state)))
        self._maybe_fail()
        if issue_id not in self.issues:
            raise TrackerError("unsupported_operation", f"unknown issue {issue_id}")
        self.set_state(issue_id, state)
        return self.issues[issue_id]

    async def aclose(self) -> None:
        self.closed = True
