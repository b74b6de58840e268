"""A fake Jira Cloud site: a real HTTP server on 127.0.0.1 serving the REST v3 operations the
Jira tracker and the ``jira_rest`` tool use, each request and answer checked against Atlassian's
published OpenAPI description (the subset in ``data/jira_platform_openapi.json``; see
:mod:`.fake_rest` for the checks and the shared knobs).

Served: ``POST /rest/api/3/search/jql`` (the JQL the tracker writes: ``project = "K" AND
status IN (...)``, optionally ``AND assignee = currentUser()`` / ``= "id"``, ``ORDER BY created
ASC``; pages of ``maxResults`` with an opaque ``nextPageToken``), ``POST
/rest/api/3/issue/bulkfetch``, ``GET /rest/api/3/issue/{idOrKey}``, ``GET|POST
.../transitions`` (every status reachable from every other, as Jira's default simplified
workflow), ``GET|POST .../comment`` and ``GET /rest/api/3/myself``. Requests need Basic
``email:token``.

Usage::

    with FakeJira(email="bot@example.com", token="jira_test", project="SD") as jira:
        jira.add_issue("Fix the login", status="To Do")
        settings = {"kind": "jira", "base_url": jira.url, "email": "bot@example.com",
                    "api_token": "jira_test", "project_key": "SD"}
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from symphony_tui_testing.fake_rest import Answer, FakeRest
from symphony_tui_testing.openapi_contract import OpenApiContract

DATA = Path(__file__).parent / "data" / "jira_platform_openapi.json"
#: Status name -> status category key (Jira's three: new, indeterminate, done).
STATUSES = {
    "Backlog": "new",
    "To Do": "new",
    "In Progress": "indeterminate",
    "Human Review": "indeterminate",
    "Done": "done",
    "Won't Do": "done",
}
_CATEGORY_IDS = {"new": 2, "indeterminate": 4, "done": 3}
_TRANSITION_NAMES = {"In Progress": "Start work", "Done": "Resolve"}
_JQL = re.compile(
    r'^project = "(?P<project>(?:[^"\\]|\\.)*)" AND status IN \((?P<states>(?:"(?:[^"\\]|\\.)*"(?:, )?)+)\)'
    r'(?: AND assignee = (?P<assignee>currentUser\(\)|"(?:[^"\\]|\\.)*"))?'
    r" ORDER BY created ASC$"
)
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


@functools.cache
def jira_contract() -> OpenApiContract:
    """Atlassian's description of the operations used (loaded once)."""
    return OpenApiContract(
        json.loads(DATA.read_text()), uri="https://jira.example/openapi.json", vendor="Jira"
    )


@dataclass
class JiraIssue:
    """One fixture issue. ``blocked_by`` lists keys of issues that block this one."""

    number: int
    summary: str
    status: str
    description: str | None = None
    labels: list[str] = field(default_factory=list)
    assignee: str | None = None
    priority: str | None = None
    created: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    updated: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    blocked_by: list[str] = field(default_factory=list)
    comments: list[dict] = field(default_factory=list)
    project: str = "SD"
    raw: dict | None = None
    """When set, served instead of the normal record (malformed-record tests)."""

    @property
    def id(self) -> str:
        return str(10000 + self.number)

    @property
    def key(self) -> str:
        return f"{self.project}-{self.number}"


class FakeJira(FakeRest):
    """Jira Cloud REST v3 over :class:`JiraIssue` fixtures (see the module docstring)."""

    vendor = "Jira"

    def __init__(
        self,
        *,
        email: str = "bot@example.com",
        token: str = "jira_fake_token",
        project: str = "SD",
        account_id: str = "acc-bot",
        clock: Callable[[], datetime] | None = None,
        validate: bool = True,
    ) -> None:
        super().__init__(clock=clock, validate=validate)
        self.email = email
        self.token = token
        self.project = project
        self.account_id = account_id
        self.issues: dict[str, JiraIssue] = {}
        self._counter = 0

    def contract(self) -> OpenApiContract:
        return jira_contract()

    def authorized(self, headers: dict[str, str]) -> bool:
        pair = base64.b64encode(f"{self.email}:{self.token}".encode()).decode()
        return headers.get("authorization") == f"Basic {pair}"

    def unauthorized(self) -> Answer:
        return 401, {"errorMessages": ["You are not authenticated."], "errors": {}}, {}

    # -- fixture data ------------------------------------------------------------------

    def add_issue(
        self,
        summary: str,
        *,
        status: str = "To Do",
        description: str | None = None,
        labels: Iterable[str] = (),
        assignee: str | None = None,
        priority: str | None = None,
        blocked_by: Iterable[str] = (),
        project: str | None = None,
        raw: dict | None = None,
    ) -> JiraIssue:
        with self._lock:
            self._counter += 1
            created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=self._counter)
            issue = JiraIssue(
                self._counter,
                summary,
                status,
                description=description,
                labels=list(labels),
                assignee=assignee,
                priority=priority,
                created=created,
                updated=created,
                blocked_by=list(blocked_by),
                project=project or self.project,
                raw=raw,
            )
            self.issues[issue.key] = issue
            return issue

    def add_issues(self, count: int, **kw: Any) -> list[JiraIssue]:
        return [self.add_issue(f"Issue {i + 1}", **kw) for i in range(count)]

    def set_status(self, key: str, status: str) -> None:
        with self._lock:
            issue = self.issues[key]
            issue.status = status
            issue.updated = self._clock()

    def delete(self, key: str) -> None:
        with self._lock:
            del self.issues[key]

    # -- records -----------------------------------------------------------------------

    def _status_json(self, name: str) -> dict:
        category = STATUSES.get(name, "indeterminate")
        return {
            "name": name,
            "id": str(list(STATUSES).index(name) + 1 if name in STATUSES else 99),
            "statusCategory": {
                "id": _CATEGORY_IDS[category],
                "key": category,
                "name": {"new": "To Do", "indeterminate": "In Progress", "done": "Done"}[category],
            },
        }

    def _issue_json(self, issue: JiraIssue) -> dict:
        if issue.raw is not None:
            return issue.raw
        links = []
        for n, key in enumerate(issue.blocked_by):
            other = self.issues.get(key)
            inward: dict[str, Any] = {"key": key}
            if other is not None:
                inward = {
                    "id": other.id,
                    "key": other.key,
                    "fields": {"summary": other.summary, "status": self._status_json(other.status)},
                }
            links.append(
                {
                    "id": str(20000 + issue.number * 100 + n),
                    "type": {
                        "id": "10000",
                        "name": "Blocks",
                        "inward": "is blocked by",
                        "outward": "blocks",
                    },
                    "inwardIssue": inward,
                }
            )
        for other in self.issues.values():
            if issue.key in other.blocked_by:
                links.append(
                    {
                        "id": str(30000 + other.number),
                        "type": {"name": "Blocks", "inward": "is blocked by", "outward": "blocks"},
                        "outwardIssue": {"id": other.id, "key": other.key},
                    }
                )
        description = None
        if issue.description is not None:
            description = {
                "type": "doc",
                "version": 1,
                "content": [
                    {"type": "paragraph", "content": [{"type": "text", "text": line}]}
                    for line in issue.description.split("\n")
                ],
            }
        return {
            "id": issue.id,
            "key": issue.key,
            "self": f"{self.url}/rest/api/3/issue/{issue.id}",
            "fields": {
                "summary": issue.summary,
                "description": description,
                "status": self._status_json(issue.status),
                "labels": list(issue.labels),
                "assignee": {"accountId": issue.assignee} if issue.assignee else None,
                "priority": {"name": issue.priority} if issue.priority else None,
                "created": _jira_time(issue.created),
                "updated": _jira_time(issue.updated),
                "project": {"key": issue.project, "id": "10001"},
                "issuelinks": links,
            },
        }

    def _find(self, ref: str) -> JiraIssue | None:
        issue = self.issues.get(ref) or self.issues.get(ref.upper())
        if issue is None:
            issue = next((i for i in self.issues.values() if i.id == ref), None)
        return issue

    # -- routes ------------------------------------------------------------------------

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        if path == "/rest/api/3/search/jql" and method == "POST":
            return self._search(body if isinstance(body, dict) else {})
        if path == "/rest/api/3/issue/bulkfetch" and method == "POST":
            return self._bulk(body if isinstance(body, dict) else {})
        if path == "/rest/api/3/myself" and method == "GET":
            return 200, {"accountId": self.account_id, "emailAddress": self.email}, {}
        match = re.fullmatch(r"/rest/api/3/issue/([^/]+)(/transitions|/comment)?", path)
        issue = self._find(match.group(1)) if match else None
        if match is None or issue is None:
            return 404, {"errorMessages": ["Issue does not exist"], "errors": {}}, {}
        tail = match.group(2)
        if tail is None and method == "GET":
            return 200, self._issue_json(issue), {}
        if tail == "/transitions":
            return self._transitions(method, issue, body)
        if tail == "/comment":
            if method == "GET":
                n = len(issue.comments)
                return (
                    200,
                    {"comments": issue.comments, "startAt": 0, "maxResults": n, "total": n},
                    {},
                )
            if method == "POST" and isinstance(body, dict) and body.get("body") is not None:
                comment = {
                    "id": str(40000 + len(issue.comments)),
                    "body": body["body"],
                    "created": _jira_time(self._clock()),
                    "author": {"accountId": self.account_id},
                }
                issue.comments.append(comment)
                return 201, comment, {}
            return 400, {"errorMessages": ["Comment body can not be empty!"], "errors": {}}, {}
        return 405, None, {}

    def _search(self, body: dict) -> Answer:
        jql = body.get("jql") if isinstance(body.get("jql"), str) else ""
        match = _JQL.match(jql)
        if match is None:
            return (
                400,
                {"errorMessages": [f"fake Jira cannot read the JQL {jql!r}"], "errors": {}},
                {},
            )
        project = _unescape(match.group("project"))
        states = {_unescape(s).lower() for s in _STRING.findall(match.group("states"))}
        who = match.group("assignee")
        account = (
            self.account_id if who == "currentUser()" else (_unescape(who[1:-1]) if who else None)
        )
        found = [
            i
            for i in sorted(self.issues.values(), key=lambda i: (i.created, i.number))
            if i.project.lower() == project.lower()
            and (i.raw is not None or i.status.lower() in states)
            and (account is None or i.assignee == account)
        ]
        size = int(body.get("maxResults") or 50)
        token = body.get("nextPageToken")
        start = 0
        if isinstance(token, str):
            try:
                start = int(base64.b64decode(token.encode()).decode().removeprefix("offset:"))
            except ValueError:
                return 400, {"errorMessages": ["invalid nextPageToken"], "errors": {}}, {}
        page = found[start : start + size]
        out: dict[str, Any] = {"issues": [self._issue_json(i) for i in page]}
        if start + size < len(found):
            out["nextPageToken"] = base64.b64encode(f"offset:{start + size}".encode()).decode()
            out["isLast"] = False
        else:
            out["isLast"] = True
        return 200, out, {}

    def _bulk(self, body: dict) -> Answer:
        refs = body.get("issueIdsOrKeys") or []
        if len(refs) > 100:
            return 400, {"errorMessages": ["at most 100 issues"], "errors": {}}, {}
        issues = []
        for ref in refs:
            issue = self._find(str(ref))
            if issue is not None:
                issues.append(self._issue_json(issue))
        return 200, {"issues": issues, "issueErrors": []}, {}

    def _transitions(self, method: str, issue: JiraIssue, body: Any) -> Answer:
        available = [
            {
                "id": str(11 + n),
                "name": _TRANSITION_NAMES.get(name, name),
                "to": self._status_json(name),
                "hasScreen": False,
                "isAvailable": True,
            }
            for n, name in enumerate(STATUSES)
            if name != issue.status
        ]
        if method == "GET":
            return 200, {"transitions": available}, {}
        wanted = (body or {}).get("transition", {}).get("id") if isinstance(body, dict) else None
        choice = next((t for t in available if t["id"] == wanted), None)
        if choice is None:
            return 400, {"errorMessages": ["Transition id is not valid"], "errors": {}}, {}
        issue.status = choice["to"]["name"]
        issue.updated = self._clock()
        return 204, None, {}


def _jira_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)
