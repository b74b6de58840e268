"""``tracker.kind: jira``: Jira Cloud REST v3 (spec §11; the reference's Jira adapter).

**Reads** are JQL searches, ``POST /rest/api/3/search/jql`` (the enhanced search; the older
``/search`` is retired), 100 issues a page following ``nextPageToken`` until ``isLast``:
``project = "<project_key>" AND status IN (...) ORDER BY created ASC``. An issue seen twice
(it moved while we paged) is kept once. Candidates add ``AND assignee = currentUser()`` for
``tracker.assignee: me`` or ``= "<accountId>"`` for an account id. An issue that waits
for its blockers (:func:`.normalize.waits_for_blockers`) is returned with
``dispatchable=False``, in every read. A malformed record in a state read is logged and
skipped; in a read by id it fails the read.

**Refresh by id**: ``POST /rest/api/3/issue/bulkfetch``, 100 ids a request (none for no
ids); issues Jira does not return (deleted, no permission) or of another project are absent;
an issue no longer assigned to a configured account id is ``dispatchable=False``.

**Moves** go through the issue's workflow (``GET`` then ``POST /issue/{id}/transitions``):
the transition whose target status is named ``state`` (case-insensitive), else the one so
named; a ``tracker_response`` error names the ones available when none matches.

Auth is Basic ``email:api_token`` (Atlassian's "Basic auth for REST APIs").
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

from symphony_tui.agents.base import ToolResult
from symphony_tui.config.settings import TrackerSettings
from symphony_tui.domain import Issue
from symphony_tui.trackers.base import TrackerError, dedupe_ids
from symphony_tui.trackers.jira import normalize
from symphony_tui.trackers.jira.profile import JIRA_PROFILE
from symphony_tui.trackers.rest import RestResponse, RestTracker, Vendor
from symphony_tui.trackers.rest_tool import call_rest_tool, deletes_itself, tool_spec, under

log = logging.getLogger(__name__)

PAGE_SIZE = 100
BATCH = 100
"""Most ids ``/issue/bulkfetch`` takes in one request."""
MAX_PAGES = 500
SEARCH = "/rest/api/3/search/jql"
BULK = "/rest/api/3/issue/bulkfetch"
API_ROOT = "/rest/api/3"

JIRA_REST_TOOL = tool_spec(
    "jira_rest",
    "Jira Cloud (REST v3)",
    "/rest/api/3/issue/SD-4/comment",
    "Reads under /rest/api/3/; writes only on your own issue (comment, transition, edit).",
)


def _headers(tracker: TrackerSettings) -> dict[str, str]:
    if not tracker.api_key:
        raise TrackerError("missing_tracker_secret", "no Jira API token (tracker.api_token)")
    if not tracker.email:
        raise TrackerError("invalid_tracker_config", "tracker.email is not set")
    pair = base64.b64encode(f"{tracker.email}:{tracker.api_key}".encode()).decode()
    return {
        "Authorization": f"Basic {pair}",
        "Accept": "application/json",
        "User-Agent": "symphony-tui",
    }


def _base_url(tracker: TrackerSettings) -> str:
    if not tracker.base_url:
        raise TrackerError("invalid_tracker_config", "tracker.base_url is not set")
    return tracker.base_url.rstrip("/")


def _secrets(tracker: TrackerSettings) -> tuple[str, ...]:
    key = tracker.api_key or ""
    basic = base64.b64encode(f"{tracker.email}:{key}".encode()).decode() if key else ""
    return tuple(s for s in (key, basic) if s)


def jql_string(value: str) -> str:
    """``value`` as a JQL string literal (double quotes, ``\\`` and ``"`` escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class JiraTracker(RestTracker):
    """The Jira tracker (implements :class:`~symphony_tui.trackers.base.Tracker`). Methods
    raise :class:`TrackerError` with a portable category (§11.4): ``missing_tracker_secret``,
    ``invalid_tracker_config``, ``tracker_request``, ``tracker_status``,
    ``tracker_response`` (a malformed answer, no transition to the state asked for),
    ``tracker_pagination``, ``tracker_rate_limited`` (with ``retry_at``)."""

    kind = "jira"
    profile = JIRA_PROFILE
    VENDOR = Vendor("Jira", "jira", _base_url, _headers, _secrets)
    agent_tool = JIRA_REST_TOOL

    # -- the Tracker protocol ----------------------------------------------------------

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Issues of the project in ``tracker.active_states``, oldest first; those waiting
        for blockers with ``dispatchable=False``."""
        tracker = self._tracker()
        extra = self._assignee_clause(tracker.assignee)
        pairs = await self._search(list(tracker.active_states), extra)
        return [self._route(raw, issue, tracker) for raw, issue in pairs]

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues of the project in any of ``states``; ``[]`` without a request when empty."""
        names = list(dict.fromkeys(s.strip() for s in states if s and s.strip()))
        if not names:
            return []
        tracker = self._tracker()
        return [self._route(raw, issue, tracker) for raw, issue in await self._search(names, "")]

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current snapshots of ``issue_ids`` (ids or keys; a set), input order; issues
        Jira does not return, or of another project, are absent; no ids, no request. A
        malformed requested record raises ``tracker_response``."""
        ids = dedupe_ids([str(i).strip() for i in issue_ids])
        if not ids:
            return []
        tracker = self._tracker()
        project = self._project(tracker).lower()
        found: dict[str, Issue] = {}
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            body = {"issueIdsOrKeys": chunk, "fields": list(normalize.FIELDS)}
            data = await self.client.json("POST", BULK, body=body)
            if not isinstance(data, dict) or not isinstance(data.get("issues"), list):
                raise TrackerError("tracker_response", "bulkfetch answer has no issues list")
            for raw in data["issues"]:
                key = normalize.project_key(raw)
                if key is None:
                    raise TrackerError("tracker_response", "issue without fields.project.key")
                if key.lower() != project:
                    continue
                issue = self._route(
                    raw, normalize.normalize_issue(raw, _base_url(tracker)), tracker
                )
                found[issue.id] = issue
                found[issue.identifier.lower()] = issue
        out: list[Issue] = []
        for i in ids:
            issue = found.get(i) or found.get(i.lower())
            if issue is not None and issue not in out:
                out.append(issue)
        return out

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move ``issue_id`` along its workflow to the status named ``state``; returns the
        issue afterwards."""
        target = state.strip()
        path = f"{API_ROOT}/issue/{_segment(issue_id)}/transitions"
        data = await self.client.json("GET", path)
        transitions = data.get("transitions") if isinstance(data, dict) else None
        if not isinstance(transitions, list):
            raise TrackerError("tracker_response", "transitions answer has no list")
        choice = _transition(transitions, target)
        if choice is None:
            names = [_to_name(t) or str(t.get("name")) for t in transitions if isinstance(t, dict)]
            known = ", ".join(n for n in names if n) or "none"
            raise TrackerError(
                "tracker_response", f"no transition to {target!r} (available: {known})"
            )
        await self.client.json("POST", path, body={"transition": {"id": choice}})
        moved = await self.fetch_issues_by_ids([issue_id])
        if not moved:
            raise TrackerError("tracker_response", f"issue {issue_id} not returned after move")
        log.info("jira issue moved issue=%s state=%s", moved[0].identifier, moved[0].state)
        return moved[0]

    async def rest(
        self, method: str, path: str, params: dict[str, Any] | None, body: Any
    ) -> RestResponse:
        """One request with the configured credential."""
        return await self.client.request(method, path, params=params, body=body)

    async def call_agent_tool(self, issue: Issue, arguments: Any) -> ToolResult:
        """One ``jira_rest`` call for the session working on ``issue``: reads under
        ``/rest/api/3/``, writes only on that issue (by id or key) and below."""

        def refusal(method: str, path: str, body: Any) -> str | None:
            if not under(path, API_ROOT):
                return f"path must be under {API_ROOT}/"
            if method == "GET" or (method == "POST" and under(path, SEARCH)):
                return None
            own = (f"{API_ROOT}/issue/{issue.id}", f"{API_ROOT}/issue/{issue.identifier}")
            if any(under(path, p) for p in own):
                return deletes_itself(method, path, *own)
            return f"writes are limited to your own issue: {own[1]}"

        return await call_rest_tool(self.client, arguments, refusal)

    # -- internals ---------------------------------------------------------------------

    def _route(self, raw: Any, issue: Issue, tracker: TrackerSettings) -> Issue:
        """``issue`` with ``dispatchable`` decided: not waiting for blockers, and assigned
        to ``tracker.assignee`` when that is an account id (``me`` is the search's
        ``currentUser()``)."""
        waits = normalize.waits_for_blockers(raw, issue, tracker.terminal_states)
        who = (tracker.assignee or "").strip()
        assigned = not who or who.lower() == "me" or issue.assignee_id == who
        return issue.model_copy(update={"dispatchable": assigned and not waits})

    def _project(self, tracker: TrackerSettings) -> str:
        if not tracker.project_key:
            raise TrackerError("invalid_tracker_config", "tracker.project_key is not set")
        return tracker.project_key.strip()

    def _assignee_clause(self, assignee: str | None) -> str:
        value = (assignee or "").strip()
        if not value:
            return ""
        if value.lower() == "me":
            return " AND assignee = currentUser()"
        return f" AND assignee = {jql_string(value)}"

    async def _search(self, states: list[str], extra: str) -> list[tuple[dict, Issue]]:
        """(record, issue) for every issue of the project in ``states``, oldest first."""
        tracker = self._tracker()
        project = self._project(tracker)
        quoted = ", ".join(jql_string(s) for s in states)
        jql = (
            f"project = {jql_string(project)} AND status IN ({quoted}){extra} ORDER BY created ASC"
        )
        wanted = {s.lower() for s in states}
        base_url = _base_url(tracker)
        out: dict[str, tuple[dict, Issue]] = {}
        token: str | None = None
        seen: set[str] = set()
        skipped = 0
        for _ in range(MAX_PAGES):
            body: dict[str, Any] = {
                "jql": jql,
                "fields": list(normalize.FIELDS),
                "maxResults": PAGE_SIZE,
            }
            if token is not None:
                body["nextPageToken"] = token
            data = await self.client.json("POST", SEARCH, body=body)
            if not isinstance(data, dict) or not isinstance(data.get("issues"), list):
                raise TrackerError("tracker_response", "search answer has no issues list")
            for raw in data["issues"]:
                try:
                    issue = normalize.normalize_issue(raw, base_url)
                except TrackerError as exc:
                    skipped += 1
                    log.warning("tracker record omitted kind=jira reason=%s", exc.message)
                    continue
                if issue.state.lower() in wanted and isinstance(raw, dict):
                    out.setdefault(issue.id, (raw, issue))
            next_token = data.get("nextPageToken")
            last = data.get("isLast")
            if last is True or (last is None and not next_token):
                if skipped:
                    log.warning("jira search skipped %d malformed records", skipped)
                return list(out.values())
            if not isinstance(next_token, str) or not next_token:
                raise TrackerError(
                    "tracker_pagination", "isLast is false but nextPageToken is empty"
                )
            if next_token in seen:
                raise TrackerError("tracker_pagination", "nextPageToken repeats")
            seen.add(next_token)
            token = next_token
        raise TrackerError("tracker_pagination", f"search has more than {MAX_PAGES} pages")


def _to_name(transition: dict) -> str | None:
    to = transition.get("to") if isinstance(transition.get("to"), dict) else {}
    name = to.get("name")
    return name if isinstance(name, str) else None


def _transition(transitions: list, target: str) -> str | None:
    """The id of the transition into status ``target``, else of the one named ``target``."""
    wanted = target.lower()
    usable = [t for t in transitions if isinstance(t, dict) and isinstance(t.get("id"), str)]
    for t in usable:
        if (_to_name(t) or "").strip().lower() == wanted:
            return t["id"]
    for t in usable:
        if str(t.get("name") or "").strip().lower() == wanted:
            return t["id"]
    return None


def _segment(issue_id: str) -> str:
    text = str(issue_id).strip()
    if not text or not all(c.isalnum() or c in "-_" for c in text):
        raise TrackerError("tracker_response", f"{issue_id!r} is not an issue id or key")
    return text
