"""The tracker contract (spec §11.1) and its error categories (spec §11.4)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from symphony_tui.domain import Issue


class TrackerError(Exception):
    """A tracker call failed. ``category`` is one of the spec's (§11.4):
    ``unsupported_tracker_kind``, ``missing_tracker_api_key``, ``missing_tracker_project_slug``,
    ``linear_api_request``, ``linear_api_status``, ``linear_graphql_errors``,
    ``linear_unknown_payload``, ``linear_missing_end_cursor``, plus ``rate_limited``
    (with ``retry_at``), ``local_tracker_file`` and ``unsupported_operation``.

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
        self.message = message
        self.retry_at = retry_at
        self.credentials_refused = credentials_refused


@runtime_checkable
class Tracker(Protocol):
    """Read (and optionally write) issues. All methods raise :class:`TrackerError`."""

    kind: str

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Issues in the configured active states (for the configured project)."""
        ...

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues in any of ``states``; an empty list makes no request (spec §17.3)."""
        ...

    async def fetch_issue_states_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Current state of the given issues; ids the tracker no longer has are absent."""
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
