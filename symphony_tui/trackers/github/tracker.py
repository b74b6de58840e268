"""``tracker.kind: github``: issues of one repository (GitHub REST and GraphQL APIs).

Reads:

* **Candidates** and **issues by state**: ``GET /repos/{owner}/{repo}/issues`` 100 a page,
  ``sort=created&direction=asc`` (oldest first, as the reference's adapter), every page
  followed through ``Link`` and sent with its ETag (a 304 reuses the kept page). Pull
  requests are dropped. With a board the states come from the board's items
  (:mod:`.board`), joined by issue number; an open issue not on the board has no state and
  is not a candidate.
* **Blockers**: GitHub's issue dependencies. An issue whose ``issue_dependencies_summary``
  counts blockers gets ``GET .../issues/{n}/dependencies/blocked_by`` (ETag'd); a closed
  blocker is resolved (reported in the first terminal state), an open one in its board
  status (or ``open``).
* **By-id refresh**: one GraphQL query per :data:`queries.BATCH` issues (aliased
  ``issue(number:)``), so 60 running issues cost two requests; an issue GitHub no longer
  returns (deleted, transferred, hidden) is absent; a malformed one fails the refresh. A
  ``Todo`` issue's blockers are read too (its ``dispatchable`` depends on them).
* **dispatchable**: false for an issue not assigned to ``tracker.assignee`` (when set), and
  for a ``Todo`` issue with an open blocker; such issues are still listed (§11.1).
  Malformed list items are logged and left out.

Moves (:meth:`GitHubTracker.move_issue`): on a board, the status field is set; with
``state_labels`` the state label is swapped (and a closed issue reopened) by one ``PATCH``;
``closed`` (or a terminal state that is no state label) closes the issue, ``open`` reopens it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import httpx

from symphony_tui.config.settings import Settings, TrackerSettings
from symphony_tui.domain import BlockerRef, Issue, IssueComment
from symphony_tui.trackers.base import TrackerError, dedupe_ids, todo_waits_for_blockers
from symphony_tui.trackers.github import normalize, queries
from symphony_tui.trackers.github.board import Board, BoardInfo
from symphony_tui.trackers.github.client import GitHubClient, RestResponse
from symphony_tui.trackers.github.normalize import BoardValues
from symphony_tui.trackers.github.profile import GITHUB_PROFILE
from symphony_tui.trackers.github.pulls import GitHubPulls

#: Comments given to a prompt that uses ``issue.comments``: the newest this many.
COMMENT_LIMIT = 50

log = logging.getLogger(__name__)

PER_PAGE = 100


class GitHubTracker:
    """The GitHub tracker (implements :class:`~symphony_tui.trackers.base.Tracker`).

    ``settings`` is read on every call (hot reload); ``transport`` replaces the network in
    tests; ``clock`` gives aware UTC datetimes and drives the rate-limit pause. Methods raise
    :class:`TrackerError`: ``missing_github_token``, ``github_api_request``,
    ``github_api_status``, ``github_graphql_errors``, ``github_unknown_payload``,
    ``github_unknown_project``, ``github_unknown_state``, ``rate_limited`` (with ``retry_at``).
    """

    kind = "github"
    profile = GITHUB_PROFILE

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self.client = GitHubClient(settings, transport=transport, clock=clock)
        self._board = Board(settings, self.client)
        #: Pull requests of the repository's issues (links, checks, reviews, merges).
        self.pulls = GitHubPulls(self.client, lambda: _repo(self._tracker()))
        self._last_board: dict[int, BoardValues] | None = None
        self._viewer: str | None = None

    def secret_environment_names(self) -> frozenset[str]:
        """``GITHUB_TOKEN`` and the variable ``tracker.token`` (or ``api_key``) names
        (spec §15.3)."""
        return frozenset({"GITHUB_TOKEN", *self._settings().tracker.secret_env_names})

    # -- rate limits, for the console --------------------------------------------------

    @property
    def paused_until(self) -> datetime | None:
        """End of the current rate-limit pause (UTC), or ``None``."""
        return self.client.paused_until

    def rate_limit_status(self) -> dict[str, Any]:
        return self.client.rate_limit_status()

    # -- the Tracker protocol ----------------------------------------------------------

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Open issues in ``tracker.active_states``, oldest first, with their blockers."""
        tracker = self._tracker()
        issues = await self._listed("open", tracker)
        wanted = [(item, i) for item, i in issues if tracker.is_active(i.state)]
        who = await self._assignee_filter(tracker)
        board = self._last_board
        out = []
        for item, issue in wanted:
            if normalize.blocker_count(item) > 0:
                blockers = await self._blockers(int(issue.id), tracker, board)
                issue = issue.model_copy(update={"blocked_by": blockers})
            out.append(self._route(issue, who, tracker))
        return out

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Issues in any of ``states``; ``[]`` without a request when empty."""
        tracker = self._tracker()
        names = {s.strip().lower() for s in states if s and s.strip()}
        if not names:
            return []
        if tracker.project is not None:
            board = await self._board.values()
            numbers = [n for n, v in board.items() if v.status and v.status.lower() in names]
            return await self.fetch_issues_by_ids([str(n) for n in numbers])
        only_closed = names == {"closed"}
        with_closed = "closed" in names or any(tracker.is_terminal(n) for n in names)
        scope = "closed" if only_closed else ("all" if with_closed else "open")
        who = await self._assignee_filter(tracker)
        return [
            self._route(i, who, tracker)
            for _, i in await self._listed(scope, tracker)
            if i.state.lower() in names
        ]

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current issues for ``issue_ids`` (issue numbers), input order; issues GitHub
        does not return are absent, a malformed one raises; ``[]`` makes no request. One
        GraphQL request per :data:`queries.BATCH` ids."""
        tracker = self._tracker()
        numbers = list(dict.fromkeys(_number(i) for i in dedupe_ids(issue_ids)))
        if not numbers:
            return []
        who = await self._assignee_filter(tracker)
        owner, name = _repo(tracker)
        board = tracker.project is not None
        priority = board and bool(tracker.project and tracker.project.priority_field)
        info = await self._board.info() if board else None
        found: dict[int, Issue] = {}
        for start in range(0, len(numbers), queries.BATCH):
            chunk = numbers[start : start + queries.BATCH]
            variables: dict[str, Any] = {"owner": owner, "name": name}
            if board and tracker.project is not None:
                variables["statusField"] = tracker.project.status_field
                if priority:
                    variables["priorityField"] = tracker.project.priority_field
            document = queries.issues_by_numbers(chunk, board=board, priority=priority)
            response = await self.client.graphql_raw(document, variables)
            repository = _repository(response, self.client)
            for n in chunk:
                node = repository.get(f"i{n}")
                if not isinstance(node, dict):
                    continue  # NOT_FOUND: deleted, transferred or hidden
                values = self._board.from_issue_node(node, info) if info is not None else None
                issue = normalize.from_graphql(node, tracker, values)
                if issue is not None:
                    found[n] = issue
        for n, issue in found.items():
            if issue.state.strip().lower() == "todo":
                # Only a Todo issue's blockers decide anything (dispatchable): one
                # dependencies read each, as candidates do for issues that have blockers.
                board = self._last_board if tracker.project is not None else None
                blockers = await self._blockers(n, tracker, board)
                issue = issue.model_copy(update={"blocked_by": blockers})
            found[n] = self._route(issue, who, tracker)
        return [found[n] for n in numbers if n in found]

    async def fetch_issue_comments(self, issue: Issue) -> tuple[IssueComment, ...]:
        """The newest :data:`COMMENT_LIMIT` comments of ``issue``, oldest first (for a prompt
        that uses ``issue.comments``): ``GET .../issues/{n}/comments``, 100 a page."""
        owner, name = _repo(self._tracker())
        items = await self.client.paged(
            f"/repos/{owner}/{name}/issues/{_number(issue.id)}/comments", {"per_page": 100}
        )
        return normalize.comments_rest(items)[-COMMENT_LIMIT:]

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move issue ``issue_id`` to ``state`` (see the module doc); returns it afterwards.
        Raises ``github_unknown_state`` for a state this configuration cannot set."""
        tracker = self._tracker()
        number = _number(issue_id)
        target = state.strip()
        if tracker.project is not None:
            await self._move_on_board(number, target, tracker)
        else:
            await self._patch_state(number, target, tracker)
        moved = await self.fetch_issues_by_ids([str(number)])
        if not moved:
            raise TrackerError("github_unknown_payload", f"issue {number} not returned after move")
        log.info("github issue moved number=%s state=%s", number, moved[0].state)
        return moved[0]

    async def rest(
        self, method: str, path: str, params: dict[str, Any] | None, body: Any
    ) -> RestResponse:
        """One REST call with the configured token (the ``github_api`` tool)."""
        return await self.client.request(method, path, params=params, body=body)

    @property
    def repo(self) -> str:
        """The configured ``owner/name``."""
        return (self._tracker().repo or "").strip().strip("/")

    def redact(self, text: str) -> str:
        """``text`` with the token replaced by ``[redacted]``."""
        return self.client.redact(text)

    async def config_problems(self) -> list[str]:
        """What of the configuration the repository's board contradicts (``doctor``), one
        line each: a configured state that is no option of the status field (it could
        never match, so such issues are never dispatched or never seen as done), a
        ``priority_field`` the board lacks or that is neither single-select nor a number.
        Without a board: nothing to check. Raises :class:`TrackerError` like a fetch."""
        tracker = self._tracker()
        project = tracker.project
        if project is None:
            return []
        info = await self._board.info()
        options = {name.lower() for name in info.options}
        listed = ", ".join(info.options) or "none"
        problems = [
            f"tracker.{kind}: {state!r} is not an option of the project's "
            f"{project.status_field!r} field (options: {listed})"
            for kind, states in (
                ("active_states", tracker.active_states),
                ("terminal_states", tracker.terminal_states),
            )
            for state in states
            if state.lower() not in options
        ]
        if project.priority_field and info.priority_kind not in ("single_select", "number"):
            found = "not found" if info.priority_kind is None else f"a {info.priority_kind} field"
            problems.append(
                f"tracker.project.priority_field: {project.priority_field!r} is {found} on the "
                "project (a single-select or number field is needed)"
            )
        return problems

    async def aclose(self) -> None:
        await self.client.aclose()

    # -- internals ---------------------------------------------------------------------

    def _tracker(self) -> TrackerSettings:
        return self._settings().tracker

    async def _listed(self, scope: str, tracker: TrackerSettings) -> list[tuple[dict, Issue]]:
        """(REST item, issue) of every issue listed with ``state=scope``, states resolved."""
        owner, name = _repo(tracker)
        items = await self.client.paged(
            f"/repos/{owner}/{name}/issues",
            {
                "state": scope,
                "per_page": PER_PAGE,
                "sort": "created",
                "direction": "asc",
            },
        )
        board = await self._board.values() if tracker.project is not None else None
        self._last_board = board
        out: list[tuple[dict, Issue]] = []
        for item in items:
            if isinstance(item, dict) and "pull_request" in item:
                continue
            values = (
                board.get(item.get("number"))  # type: ignore[arg-type]  # no number (None) finds none
                if board is not None and isinstance(item, dict)
                else None
            )
            try:
                issue = normalize.from_rest(item, tracker, values)
            except TrackerError as exc:
                log.warning("tracker record omitted kind=github reason=%s", exc.message)
                continue
            if issue is not None:
                out.append((item, issue))
        return out

    async def _assignee_filter(self, tracker: TrackerSettings) -> str | None:
        """The lowercase login issues must be assigned to, or ``None`` for any."""
        if not tracker.assignee or not tracker.assignee.strip():
            return None
        return (await self._assignee(tracker.assignee.strip())).lower()

    @staticmethod
    def _route(issue: Issue, who: str | None, tracker: TrackerSettings) -> Issue:
        """``issue`` with ``dispatchable`` decided: assigned to ``who`` (when set) and not a
        ``Todo`` issue waiting for an open blocker."""
        assigned = who is None or who in _lower(issue.assignees)
        waits = todo_waits_for_blockers(issue.state, issue.blocked_by, tracker.is_terminal)
        return issue.model_copy(update={"dispatchable": assigned and not waits})

    async def _assignee(self, value: str) -> str:
        """``tracker.assignee``: a login, or ``me`` (the token's own login, asked once)."""
        if value.lower() != "me":
            return value
        if self._viewer is None:
            data = await self.client.graphql(queries.VIEWER)
            login = (data.get("viewer") or {}).get("login")
            if not isinstance(login, str) or not login:
                raise TrackerError("github_unknown_payload", "viewer has no login")
            self._viewer = login
        return self._viewer

    async def _blockers(
        self, number: int, tracker: TrackerSettings, board: dict[int, BoardValues] | None
    ) -> tuple[BlockerRef, ...]:
        owner, name = _repo(tracker)
        items = await self.client.paged(
            f"/repos/{owner}/{name}/issues/{number}/dependencies/blocked_by",
            {"per_page": PER_PAGE},
        )
        done = tracker.terminal_states[0] if tracker.terminal_states else "closed"
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("state") == "closed":
                state: str | None = done
            elif board is not None and isinstance(item.get("number"), int):
                values = board.get(item["number"])
                state = values.status if values is not None and values.status else "open"
            else:
                state = "open"
            out.append(normalize.blocker_ref(item, state))
        return tuple(out)

    async def _move_on_board(self, number: int, state: str, tracker: TrackerSettings) -> None:
        info: BoardInfo = await self._board.info()
        owner, name = _repo(tracker)
        variables: dict[str, Any] = {"owner": owner, "name": name}
        if tracker.project is not None:
            variables["statusField"] = tracker.project.status_field
        document = queries.issues_by_numbers([number], board=True, priority=False)
        response = await self.client.graphql_raw(document, variables)
        node = _repository(response, self.client).get(f"i{number}")
        if not isinstance(node, dict):
            raise TrackerError("github_unknown_payload", f"issue {number} not found")
        values = self._board.from_issue_node(node, info)
        if values is None or values.item_id is None:
            raise TrackerError("github_unknown_state", f"issue {number} is not on the board")
        await self._board.move(values.item_id, state)

    async def _patch_state(self, number: int, state: str, tracker: TrackerSettings) -> None:
        owner, name = _repo(tracker)
        path = f"/repos/{owner}/{name}/issues/{number}"
        wanted = state.lower()
        labels = {s.strip().lower(): s for s in tracker.state_labels}
        body: dict[str, Any]
        if wanted in labels:
            current = self.client.ok_body(await self.client.request("GET", path), path)
            names = [
                str(label.get("name")) if isinstance(label, dict) else str(label)
                for label in (current.get("labels") or [] if isinstance(current, dict) else [])
            ]
            kept = [n for n in names if n.strip().lower() not in labels]
            body = {"labels": [*kept, labels[wanted]], "state": "open"}
        elif wanted == "closed" or (tracker.is_terminal(state) and wanted != "open"):
            body = {"state": "closed", "state_reason": "completed"}
        elif wanted == "open":
            body = {"state": "open"}
        else:
            known = ", ".join(["open", "closed", *tracker.state_labels])
            raise TrackerError("github_unknown_state", f"cannot move to {state!r} (use: {known})")
        self.client.ok_body(await self.client.request("PATCH", path, body=body), path)


def _repo(tracker: TrackerSettings) -> tuple[str, str]:
    repo = tracker.repo or ""
    owner, _, name = repo.partition("/")
    if not owner or not name:
        raise TrackerError("missing_github_repo", "tracker.repo is not owner/name")
    return owner, name


def _number(issue_id: str) -> int:
    text = str(issue_id).strip().removeprefix("GH-").removeprefix("#")
    if not text.isdigit() or int(text) <= 0:
        raise TrackerError("github_unknown_payload", f"{issue_id!r} is not an issue number")
    return int(text)


def _repository(response: RestResponse, client: GitHubClient) -> dict:
    """``data.repository`` of a by-number answer. ``NOT_FOUND`` errors for single aliases
    are expected (deleted issues); any other error, or no repository, raises."""
    body = response.body
    if response.status != 200:
        client.ok_body(response, "GraphQL")
    if not isinstance(body, dict):
        raise TrackerError("github_unknown_payload", "GraphQL answer is not a JSON object")
    errors = [e for e in body.get("errors") or [] if isinstance(e, dict)]
    other = [e for e in errors if e.get("type") != "NOT_FOUND" or len(e.get("path") or []) < 2]
    if other:
        message = "; ".join(str(e.get("message")) for e in other[:3])
        raise TrackerError("github_graphql_errors", client.redact(message))
    repository = (body.get("data") or {}).get("repository")
    if not isinstance(repository, dict):
        raise TrackerError("github_unknown_payload", "GraphQL answer has no repository")
    return repository


def _lower(values: Sequence[str]) -> set[str]:
    return {v.lower() for v in values}
