"""Pure scheduling rules: eligibility, dispatch order, retry delays (spec §8)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue

CONTINUATION_RETRY_MS = 1_000
FAILURE_BASE_MS = 10_000
NO_SLOTS_ERROR = "no available orchestrator slots"

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def priority_rank(priority: int | None) -> int:
    """Priorities 1..4 rank as themselves; every other value (0, 5+, negative) and null
    share the bucket after them (§8.2, §11.3)."""
    return priority if priority is not None and 1 <= priority <= 4 else 5


def sort_key(issue: Issue) -> tuple:
    """Priority bucket (:func:`priority_rank`), then oldest ``created_at`` (null last), then
    identifier (§8.2)."""
    created = issue.created_at or _FAR_FUTURE
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (priority_rank(issue.priority), created, issue.identifier)


def sort_for_dispatch(issues: Iterable[Issue]) -> list[Issue]:
    return sorted(issues, key=sort_key)


def has_required_fields(issue: Issue) -> bool:
    return bool(issue.id and issue.identifier and issue.title and issue.state)


def issue_routable(issue: Issue, settings: Settings) -> bool:
    """``issue_routable`` of §8.2: the adapter's ``dispatchable`` is true and the issue
    carries every ``tracker.required_labels`` entry (case-insensitive). State, claims and
    slots are checked by the caller."""
    return issue.dispatchable and settings.tracker.has_required_labels(issue.labels)


def unsafe_identifier(issue: Issue) -> str | None:
    """Why ``issue`` cannot be dispatched because of a control character in its id or
    identifier (they reach file names, hook environments and logs), e.g. ``control
    character U+0000 in its identifier``; None when both are clean."""
    for field, value in (("identifier", issue.identifier), ("id", issue.id)):
        found = _CONTROL.search(value or "")
        if found is not None:
            return f"control character U+{ord(found.group()):04X} in its {field}"
    return None


def state_slots_free(issue: Issue, settings: Settings, running_states: Mapping[str, int]) -> bool:
    """Per-state concurrency (§8.3): ``running_states`` maps lowercase state -> running count."""
    limit = settings.agent.limit_for_state(issue.state)
    if limit is None:
        return True
    return running_states.get(issue.state.strip().lower(), 0) < limit


def failure_backoff_ms(attempt: int, max_backoff_ms: int) -> int:
    """``min(10000 * 2^(attempt-1), max_retry_backoff_ms)`` for attempt >= 1 (§8.4)."""
    attempt = max(1, attempt)
    return min(FAILURE_BASE_MS * (2 ** min(attempt - 1, 30)), max_backoff_ms)
