"""``tracker.kind: linear`` (spec §11): candidates, issues by state, state refresh, moves.

Candidates and issues-by-states page through one project (``project.slugId``) 50 at a time,
following ``pageInfo.endCursor`` and keeping Linear's order; an issue seen twice (it moved while
we paged) is kept once. The state refresh sends ids typed ``[ID!]`` at most 50 per request.
``tracker.assignee`` (a user id, or ``me``) makes issues assigned to anyone else
``dispatchable=False`` (candidates still list them, and a running issue that was reassigned
comes back from a refresh unroutable, so its run stops, §8.5). Malformed nodes are logged and
left out of state-list reads and fail an id refresh (§11.1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import httpx

from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue, IssueComment
from symphony_tui.trackers.base import TrackerError, dedupe_ids, keep_wellformed
from symphony_tui.trackers.linear import queries
from symphony_tui.trackers.linear.client import GraphQLResponse, LinearClient, redact
from symphony_tui.trackers.linear.normalize import (
    extract_comments,
    normalize_issue,
)
from symphony_tui.trackers.linear.profile import LINEAR_PROFILE

log = logging.getLogger(__name__)

_MAX_PAGES = 1000
"""Guard against a server that keeps saying ``hasNextPage`` (50 000 issues)."""


class LinearTracker:
    """The Linear tracker (implements :class:`~symphony_tui.trackers.base.Tracker`).

    ``settings`` is read on every call (hot reload). ``transport`` replaces the network in
    tests; ``clock`` gives aware UTC datetimes and drives the rate-limit pause. All methods
    raise :class:`TrackerError` with the spec §11.4 categories plus ``rate_limited`` and
    ``linear_unknown_state`` (a move to a state the issue's team does not have).
    """

    kind = "linear"
    profile = LINEAR_PROFILE

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self._client = LinearClient(settings, transport=transport, clock=clock)
        self._viewer_id: str | None = None

    def secret_environment_names(self) -> frozenset[str]:
        """``LINEAR_API_KEY`` and the variable ``tracker.api_key`` names (spec §15.3)."""
        return frozenset({"LINEAR_API_KEY", *self._settings().tracker.secret_env_names})

    # -- rate limits, for the console --------------------------------------------------

    @property
    def paused_until(self) -> datetime | None:
        """End of the current rate-limit pause (UTC), or ``None``."""
        return self._client.paused_until

    def rate_limit_status(self) -> dict[str, Any]:
        """Latest Linear rate-limit header values; see :meth:`LinearClient.rate_limit_status`."""
        return self._client.rate_limit_status()

    # -- the Tracker protocol ----------------------------------------------------------

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Issues of ``tracker.project_slug`` in ``tracker.active_states``, Linear's order."""
        return await self.fetch_issues_by_states(list(self._settings().tracker.active_states))

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues of the project in any of ``states``; ``[]`` without a request when empty."""
        names = list(dict.fromkeys(s for s in states if s))
        if not names:
            return []
        nodes = await self._nodes_by_states(names)
        normalize = await self._normalizer()
        return keep_wellformed(nodes, normalize, kind=self.kind)

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current issues for ``issue_ids`` (input order; ids Linear no longer has are
        absent; a malformed node raises). Requests carry at most :data:`queries.PAGE_SIZE`
        ids each; ``[]`` makes no request."""
        ids = dedupe_ids(issue_ids)
        if not ids:
            return []
        normalize = await self._normalizer()
        found: dict[str, Issue] = {}
        for start in range(0, len(ids), queries.PAGE_SIZE):
            chunk = ids[start : start + queries.PAGE_SIZE]
            variables = {
                "ids": chunk,
                "first": len(chunk),
                "relationFirst": queries.RELATION_PAGE_SIZE,
            }
            for node in await self._paged(queries.ISSUES_BY_IDS, variables):
                issue = normalize(node)
                found.setdefault(issue.id, issue)
        return [found[i] for i in ids if i in found]

    async def fetch_issue_comments(self, issue: Issue) -> tuple[IssueComment, ...]:
        """The newest :data:`queries.COMMENT_PAGE_SIZE` comments of ``issue``, oldest first
        (for a prompt that uses ``issue.comments``)."""
        data = await self._client.execute(
            queries.ISSUE_COMMENTS, {"id": issue.id, "commentLast": queries.COMMENT_PAGE_SIZE}
        )
        node = data.get("issue")
        if not isinstance(node, dict):
            raise TrackerError("linear_unknown_payload", f"issue {issue.id!s:.40} not returned")
        return extract_comments(node.get("comments"))

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move ``issue_id`` to the workflow state of its team named ``state`` (compared
        case-insensitively, trimmed) via ``issueUpdate``; returns the issue afterwards."""
        data = await self._client.execute(
            queries.ISSUE_TEAM_STATES, {"id": issue_id, "stateFirst": queries.STATE_PAGE_SIZE}
        )
        issue = data.get("issue")
        if not isinstance(issue, dict):
            raise TrackerError("linear_unknown_payload", f"issue {issue_id!s:.40} not returned")
        team = issue.get("team") if isinstance(issue.get("team"), dict) else {}
        states = (team.get("states") or {}).get("nodes") or []
        wanted = state.strip().lower()
        match = next(
            (
                s
                for s in states
                if isinstance(s, dict) and str(s.get("name", "")).strip().lower() == wanted
            ),
            None,
        )
        if match is None or not isinstance(match.get("id"), str):
            known = ", ".join(str(s.get("name")) for s in states if isinstance(s, dict))
            raise TrackerError(
                "linear_unknown_state", f"no workflow state {state!r} (team has: {known})"
            )
        data = await self._client.execute(
            queries.MOVE_ISSUE,
            {
                "id": issue_id,
                "stateId": match["id"],
                "relationFirst": queries.RELATION_PAGE_SIZE,
            },
        )
        payload = data.get("issueUpdate")
        if not isinstance(payload, dict) or payload.get("success") is not True:
            raise TrackerError("linear_unknown_payload", "issueUpdate did not report success")
        log.info("linear issue moved issue_id=%s state=%s", issue_id, match.get("name"))
        return (await self._normalizer())(payload.get("issue"))

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> GraphQLResponse:
        """Send any document with the configured endpoint and auth (the ``linear_graphql``
        tool). Raises like :meth:`LinearClient.post`; GraphQL errors are returned, not raised."""
        return await self._client.post(query, variables)

    def redact(self, text: str) -> str:
        """``text`` with the configured API key replaced by ``[redacted]``."""
        return redact(text, self._settings().tracker.api_key)

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- internals ---------------------------------------------------------------------

    async def _normalizer(self) -> Callable[[Any], Issue]:
        """:func:`normalize_issue` with this moment's terminal states and assignee filter."""
        tracker = self._settings().tracker
        wanted = await self._assignee_filter(tracker.assignee)

        def normalize(node: Any) -> Issue:
            return normalize_issue(node, is_terminal=tracker.is_terminal, assignee=wanted)

        return normalize

    async def _nodes_by_states(self, states: list[str]) -> list[dict]:
        slug = self._settings().tracker.project_slug
        if not slug:
            raise TrackerError("missing_tracker_project_slug", "tracker.project_slug is not set")
        variables = {
            "projectSlug": slug,
            "stateNames": states,
            "first": queries.PAGE_SIZE,
            "relationFirst": queries.RELATION_PAGE_SIZE,
        }
        return await self._paged(queries.ISSUES_BY_PROJECT_AND_STATES, variables)

    async def _paged(self, query: str, variables: dict[str, Any]) -> list[Any]:
        """All ``issues.nodes`` across pages, first occurrence of each id kept, order kept;
        nodes without a string id are kept too (the caller's normalizer rejects them)."""
        out: dict[Any, Any] = {}
        after: str | None = None
        seen_cursors: set[str] = set()
        for _ in range(_MAX_PAGES):
            data = await self._client.execute(query, {**variables, "after": after})
            nodes, has_next, cursor = _page(data)
            for node in nodes:
                node_id = node.get("id") if isinstance(node, dict) else None
                if not isinstance(node_id, str):
                    out[("malformed", len(out))] = node
                    continue
                out.setdefault(node_id, node)
            if not has_next:
                return list(out.values())
            if not cursor:
                raise TrackerError(
                    "linear_missing_end_cursor", "hasNextPage is true but endCursor is empty"
                )
            if cursor in seen_cursors:
                raise TrackerError("linear_missing_end_cursor", "endCursor did not advance")
            seen_cursors.add(cursor)
            after = cursor
        raise TrackerError("linear_missing_end_cursor", f"more than {_MAX_PAGES} pages")

    async def _assignee_filter(self, assignee: str | None) -> str | None:
        value = (assignee or "").strip()
        if not value:
            return None
        if value.lower() != "me":
            return value
        if self._viewer_id is None:
            data = await self._client.execute(queries.VIEWER)
            viewer = data.get("viewer")
            vid = viewer.get("id") if isinstance(viewer, dict) else None
            if not isinstance(vid, str) or not vid:
                raise TrackerError("linear_unknown_payload", "viewer has no id")
            self._viewer_id = vid
        return self._viewer_id


def _page(data: dict) -> tuple[list, bool, str | None]:
    issues = data.get("issues")
    if not isinstance(issues, dict) or not isinstance(issues.get("nodes"), list):
        raise TrackerError("linear_unknown_payload", "response has no issues.nodes list")
    info = issues.get("pageInfo")
    if not isinstance(info, dict):
        raise TrackerError("linear_unknown_payload", "response has no issues.pageInfo")
    cursor = info.get("endCursor")
    if not isinstance(cursor, str):
        cursor = None
    return issues["nodes"], info.get("hasNextPage") is True, cursor
