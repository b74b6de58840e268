"""``tracker.kind: gitlab``: GitLab REST v4 project issues (spec §11; the reference's GitLab
adapter, with labels as states and ``blocks`` links as blockers).

**Reads**: ``GET /projects/<project_path>/issues`` (``state`` opened / closed / all,
``order_by=created_at&sort=asc``, 100 a page following ``X-Next-Page``; without that header
a full page means another one). Candidates are open issues in ``tracker.active_states``
(``tracker.assignee``: a username, or ``me`` for ``scope=assigned_to_me``), each with its
blockers from ``GET .../issues/<iid>/links`` (``link_type: is_blocked_by``; GitLab offers
blocking links on its paid tiers, elsewhere the list is plain relations and nothing blocks).
An issue in the first active state (work not started) whose blocker is not in a terminal
state is returned with ``dispatchable=False``. A malformed record in a state read is logged and skipped; in a read by id it
fails the read.

**Refresh by id**: ``iids[]`` filters, 100 a request (none for no ids); issues GitLab does
not return are absent. Only an issue in the first active state has its links read (its
``dispatchable`` depends on them); one no longer assigned to ``tracker.assignee`` (a
username) is ``dispatchable=False``.

**Moves**: ``PUT .../issues/<iid>``: to a ``state_labels`` name the label is added (the other
state labels removed, the issue reopened if closed); to ``closed`` or another terminal state
the issue is closed; to ``opened`` it is reopened without state labels.

Auth is the ``PRIVATE-TOKEN`` header (a personal, project or group access token).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from symphony_tui.agents.base import ToolResult
from symphony_tui.config.settings import TrackerSettings
from symphony_tui.domain import Issue
from symphony_tui.trackers.base import TrackerError, dedupe_ids
from symphony_tui.trackers.gitlab import normalize
from symphony_tui.trackers.gitlab.profile import GITLAB_PROFILE
from symphony_tui.trackers.rest import RestTracker, Vendor
from symphony_tui.trackers.rest_tool import call_rest_tool, deletes_itself, tool_spec, under

log = logging.getLogger(__name__)

PER_PAGE = 100
MAX_PAGES = 500

GITLAB_API_TOOL = tool_spec(
    "gitlab_api",
    "GitLab (REST v4)",
    "/projects/group%2Fproject/issues/7",
    "Reads within the configured project; writes only on your own issue.",
)


def _headers(tracker: TrackerSettings) -> dict[str, str]:
    if not tracker.api_key:
        raise TrackerError("missing_tracker_secret", "no GitLab token (tracker.api_key)")
    return {
        "PRIVATE-TOKEN": tracker.api_key,
        "Accept": "application/json",
        "User-Agent": "symphony-tui",
    }


def _base_url(tracker: TrackerSettings) -> str:
    return tracker.api_url.rstrip("/")


def _secrets(tracker: TrackerSettings) -> tuple[str, ...]:
    return (tracker.api_key,) if tracker.api_key else ()


class GitLabTracker(RestTracker):
    """The GitLab tracker (implements :class:`~symphony_tui.trackers.base.Tracker`). Methods
    raise :class:`TrackerError` with a portable category (§11.4): ``missing_tracker_secret``,
    ``invalid_tracker_config``, ``tracker_request``, ``tracker_status``,
    ``tracker_response`` (a malformed answer, a state it cannot move to),
    ``tracker_pagination``, ``tracker_rate_limited`` (with ``retry_at``)."""

    kind = "gitlab"
    profile = GITLAB_PROFILE
    VENDOR = Vendor("GitLab", "gitlab", _base_url, _headers, _secrets)
    agent_tool = GITLAB_API_TOOL

    # -- the Tracker protocol ----------------------------------------------------------

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Open issues in ``tracker.active_states``, oldest first, with their blockers;
        those waiting for them with ``dispatchable=False``."""
        tracker = self._tracker()
        extra: list[tuple[str, Any]] = []
        who = (tracker.assignee or "").strip()
        if who.lower() == "me":
            extra.append(("scope", "assigned_to_me"))
        elif who:
            extra.append(("assignee_username[]", who))
        listed = await self._listed("opened", extra)
        out = []
        for issue in listed:
            if not tracker.is_active(issue.state):
                continue
            blockers = await self._blockers(int(issue.id))
            out.append(self._route(issue.model_copy(update={"blocked_by": blockers}), tracker))
        return out

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues in any of ``states``; ``[]`` without a request when empty."""
        tracker = self._tracker()
        names = {s.strip().lower() for s in states if s and s.strip()}
        if not names:
            return []
        with_closed = "closed" in names or any(tracker.is_terminal(n) for n in names)
        only_closed = names == {"closed"}
        scope = "closed" if only_closed else ("all" if with_closed else "opened")
        return [i for i in await self._listed(scope, []) if i.state.strip().lower() in names]

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current snapshots of ``issue_ids`` (iids; a set), input order; issues GitLab
        does not return are absent; no ids, no request. A malformed requested record raises
        ``tracker_response``."""
        iids = list(dict.fromkeys(_iid(i) for i in dedupe_ids([str(i).strip() for i in issue_ids])))
        if not iids:
            return []
        tracker = self._tracker()
        found: dict[int, Issue] = {}
        for start in range(0, len(iids), PER_PAGE):
            chunk = iids[start : start + PER_PAGE]
            params: list[tuple[str, Any]] = [("state", "all"), ("per_page", PER_PAGE)]
            params += [("iids[]", n) for n in chunk]
            page = await self.client.json("GET", self._issues_path(), params=params)
            if not isinstance(page, list):
                raise TrackerError("tracker_response", "issue list answer is not a list")
            for raw in page:
                issue = normalize.normalize_issue(raw, tracker)
                if self._gated(issue, tracker):
                    blockers = await self._blockers(int(issue.id))
                    issue = issue.model_copy(update={"blocked_by": blockers})
                found[int(issue.id)] = self._route(issue, tracker)
        return [found[n] for n in iids if n in found]

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move issue ``issue_id`` to ``state`` (see the module doc); returns it afterwards."""
        tracker = self._tracker()
        iid = _iid(issue_id)
        path = f"{self._issues_path()}/{iid}"
        current = await self.client.json("GET", path)
        if not isinstance(current, dict):
            raise TrackerError("tracker_response", f"issue {iid} answer is not an object")
        have = [n for n in current.get("labels") or [] if isinstance(n, str)]
        state_labels = {s.strip().lower(): s for s in tracker.state_labels}
        carried = [n for n in have if n.strip().lower() in state_labels]
        wanted = state.strip().lower()
        body: dict[str, Any]
        if wanted in state_labels:
            body = {"add_labels": [state_labels[wanted]]}
            others = [n for n in carried if n.strip().lower() != wanted]
            if others:
                body["remove_labels"] = others
            if current.get("state") == "closed":
                body["state_event"] = "reopen"
        elif wanted == "closed" or (tracker.is_terminal(state) and wanted != "opened"):
            body = {"state_event": "close"}
        elif wanted == "opened":
            body = {"state_event": "reopen"}
            if carried:
                body["remove_labels"] = carried
        else:
            known = ", ".join(["opened", "closed", *tracker.state_labels])
            raise TrackerError("tracker_response", f"cannot move to {state!r} (use: {known})")
        moved = normalize.normalize_issue(await self.client.json("PUT", path, body=body), tracker)
        log.info("gitlab issue moved iid=%s state=%s", iid, moved.state)
        return moved

    async def call_agent_tool(self, issue: Issue, arguments: Any) -> ToolResult:
        """One ``gitlab_api`` call for the session working on ``issue``: reads under the
        configured project, writes only on that issue and below."""
        project = f"/projects/{self._project_ref()}"

        def refusal(method: str, path: str, body: Any) -> str | None:
            if not under(path, project):
                return f"path must be under {project}"
            own = f"{project}/issues/{issue.id}"
            if method == "GET":
                return None
            if under(path, own):
                return deletes_itself(method, path, own)
            return f"writes are limited to your own issue: {project}/issues/{issue.id}"

        return await call_rest_tool(self.client, arguments, refusal)

    # -- internals ---------------------------------------------------------------------

    @staticmethod
    def _gated(issue: Issue, tracker: TrackerSettings) -> bool:
        """Whether ``issue`` is in the first active state, where blockers hold it back."""
        first = tracker.active_states[0].strip().lower() if tracker.active_states else None
        return issue.state.strip().lower() == first

    def _route(self, issue: Issue, tracker: TrackerSettings) -> Issue:
        """``issue`` with ``dispatchable`` decided: not in the first active state with a
        blocker outside the terminal states, and assigned to ``tracker.assignee`` when that
        is a username (``me`` is the list's ``scope=assigned_to_me``)."""
        waits = self._gated(issue, tracker) and any(
            b.state is None or not tracker.is_terminal(b.state) for b in issue.blocked_by
        )
        who = (tracker.assignee or "").strip()
        assigned = not who or who.lower() == "me" or who in issue.assignees
        return issue.model_copy(update={"dispatchable": assigned and not waits})

    def _project_ref(self) -> str:
        path = (self._tracker().project_path or "").strip().strip("/")
        if not path:
            raise TrackerError("invalid_tracker_config", "tracker.project_path is not set")
        return quote(path, safe="")

    def _issues_path(self) -> str:
        return f"/projects/{self._project_ref()}/issues"

    async def _listed(self, scope: str, extra: list[tuple[str, Any]]) -> list[Issue]:
        tracker = self._tracker()
        out: dict[int, Issue] = {}
        page = 1
        skipped = 0
        for _ in range(MAX_PAGES):
            params: list[tuple[str, Any]] = [
                ("state", scope),
                ("order_by", "created_at"),
                ("sort", "asc"),
                ("per_page", PER_PAGE),
                ("page", page),
                *extra,
            ]
            response = await self.client.request("GET", self._issues_path(), params=params)
            items = self.client.ok_body(response, self._issues_path())
            if not isinstance(items, list):
                raise TrackerError("tracker_response", "issue list answer is not a list")
            for raw in items:
                try:
                    issue = normalize.normalize_issue(raw, tracker)
                except TrackerError as exc:
                    skipped += 1
                    log.warning("tracker record omitted kind=gitlab reason=%s", exc.message)
                    continue
                out.setdefault(int(issue.id), issue)
            following = response.headers.get("x-next-page")
            if following is None:
                more = len(items) >= PER_PAGE
                following = str(page + 1) if more else ""
            if not following.strip():
                if skipped:
                    log.warning("gitlab list skipped %d malformed records", skipped)
                return list(out.values())
            if not following.strip().isdigit() or int(following) <= page:
                raise TrackerError(
                    "tracker_pagination", f"X-Next-Page {following!r} does not move on"
                )
            page = int(following)
        raise TrackerError("tracker_pagination", f"more than {MAX_PAGES} pages")

    async def _blockers(self, iid: int) -> tuple:
        tracker = self._tracker()
        links = await self.client.json("GET", f"{self._issues_path()}/{iid}/links")
        if not isinstance(links, list):
            raise TrackerError("tracker_response", f"links of issue {iid} are not a list")
        refs = (normalize.blocker(link, tracker) for link in links)
        return tuple(ref for ref in refs if ref is not None)


def _iid(issue_id: str) -> int:
    text = str(issue_id).strip().removeprefix("GL-").removeprefix("#")
    if not text.isdigit() or int(text) <= 0:
        raise TrackerError("tracker_response", f"{issue_id!r} is not an issue iid")
    return int(text)
