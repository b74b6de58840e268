"""A fake GitLab: a real HTTP server on 127.0.0.1 serving, under ``/api/v4``, the REST
operations the GitLab tracker and the ``gitlab_api`` tool use, each request checked against
GitLab's published description (the operations in ``data/gitlab_openapi_v2.yaml``; see
:mod:`.fake_rest` for the checks and the shared knobs). The description carries no response
schemas for them (README beside it), so answers are not checked.

Served: ``GET /projects/:path/issues`` (``state``, ``order_by`` / ``sort`` on ``created_at``,
``per_page`` <= 100, ``page``, ``iids[]``, ``assignee_username[]``, ``scope=assigned_to_me``;
``X-Page`` / ``X-Next-Page`` / ``X-Total`` headers), ``GET|PUT .../issues/:iid``
(``state_event``, ``add_labels``, ``remove_labels``, ``labels``, ``title``,
``description``) and ``GET .../issues/:iid/links`` (``link_type`` ``is_blocked_by`` /
``blocks`` / ``relates_to``). Requests need ``PRIVATE-TOKEN``.

Usage::

    with FakeGitLab(token="glpat-test", project="group/app") as gitlab:
        gitlab.add_issue("Fix the login", labels=["Todo"])
        settings = {"kind": "gitlab", "api_url": gitlab.url, "api_key": "glpat-test",
                    "project_path": "group/app"}
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from symphony_tui_testing.fake_rest import Answer, FakeRest
from symphony_tui_testing.openapi_contract import OpenApiContract

DATA = Path(__file__).parent / "data" / "gitlab_openapi_v2.yaml"


@functools.cache
def gitlab_contract() -> OpenApiContract:
    """GitLab's description of the operations used (loaded once)."""
    return OpenApiContract(
        yaml.safe_load(DATA.read_text()),
        uri="https://gitlab.example/openapi.json",
        vendor="GitLab",
        prefix="/api/v4",
    )


@dataclass
class GitLabIssue:
    """One fixture issue; ``blocked_by`` lists iids of issues that block this one."""

    iid: int
    title: str
    state: str = "opened"
    description: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    created_at: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    updated_at: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    blocked_by: list[int] = field(default_factory=list)
    raw: dict | None = None
    """When set, served instead of the normal record (malformed-record tests)."""


class FakeGitLab(FakeRest):
    """GitLab REST v4 over :class:`GitLabIssue` fixtures (see the module docstring)."""

    vendor = "GitLab"
    prefix = "/api/v4"

    def __init__(
        self,
        *,
        token: str = "glpat-fake-token",
        project: str = "group/app",
        username: str = "symphony-bot",
        clock: Callable[[], datetime] | None = None,
        validate: bool = True,
        next_page_headers: bool = True,
    ) -> None:
        super().__init__(clock=clock, validate=validate)
        self.token = token
        self.project = project
        self.username = username
        self.next_page_headers = next_page_headers
        self.issues: dict[int, GitLabIssue] = {}

    def contract(self) -> OpenApiContract:
        return gitlab_contract()

    def check_answer(self, method: str, path: str, status: int, payload: Any) -> list[str]:
        # The description names no schema for these answers (see the module doc); only
        # whether the status is one the operation lists is checked.
        return self.contract().validate_response(method, path, status, None)

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("private-token") == self.token

    # -- fixture data ------------------------------------------------------------------

    def add_issue(
        self,
        title: str,
        *,
        state: str = "opened",
        description: str | None = None,
        labels: Iterable[str] = (),
        assignees: Iterable[str] = (),
        blocked_by: Iterable[int] = (),
        raw: dict | None = None,
    ) -> GitLabIssue:
        with self._lock:
            iid = len(self.issues) + 1
            created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=iid)
            issue = GitLabIssue(
                iid,
                title,
                state,
                description,
                list(labels),
                list(assignees),
                created,
                created,
                list(blocked_by),
                raw,
            )
            self.issues[iid] = issue
            return issue

    def add_issues(self, count: int, **kw: Any) -> list[GitLabIssue]:
        return [self.add_issue(f"Issue {n + 1}", **kw) for n in range(count)]

    def update(self, iid: int, **changes: Any) -> None:
        with self._lock:
            issue = self.issues[iid]
            for key, value in changes.items():
                setattr(issue, key, value)
            issue.updated_at = self._clock()

    # -- records -----------------------------------------------------------------------

    def _issue_json(self, issue: GitLabIssue) -> dict:
        if issue.raw is not None:
            return issue.raw
        return {
            "id": 500 + issue.iid,
            "iid": issue.iid,
            "project_id": 42,
            "title": issue.title,
            "description": issue.description,
            "state": issue.state,
            "labels": list(issue.labels),
            "assignees": [{"id": 7, "username": u} for u in issue.assignees],
            "author": {"id": 1, "username": "someone"},
            "created_at": _time(issue.created_at),
            "updated_at": _time(issue.updated_at),
            "web_url": f"https://gitlab.example/{self.project}/-/issues/{issue.iid}",
            "references": {"short": f"#{issue.iid}", "full": f"{self.project}#{issue.iid}"},
        }

    # -- routes ------------------------------------------------------------------------

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        base = f"/projects/{quote(self.project, safe='')}/issues"
        if not (path == base or path.startswith(base + "/")):
            return 404, {"message": "404 Project Not Found"}, {}
        rest = [p for p in path[len(base) :].split("/") if p]
        if not rest:
            return self._list(query) if method == "GET" else (405, None, {})
        if not rest[0].isdigit() or int(rest[0]) not in self.issues:
            return 404, {"message": "404 Issue Not Found"}, {}
        issue = self.issues[int(rest[0])]
        if rest[1:] == [] and method == "GET":
            return 200, self._issue_json(issue), {}
        if rest[1:] == [] and method == "PUT":
            return self._update(issue, body if isinstance(body, dict) else {})
        if rest[1:] == ["links"] and method == "GET":
            return 200, self._links(issue), {}
        return 404, {"error": "404 Not Found"}, {}

    def _list(self, query: dict[str, list[str]]) -> Answer:
        state = (query.get("state") or ["all"])[0]
        size = int((query.get("per_page") or ["20"])[0])
        page = int((query.get("page") or ["1"])[0])
        if size > 100:
            size = 100
        iids = {int(v) for v in query.get("iids[]", []) if v.isdigit()}
        assignee = set(query.get("assignee_username[]", []))
        mine = (query.get("scope") or [""])[0] == "assigned_to_me"
        found = [
            i
            for i in sorted(self.issues.values(), key=lambda i: (i.created_at, i.iid))
            if (state == "all" or i.raw is not None or i.state == state)
            and (not iids or i.iid in iids)
            and (not assignee or assignee & set(i.assignees))
            and (not mine or self.username in i.assignees)
        ]
        if (query.get("sort") or ["desc"])[0] == "desc":
            found.reverse()
        chunk = found[(page - 1) * size : page * size]
        headers = {"x-page": str(page), "x-per-page": str(size), "x-total": str(len(found))}
        if self.next_page_headers:
            headers["x-next-page"] = str(page + 1) if page * size < len(found) else ""
        else:
            headers = {}
        return 200, [self._issue_json(i) for i in chunk], headers

    def _links(self, issue: GitLabIssue) -> list[dict]:
        out = []
        for iid in issue.blocked_by:
            other = self.issues.get(iid)
            if other is not None:
                out.append({**self._issue_json(other), "link_type": "is_blocked_by"})
        for other in self.issues.values():
            if issue.iid in other.blocked_by:
                out.append({**self._issue_json(other), "link_type": "blocks"})
        return out

    def _update(self, issue: GitLabIssue, body: dict) -> Answer:
        event = body.get("state_event")
        if event == "close":
            issue.state = "closed"
        elif event == "reopen":
            issue.state = "opened"
        if isinstance(body.get("labels"), list):
            issue.labels = list(body["labels"])
        for name in body.get("remove_labels") or []:
            issue.labels = [n for n in issue.labels if n.lower() != str(name).lower()]
        for name in body.get("add_labels") or []:
            if name.lower() not in {n.lower() for n in issue.labels}:
                issue.labels.append(name)
        for key in ("title", "description"):
            if isinstance(body.get(key), str):
                setattr(issue, key, body[key])
        issue.updated_at = self._clock()
        return 200, self._issue_json(issue), {}


def _time(when: datetime) -> str:
    return re.sub(r"\+00:00$", "Z", when.astimezone(UTC).isoformat(timespec="milliseconds"))
