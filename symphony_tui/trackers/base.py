"""The tracker contract (spec §11.1), adapter profiles (§11.2) and error categories (§11.4)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from symphony_tui.domain import Issue

log = logging.getLogger(__name__)

PORTABLE_CATEGORIES = (
    "unsupported_tracker_kind",
    "invalid_tracker_config",
    "missing_tracker_secret",
    "tracker_request",
    "tracker_status",
    "tracker_response",
    "tracker_pagination",
    "tracker_rate_limited",
)
"""The spec's portable error categories (§11.4); new adapters raise these directly."""

ADAPTER_CATEGORIES: dict[str, str] = {
    # The adapters' own error forms and the portable category each one maps to (§11.4).
    "missing_tracker_api_key": "missing_tracker_secret",
    "missing_tracker_project_slug": "invalid_tracker_config",
    "linear_api_request": "tracker_request",
    "linear_api_status": "tracker_status",
    "linear_graphql_errors": "tracker_response",
    "linear_unknown_payload": "tracker_response",
    "linear_missing_end_cursor": "tracker_pagination",
    "linear_unknown_state": "tracker_response",
    "missing_github_token": "missing_tracker_secret",
    "missing_github_repo": "invalid_tracker_config",
    "github_api_request": "tracker_request",
    "github_api_status": "tracker_status",
    "github_graphql_errors": "tracker_response",
    "github_unknown_payload": "tracker_response",
    "github_unknown_project": "invalid_tracker_config",
    "github_unknown_state": "tracker_response",
    "local_tracker_file": "tracker_request",
    "rate_limited": "tracker_rate_limited",
    "unsupported_operation": "invalid_tracker_config",
}


def portable_category(category: str) -> str:
    """The §11.4 category of an adapter's error form (``tracker_response`` for an unknown one)."""
    if category in PORTABLE_CATEGORIES:
        return category
    return ADAPTER_CATEGORIES.get(category, "tracker_response")


class TrackerError(Exception):
    """A tracker call failed. ``category`` is the adapter's error form: one of
    :data:`PORTABLE_CATEGORIES`, or an adapter-specific one listed in
    :data:`ADAPTER_CATEGORIES` (``linear_api_status``, ``rate_limited`` with ``retry_at``,
    ...); ``portable`` is always the §11.4 category it maps to, as each adapter's profile
    documents.

    ``credentials_refused``: the tracker rejected the credentials themselves (HTTP 401, or
    Linear's ``AUTHENTICATION_ERROR``): no retry succeeds until they change, so the scheduler
    backs its polling off and ``--exit-when-idle`` gives up (docs/architecture.md)."""

    def __init__(
        self,
        category: str,
        message: str,
        *,
        retry_at: datetime | None = None,
        credentials_refused: bool = False,
    ) -> None:
        super().__init__(f"{category}: {message}")
        self.category = category
        self.portable = portable_category(category)
        self.message = message
        self.retry_at = retry_at
        self.credentials_refused = credentials_refused


@dataclass(frozen=True)
class TrackerProfile:
    """An adapter's compact profile (§11.2), published in docs/trackers.md too.

    Each field is a short plain-text statement: ``kind`` the exact ``tracker.kind``;
    ``config`` the ``tracker.provider`` keys, defaults, secret keys / environment names and
    validation errors; ``scope`` scope selection, pagination and request limits; ``identity``
    the ``id`` and ``native_ref`` mapping; ``normalization`` state, label, priority,
    timestamp, ``dispatchable``, malformed-record and optional-field rules; ``agent_tools`` the
    provider-native agent tools; ``errors`` how its error forms map to §11.4 categories.
    ``secret_env`` names the environment variables that hold its secrets.
    """

    kind: str
    config: str
    scope: str
    identity: str
    normalization: str
    agent_tools: str
    errors: str
    secret_env: tuple[str, ...] = ()

    def markdown(self) -> str:
        """The profile as docs/trackers.md carries it (a test keeps the two equal)."""
        secrets = ", ".join(f"`{n}`" for n in self.secret_env) or "none"
        return "\n".join(
            [
                f"## `tracker.kind: {self.kind}`",
                "",
                f"- **Config**: {self.config}",
                f"- **Secret environment names**: {secrets}",
                f"- **Scope and paging**: {self.scope}",
                f"- **Identity**: {self.identity}",
                f"- **Normalization**: {self.normalization}",
                f"- **Agent tools**: {self.agent_tools}",
                f"- **Errors**: {self.errors}",
                "",
            ]
        )


def keep_wellformed(
    records: Iterable[Any], normalize: Callable[[Any], Issue | None], *, kind: str
) -> list[Issue]:
    """State-list reads (§11.1): normalize each record, omitting and logging (one line each)
    any that raise a ``tracker_response`` :class:`TrackerError`. ``None`` results (records
    the adapter leaves out by design) are dropped silently."""
    out: list[Issue] = []
    for record in records:
        try:
            issue = normalize(record)
        except TrackerError as exc:
            if exc.portable != "tracker_response":
                raise
            log.warning("tracker record omitted kind=%s reason=%s", kind, exc.message)
            continue
        if issue is not None:
            out.append(issue)
    return out


def dedupe_ids(issue_ids: Sequence[str]) -> list[str]:
    """``issue_ids`` as a set (§11.1), first-seen order kept, empty ids dropped."""
    return list(dict.fromkeys(i for i in issue_ids if i))


def todo_waits_for_blockers(
    state: str, blocked_by: Iterable[Any], is_terminal: Callable[[str], bool]
) -> bool:
    """The Linear-style blocker rule an adapter folds into ``dispatchable``: a ``Todo`` issue
    with any blocker that is not in a terminal state (or whose state is unknown) waits."""
    if state.strip().lower() != "todo":
        return False
    return any(b.state is None or not is_terminal(b.state) for b in blocked_by)


@runtime_checkable
class Tracker(Protocol):
    """Read (and optionally write) issues. All methods raise :class:`TrackerError`.

    ``profile`` is the adapter's :class:`TrackerProfile` (§11.2).
    """

    kind: str
    profile: TrackerProfile

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Issues in the configured active states within the adapter's scope, including
        those with ``dispatchable=False`` (the scheduler filters them, §11.1)."""
        ...

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues in any of ``states``; an empty list makes no request. Malformed records
        are logged and omitted (:func:`keep_wellformed`)."""
        ...

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current snapshots of the given dispatch ids (a set; each at most once, order
        not significant); ids no longer visible in scope are absent; an empty list makes no
        request. A malformed requested record raises ``tracker_response``: a successful
        result is complete (§11.1)."""
        ...

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move an issue to ``state``. Trackers without writes raise
        ``TrackerError("unsupported_operation", ...)``."""
        ...

    async def aclose(self) -> None: ...

    def secret_environment_names(self) -> frozenset[str]:
        """Environment variables this adapter reads credentials from (spec §15.3): the
        launcher removes them from every agent's and hook's environment, local and over
        SSH (config/child_env.py). Adapters reading no credential return an empty set."""
        ...


def declared_secret_names(tracker: object) -> frozenset[str]:
    """``tracker.secret_environment_names()`` (spec §15.3), empty for an adapter without
    the declaration (a test double); names are stripped, empty ones dropped."""
    declare = getattr(tracker, "secret_environment_names", None)
    if declare is None:
        return frozenset()
    return frozenset(str(name).strip() for name in declare() if str(name).strip())
