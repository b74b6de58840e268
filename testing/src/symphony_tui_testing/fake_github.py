"""A fake GitHub API: a real HTTP server on 127.0.0.1 serving the REST endpoints the GitHub
tracker and the ``github_api`` tool use, and GraphQL (:mod:`.fake_github_graphql`).

**Contracts**: with ``validate=True`` (the default) every request is checked against GitHub's
OpenAPI description (operation, query parameters, JSON body) or GraphQL schema, and every REST
answer against the operation's response schema (:mod:`.github_contracts`); each problem is a
line in :attr:`FakeGitHub.violations` (tests assert it stays empty). ``304`` and rate-limit
refusals are GitHub-wide behaviours the description does not list per operation, so only
their headers are produced, not checked.

REST: ``GET /repos/{o}/{r}/issues`` (``state``, ``per_page`` <= 100, ``page``, ``sort``,
``direction``, ``labels``, ``assignee``; ``Link`` rel next/last), ``GET|PATCH .../issues/{n}``,
``GET|POST .../issues/{n}/comments``, ``POST|PUT .../issues/{n}/labels``, ``DELETE
.../issues/{n}/labels/{name}``, ``GET .../issues/{n}/dependencies/blocked_by``, ``GET .../actions/jobs/{id}/logs`` (``302`` to
a signed download on the fake, ``/_blobs/logs/{id}``, which must be read without the token),
``PUT .../pulls/{n}/merge`` (``409`` when ``sha`` is not the head). Every GET
answer has an ``ETag``; ``If-None-Match`` with it answers ``304`` and costs no budget. Every
answer carries ``x-ratelimit-*`` headers (resources ``core`` and ``graphql``, 5000 an hour on
the fake's clock). Requests must carry ``Authorization: Bearer <token>`` (401 otherwise).

Knobs: :meth:`FakeGitHub.exhaust` (primary limit spent until a reset: REST 403, GraphQL 200 with
``RATE_LIMITED``), :meth:`FakeGitHub.secondary_limit` (403/429 with ``retry-after``),
:meth:`FakeGitHub.fail_next`, ``requests`` (everything seen), issue, label, dependency and board
helpers; pull requests: :meth:`FakeGitHub.add_pull`, :meth:`~FakeGitHub.push`,
:meth:`~FakeGitHub.set_checks` (with job logs), :meth:`~FakeGitHub.review`,
:meth:`~FakeGitHub.comment_on_line`, :meth:`~FakeGitHub.set_pull`.

Usage::

    with FakeGitHub(token="ghp_test", repo="octo/app") as gh:
        gh.add_issues(3)
        settings = Settings.model_validate({"tracker": {
            "kind": "github", "repo": "octo/app", "api_url": gh.url, "api_key": "ghp_test"}})

Needs ``graphql-core`` and ``openapi-schema-validator``; GraphQL always runs on the installed
schema file, REST checks need the OpenAPI file (``validate=False`` skips them).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from symphony_tui_testing import fake_github_graphql
from symphony_tui_testing.github_contracts import rest_contract

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
LIMIT = 5000
DEFAULT_STATUSES = ("Backlog", "Todo", "In Progress", "Human Review", "Done")


@dataclass(frozen=True)
class FakeRequest:
    """One request the fake received: ``path`` without the query, ``query`` parsed,
    ``body`` parsed JSON (or None), ``headers`` lowercase, the answer's ``status``."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]
    status: int
    at: datetime

    @property
    def graphql(self) -> str | None:
        return self.body.get("query") if isinstance(self.body, dict) else None


@dataclass
class _Issue:
    number: int
    title: str
    body: str | None
    state: str = "open"
    state_reason: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""
    closed_at: str | None = None
    is_pr: bool = False
    comments: list[dict] = field(default_factory=list)
    blocked_by: list[int] = field(default_factory=list)

    @property
    def node_id(self) -> str:
        return f"I_kw{self.number:06d}"


@dataclass
class _Check:
    name: str
    conclusion: str | None  # None: still running
    job_id: int | None = None  # a check run (an Actions job); None: a commit status
    workflow: str | None = None
    required: bool = True


@dataclass
class _Thread:
    path: str
    line: int | None
    comments: list[tuple[str, str]]  # (author, body)
    resolved: bool = False


@dataclass
class _Pull:
    number: int
    head_ref: str
    head_sha: str
    base_ref: str = "main"
    closes: list[int] = field(default_factory=list)
    state: str = "OPEN"  # OPEN, CLOSED, MERGED
    draft: bool = False
    mergeable: str = "MERGEABLE"
    review_decision: str | None = None
    reviews: list[tuple[str, str, str]] = field(default_factory=list)  # (author, state, body)
    threads: list[_Thread] = field(default_factory=list)
    checks: dict[str, list[_Check]] = field(default_factory=dict)  # head sha -> checks
    merged_sha: str | None = None
    author: str = "symphony-bot"
    fork_owner: str | None = None  # the head is in this owner's fork (a cross-repository pull)


@dataclass
class _Field:
    id: str
    name: str
    options: list[tuple[str, str]] | None  # (option id, name); None for a number field


@dataclass
class _Project:
    id: str
    owner: str
    number: int
    title: str
    fields: dict[str, _Field]
    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # number -> field id -> value


class FakeGitHub:
    """GitHub REST + GraphQL over fixture data (see the module docstring).

    ``clock`` (aware UTC datetimes) drives timestamps and rate-limit windows; share it with
    the tracker under test. Thread-safe: server and test threads share one lock.
    """

    def __init__(
        self,
        token: str = "ghp_fake0123456789abcdef",
        *,
        repo: str = "octo/app",
        clock: Callable[[], datetime] | None = None,
        validate: bool = True,
        enterprise: bool = False,
        viewer_login: str = "symphony-bot",
    ) -> None:
        self.token = token
        self.viewer_login = viewer_login
        # GitHub Enterprise Server serves REST under /api/v3 and GraphQL at /api/graphql.
        self._prefix = "/api/v3" if enterprise else ""
        self.repo = repo
        self._clock = clock or (lambda: datetime.now(UTC))
        self._validate = validate
        self._lock = threading.RLock()
        self._issues: dict[int, _Issue] = {}
        self._pulls: dict[int, _Pull] = {}
        self.associations: dict[str, str] = {}
        """login (lower case) -> ``CommentAuthorAssociation``; others are ``COLLABORATOR``."""
        self._logs: dict[int, str] = {}
        self._redirect = ""
        self._project: _Project | None = None
        self._counter = 0
        self._failures: list[tuple[int, dict[str, str], Any] | None] = []
        self._exhausted: dict[str, datetime] = {}
        self._used: dict[str, tuple[datetime, int]] = {}
        self.requests: list[FakeRequest] = []
        self.violations: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if validate:
            rest_contract()  # load once up front, not inside the first request's timeout
            fake_github_graphql.graphql_schema()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), name="fake-github", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The REST base (``tracker.api_url``); GraphQL is at ``<url>/graphql`` (with
        ``enterprise``: ``<host>/api/v3`` and ``<host>/api/graphql``)."""
        if self._server is None:
            raise RuntimeError("FakeGitHub is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self._prefix}"

    def html_url(self, number: int) -> str:
        return f"https://github.com/{self.repo}/issues/{number}"

    # -- fixture data ------------------------------------------------------------------

    def add_issue(
        self,
        title: str,
        *,
        body: str | None = None,
        state: str = "open",
        labels: Iterable[str] = (),
        assignees: Iterable[str] = (),
        pull_request: bool = False,
        status: str | None = None,
    ) -> int:
        """An issue (or, with ``pull_request``, a pull request) numbered in creation order,
        created one minute apart from 2026-01-01; with ``status``, also put on the board.
        Returns its number."""
        with self._lock:
            self._counter += 1
            n = self._counter
            at = _iso(_EPOCH + timedelta(minutes=n))
            self._issues[n] = _Issue(
                number=n,
                title=title,
                body=body,
                state=state,
                labels=list(labels),
                assignees=list(assignees),
                created_at=at,
                updated_at=at,
                closed_at=at if state == "closed" else None,
                is_pr=pull_request,
            )
            if status is not None:
                self.set_status(n, status)
            return n

    def add_issues(self, count: int, **kwargs: Any) -> list[int]:
        return [self.add_issue(f"Issue {self._counter + 1}", **kwargs) for _ in range(count)]

    def add_board(
        self,
        *,
        owner: str | None = None,
        number: int = 1,
        statuses: Iterable[str] = DEFAULT_STATUSES,
        status_field: str = "Status",
        priority_field: str | None = None,
        priorities: Iterable[str] | None = None,
    ) -> str:
        """A Projects (v2) board of ``owner`` (default: the repository's owner) with a
        single-select status field; a priority field is single-select with ``priorities``,
        or a number field without. Returns the project id."""
        with self._lock:
            fields = {
                status_field: _Field(
                    "PVTSSF_status", status_field,
                    [(f"opt_{i}", s) for i, s in enumerate(statuses)],
                )
            }  # fmt: skip
            if priority_field:
                options = None
                if priorities is not None:
                    options = [(f"prio_{i}", p) for i, p in enumerate(priorities)]
                fields[priority_field] = _Field("PVTF_priority", priority_field, options)
            owner = owner or self.repo.split("/")[0]
            self._project = _Project(f"PVT_{number:04d}", owner, number, "Board", fields)
            return self._project.id

    def set_status(self, number: int, status: str | None, *, field_name: str = "Status") -> None:
        """Put issue ``number`` on the board (if not yet) with ``status`` (None: no status)."""
        with self._lock:
            project = self._require_board()
            values = project.items.setdefault(number, {})
            found = project.fields[field_name]
            if status is None:
                values.pop(found.id, None)
                return
            option = next((i for i, n in found.options or [] if n == status), None)
            if option is None:
                raise ValueError(f"board has no {field_name} option {status!r}")
            values[found.id] = option
            self._touch(number)

    def set_priority(
        self, number: int, value: str | float, *, field_name: str = "Priority"
    ) -> None:
        with self._lock:
            project = self._require_board()
            found = project.fields[field_name]
            if found.options is not None:
                value = next(i for i, n in found.options if n == value)
            project.items.setdefault(number, {})[found.id] = value

    def status(self, number: int) -> str | None:
        """The board status of issue ``number`` (None: not on the board or no status)."""
        with self._lock:
            project = self._require_board()
            found = next(f for f in project.fields.values() if f.id == "PVTSSF_status")
            option = project.items.get(number, {}).get(found.id)
            return dict(found.options or []).get(option) if option else None

    def remove_from_board(self, number: int) -> None:
        with self._lock:
            self._require_board().items.pop(number, None)

    def block(self, blocked: int, by: int) -> None:
        """Issue ``blocked`` is blocked by issue ``by`` (GitHub issue dependencies)."""
        with self._lock:
            self._issues[blocked].blocked_by.append(by)
            self._touch(blocked)

    def close(self, number: int) -> None:
        self.update(number, state="closed")

    def update(self, number: int, **changes: Any) -> None:
        """Change fields of an issue as a person would (``state``, ``labels``, ``title``...)."""
        with self._lock:
            record = self._issues[number]
            for key, value in changes.items():
                setattr(record, key, list(value) if key in ("labels", "assignees") else value)
            if "state" in changes:
                record.closed_at = _iso(self._clock()) if record.state == "closed" else None
            self._touch(number)

    def delete(self, number: int) -> None:
        with self._lock:
            self._issues.pop(number, None)
            if self._project is not None:
                self._project.items.pop(number, None)

    def issue(self, number: int) -> _Issue:
        with self._lock:
            return self._issues[number]

    # -- pull requests -----------------------------------------------------------------

    def add_pull(
        self,
        head_ref: str,
        *,
        closes: Iterable[int] = (),
        title: str = "A change",
        head_sha: str | None = None,
        mergeable: str = "MERGEABLE",
        draft: bool = False,
        author: str = "symphony-bot",
        fork_owner: str | None = None,
    ) -> int:
        """An open pull request from branch ``head_ref`` into ``main``; ``closes``: issues
        it closes (a closing keyword or a development link); ``author`` opened it, from
        ``fork_owner``'s fork when given. Returns its number."""
        with self._lock:
            number = self.add_issue(title, pull_request=True)
            sha = head_sha or hashlib.sha1(f"{head_ref}:{number}:0".encode()).hexdigest()
            self._pulls[number] = _Pull(
                number, head_ref, sha, closes=list(closes), mergeable=mergeable, draft=draft,
                author=author, fork_owner=fork_owner,
            )  # fmt: skip
            return number

    def association(self, login: str) -> str:
        """``login``'s ``CommentAuthorAssociation`` with the repository (see ``associations``)."""
        return self.associations.get(login.lower(), "COLLABORATOR")

    def pull(self, number: int) -> _Pull:
        with self._lock:
            return self._pulls[number]

    def push(self, number: int) -> str:
        """A new head commit on pull request ``number`` (no checks on it yet). Returns it."""
        with self._lock:
            pull = self._pulls[number]
            pull.head_sha = hashlib.sha1(f"{pull.head_sha}:next".encode()).hexdigest()
            self._touch(number)
            return pull.head_sha

    def set_checks(self, number: int, *checks: dict[str, Any]) -> None:
        """The head commit's checks: each ``name``, ``conclusion`` (None: running), and
        optionally ``job_id`` with its ``log`` text, ``workflow``, ``required``."""
        with self._lock:
            pull = self._pulls[number]
            made = []
            for check in checks:
                log = check.get("log")
                if log is not None and check.get("job_id") is not None:
                    self._logs[int(check["job_id"])] = log
                made.append(
                    _Check(
                        check["name"], check.get("conclusion"), check.get("job_id"),
                        check.get("workflow"), check.get("required", True),
                    )
                )  # fmt: skip
            pull.checks[pull.head_sha] = made

    def review(self, number: int, state: str, body: str = "", *, author: str = "reviewer") -> None:
        """A review (``APPROVED`` or ``CHANGES_REQUESTED``); sets the review decision."""
        with self._lock:
            pull = self._pulls[number]
            pull.reviews.append((author, state, body))
            pull.review_decision = state

    def comment_on_line(
        self, number: int, path: str, line: int | None, body: str, *, author: str = "reviewer"
    ) -> None:
        """A review thread on ``path``:``line`` of pull request ``number``."""
        with self._lock:
            self._pulls[number].threads.append(_Thread(path, line, [(author, body)]))

    def set_pull(self, number: int, **changes: Any) -> None:
        """Change ``mergeable``, ``state``, ``draft``, ``review_decision`` of a pull request."""
        with self._lock:
            pull = self._pulls[number]
            for key, value in changes.items():
                setattr(pull, key, value)

    # -- knobs -------------------------------------------------------------------------

    def exhaust(self, reset_at: datetime, resource: str = "core") -> None:
        """Spend the primary budget of ``resource`` until ``reset_at`` (fake clock)."""
        with self._lock:
            self._exhausted[resource] = reset_at

    def secondary_limit(
        self, retry_after: int | None = 60, *, status: int = 403, count: int = 1
    ) -> None:
        """Refuse the next ``count`` requests as a secondary rate limit (``retry-after``
        seconds; ``None`` sends no such header)."""
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
            "before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        with self._lock:
            self._failures.extend((status, headers, body) for _ in range(count))

    def fail_next(self, status: int, body: Any = None, *, count: int = 1) -> None:
        with self._lock:
            self._failures.extend(
                (status, {}, body or {"message": "fake failure"}) for _ in range(count)
            )

    def rest_requests(
        self, method: str | None = None, path: str | None = None
    ) -> list[FakeRequest]:
        """REST requests seen, optionally of ``method`` and whose path ends with ``path``."""
        with self._lock:
            return [
                r for r in self.requests
                if r.path != "/graphql" and (method is None or r.method == method)
                and (path is None or r.path.endswith(path))
            ]  # fmt: skip

    def graphql_requests(self, operation: str | None = None) -> list[FakeRequest]:
        with self._lock:
            return [
                r for r in self.requests
                if r.graphql is not None and (operation is None or operation in r.graphql)
            ]  # fmt: skip

    # -- HTTP --------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """One request -> (status, headers, body). Called from the server thread."""
        split = urlsplit(target)
        path = unquote(split.path)
        if self._prefix:
            graphql_path = self._prefix.rsplit("/", 1)[0] + "/graphql"
            if path == graphql_path:
                path = "/graphql"
            elif path.startswith(self._prefix + "/"):
                path = path[len(self._prefix) :]
            else:
                path = "/not-found" + path
        if path.startswith("/_blobs/logs/"):
            return self._blob(path, headers)
        query = parse_qs(split.query, keep_blank_values=True)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = ...
        with self._lock:
            now = self._clock()
            status, out, payload = self._answer(method, path, query, body, raw, headers, now)
            self.requests.append(
                FakeRequest(
                    method, path, query, None if body is ... else body, dict(headers), status, now
                )
            )
        data = b"" if payload is None else json.dumps(payload).encode()
        if payload is not None:
            out.setdefault("content-type", "application/json; charset=utf-8")
        return status, out, data

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes,
        headers: dict[str, str], now: datetime,
    ) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        graphql = path == "/graphql" and method == "POST"
        resource = "graphql" if graphql else "core"
        if self._failures:
            status, extra, fail_body = self._failures.pop(0) or (0, {}, None)
            return status, {**self._budget(resource, now, spend=False), **extra}, fail_body
        if headers.get("authorization") != f"Bearer {self.token}":
            return (
                401,
                {},
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
            )
        if body is ...:
            return 400, {}, {"message": "Problems parsing JSON"}
        reset = self._exhausted.get(resource)
        if reset is not None and now < reset:
            limit_headers = {
                "x-ratelimit-limit": str(LIMIT), "x-ratelimit-remaining": "0",
                "x-ratelimit-used": str(LIMIT), "x-ratelimit-reset": str(int(reset.timestamp())),
                "x-ratelimit-resource": resource,
            }  # fmt: skip
            message = "API rate limit exceeded for user ID 1."
            if graphql:
                return (
                    200,
                    limit_headers,
                    {"errors": [{"type": "RATE_LIMITED", "message": message}]},
                )
            return (
                403,
                limit_headers,
                {
                    "message": message,
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                },
            )
        if graphql:
            if not isinstance(body, dict) or not isinstance(body.get("query"), str):
                return 400, {}, {"message": "Body should be a JSON object with a query"}
            answer, problems = fake_github_graphql.run(
                self, body["query"], body.get("variables") or {}
            )
            self.violations.extend(f"GraphQL request: {p}" for p in problems)
            return 200, self._budget(resource, now, spend=True), answer
        if self._validate:
            self.violations.extend(
                rest_contract().validate_request(method, path, query, body, bool(raw))
            )
        status, payload = self._rest(method, path, query, body)
        out = self._budget(resource, now, spend=True)
        if status == 302:
            out["location"] = self._redirect
        if method == "GET" and status == 200:
            etag = (
                'W/"' + hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest() + '"'
            )
            out["etag"] = etag
            if headers.get("if-none-match") == etag:
                self._refund(resource)
                return 304, {**out, "etag": etag}, None
        if self._validate:
            self.violations.extend(rest_contract().validate_response(method, path, status, payload))
        if (
            method == "GET"
            and status == 200
            and path.endswith("/issues")
            and isinstance(payload, list)
        ):
            out.update(self._link(query, getattr(self, "_last_total", 0)))
        return status, out, payload

    # -- REST routes -------------------------------------------------------------------

    def _rest(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        base = f"/repos/{self.repo}"
        if path.lower().startswith(base.lower() + "/actions/jobs/"):
            return self._job_logs(method, path[len(base) + len("/actions/jobs/") :])
        if path.lower().startswith(base.lower() + "/pulls/"):
            return self._merge(method, path[len(base) + len("/pulls/") :], body)
        if not path.lower().startswith(base.lower() + "/issues"):
            return 404, _not_found()
        rest = (
            path[len(base) + len("/issues") :].strip("/").split("/")
            if path[len(base) + 7 :]
            else []
        )
        if not rest:
            return self._list(query) if method == "GET" else (404, _not_found())
        if not rest[0].isdigit() or int(rest[0]) not in self._issues:
            return 404, _not_found()
        record = self._issues[int(rest[0])]
        tail = rest[1:]
        if not tail:
            if method == "GET":
                return 200, self._issue_json(record)
            if method == "PATCH":
                return self._patch(record, body or {})
        elif tail == ["comments"]:
            if method == "GET":
                return 200, record.comments
            if method == "POST" and isinstance(body, dict) and isinstance(body.get("body"), str):
                return 201, self._comment(record, body["body"])
            return 422, {"message": "Validation Failed"}
        elif tail[0] == "labels":
            return self._labels(method, record, tail[1:], body)
        elif tail == ["dependencies", "blocked_by"] and method == "GET":
            page, size = _page_args(query)
            blockers = [
                self._issue_json(self._issues[n]) for n in record.blocked_by if n in self._issues
            ]
            return 200, blockers[(page - 1) * size : page * size]
        return 404, _not_found()

    def _job_logs(self, method: str, rest: str) -> tuple[int, Any]:
        job, _, tail = rest.partition("/")
        if method != "GET" or tail != "logs" or not job.isdigit() or int(job) not in self._logs:
            return 404, _not_found()
        self._redirect = f"{self.url.split('/api/v3')[0]}/_blobs/logs/{job}?sig=fake"
        return 302, None

    def _merge(self, method: str, rest: str, body: Any) -> tuple[int, Any]:
        number, _, tail = rest.partition("/")
        pull = self._pulls.get(int(number)) if number.isdigit() else None
        if method != "PUT" or tail != "merge" or pull is None:
            return 404, _not_found()
        body = body if isinstance(body, dict) else {}
        docs = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"
        if body.get("sha") is not None and body["sha"] != pull.head_sha:
            return 409, {"message": "Head branch was modified. Review and try the merge again.",
                         "documentation_url": docs}  # fmt: skip
        if pull.state != "OPEN" or pull.mergeable != "MERGEABLE":
            return 405, {"message": "Pull Request is not mergeable", "documentation_url": docs}
        pull.state, pull.merged_sha = "MERGED", pull.head_sha
        for n in pull.closes:
            if n in self._issues:
                self._issues[n].state, self._issues[n].state_reason = "closed", "completed"
                self._issues[n].closed_at = _iso(self._clock())
        self._touch(pull.number)
        return 200, {
            "sha": pull.head_sha,
            "merged": True,
            "message": "Pull Request successfully merged",
        }

    def _blob(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """A signed download (another host in GitHub): no token may reach it."""
        job = path.rsplit("/", 1)[-1]
        with self._lock:
            if "authorization" in headers:
                self.violations.append("job log download sent an Authorization header")
            text = self._logs.get(int(job)) if job.isdigit() else None
        if text is None:
            return 404, {}, b"Not Found"
        return 200, {"content-type": "text/plain; charset=utf-8"}, text.encode()

    def _list(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        state = _one(query, "state", "open")
        page, size = _page_args(query)
        items = [
            r for r in self._issues.values()
            if state == "all" or r.state == state
        ]  # fmt: skip
        labels = [s.strip().lower() for s in _one(query, "labels", "").split(",") if s.strip()]
        if labels:
            items = [
                r for r in items if all(label in {x.lower() for x in r.labels} for label in labels)
            ]
        assignee = _one(query, "assignee", "")
        if assignee:
            items = [r for r in items if assignee in r.assignees]
        key = "updated_at" if _one(query, "sort", "created") == "updated" else "created_at"
        items.sort(
            key=lambda r: (getattr(r, key), r.number),
            reverse=_one(query, "direction", "desc") == "desc",
        )
        self._last_total = len(items)
        return 200, [self._issue_json(r) for r in items[(page - 1) * size : page * size]]

    def _patch(self, record: _Issue, body: dict[str, Any]) -> tuple[int, Any]:
        if "state" in body and body["state"] not in ("open", "closed"):
            return 422, {"message": "Validation Failed"}
        for key in ("title", "body"):
            if key in body:
                setattr(record, key, body[key])
        if "labels" in body:
            record.labels = [x if isinstance(x, str) else x.get("name", "") for x in body["labels"]]
        if "assignees" in body:
            record.assignees = list(body["assignees"])
        if "state" in body and body["state"] != record.state:
            record.state = body["state"]
            record.state_reason = body.get("state_reason") or (
                "completed" if record.state == "closed" else "reopened"
            )
            record.closed_at = _iso(self._clock()) if record.state == "closed" else None
        self._touch(record.number)
        return 200, self._issue_json(record)

    def _labels(self, method: str, record: _Issue, tail: list[str], body: Any) -> tuple[int, Any]:
        if not tail and method in ("POST", "PUT"):
            names = body.get("labels") if isinstance(body, dict) else body
            if not isinstance(names, list):
                return 422, {"message": "Validation Failed"}
            names = [x if isinstance(x, str) else x.get("name", "") for x in names]
            record.labels = (
                names
                if method == "PUT"
                else record.labels + [n for n in names if n not in record.labels]
            )
        elif not tail and method == "GET":
            pass
        elif len(tail) == 1 and method == "DELETE":
            if tail[0] not in record.labels:
                return 404, {
                    "message": "Label does not exist",
                    "documentation_url": "https://docs.github.com/rest",
                }
            record.labels.remove(tail[0])
        else:
            return 404, _not_found()
        self._touch(record.number)
        return 200, [self._label_json(n) for n in record.labels]

    def add_comment(self, number: int, text: str, *, user: str | None = None) -> int:
        """A comment on issue ``number`` by ``user`` (default: the viewer). Returns its id."""
        with self._lock:
            return self._comment(self._issues[number], text, user)["id"]

    def _comment(self, record: _Issue, text: str, user: str | None = None) -> dict[str, Any]:
        cid = 1000 + sum(len(r.comments) for r in self._issues.values())
        now = _iso(self._clock())
        comment = {
            "id": cid, "node_id": f"IC_{cid}", "body": text,
            "url": f"https://api.github.com/repos/{self.repo}/issues/comments/{cid}",
            "html_url": f"{self.html_url(record.number)}#issuecomment-{cid}",
            "issue_url": f"https://api.github.com/repos/{self.repo}/issues/{record.number}",
            "user": _user(user or self.viewer_login), "created_at": now, "updated_at": now,
            "author_association": "MEMBER",
        }  # fmt: skip
        record.comments.append(comment)
        self._touch(record.number)
        return comment

    # -- JSON shapes -------------------------------------------------------------------

    def _issue_json(self, r: _Issue) -> dict[str, Any]:
        api = f"https://api.github.com/repos/{self.repo}/issues/{r.number}"
        assignees = [_user(a) for a in r.assignees]
        out: dict[str, Any] = {
            "id": 100000 + r.number, "node_id": r.node_id, "url": api,
            "repository_url": f"https://api.github.com/repos/{self.repo}",
            "labels_url": api + "/labels{/name}", "comments_url": api + "/comments",
            "events_url": api + "/events", "html_url": self.html_url(r.number),
            "number": r.number, "state": r.state,
            "title": r.title, "body": r.body, "user": _user("octocat"),
            "labels": [self._label_json(n) for n in r.labels],
            "assignee": assignees[0] if assignees else None, "assignees": assignees,
            "milestone": None, "locked": False, "active_lock_reason": None,
            "comments": len(r.comments), "closed_at": r.closed_at,
            "created_at": r.created_at, "updated_at": r.updated_at,
            "author_association": "MEMBER",
            "issue_dependencies_summary": {
                "blocked_by": sum(1 for n in r.blocked_by if n in self._issues and self._issues[n].state == "open"),
                "blocking": 0,
                "total_blocked_by": len(r.blocked_by),
                "total_blocking": 0,
            },
        }  # fmt: skip
        if r.state_reason is not None:
            # Left out while null: the description's enum does not list null (OpenAPI 3.0.3).
            out["state_reason"] = r.state_reason
        if r.is_pr:
            out["pull_request"] = {
                "url": f"https://api.github.com/repos/{self.repo}/pulls/{r.number}",
                "html_url": f"https://github.com/{self.repo}/pull/{r.number}",
                "diff_url": None, "patch_url": None,
            }  # fmt: skip
        return out

    def _label_json(self, name: str) -> dict[str, Any]:
        lid = int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)
        return {
            "id": lid, "node_id": f"LA_{lid}", "name": name, "description": None,
            "url": f"https://api.github.com/repos/{self.repo}/labels/{quote(name)}",
            "color": "ededed", "default": False,
        }  # fmt: skip

    # -- helpers -----------------------------------------------------------------------

    def _link(self, query: dict[str, list[str]], total: int) -> dict[str, str]:
        page, size = _page_args(query)
        last = max(1, -(-total // size))
        if page >= last:
            return {}

        def url(n: int) -> str:
            params = {k: v[-1] for k, v in query.items()}
            params["page"] = str(n)
            return f"{self.url}/repos/{self.repo}/issues?{urlencode(params)}"

        return {"link": f'<{url(page + 1)}>; rel="next", <{url(last)}>; rel="last"'}

    def _budget(self, resource: str, now: datetime, *, spend: bool) -> dict[str, str]:
        window = now.replace(minute=0, second=0, microsecond=0)
        start, used = self._used.get(resource, (window, 0))
        if start != window:
            used = 0
        used += 1 if spend else 0
        self._used[resource] = (window, used)
        return {
            "x-ratelimit-limit": str(LIMIT),
            "x-ratelimit-remaining": str(max(0, LIMIT - used)),
            "x-ratelimit-used": str(used),
            "x-ratelimit-reset": str(int((window + timedelta(hours=1)).timestamp())),
            "x-ratelimit-resource": resource,
        }

    def _refund(self, resource: str) -> None:
        start, used = self._used[resource]
        self._used[resource] = (start, max(0, used - 1))

    def _touch(self, number: int) -> None:
        if number in self._issues:
            self._issues[number].updated_at = _iso(self._clock())

    def _require_board(self) -> _Project:
        if self._project is None:
            raise RuntimeError("add_board() first")
        return self._project

    def _set_board_value(self, data: dict[str, Any]) -> int:
        """``updateProjectV2ItemFieldValue`` input -> the item's issue number (GraphQL)."""
        project = self._require_board()
        if data.get("projectId") != project.id:
            raise fake_github_graphql.NotFound("Could not resolve to ProjectV2 node")
        number = next(
            (n for n in project.items if f"PVTI_{project.number}_{n}" == data.get("itemId")), None
        )
        found = next((f for f in project.fields.values() if f.id == data.get("fieldId")), None)
        if number is None or found is None:
            raise fake_github_graphql.NotFound("Could not resolve to a node with the given id")
        value = data.get("value") or {}
        if found.options is not None:
            option = value.get("singleSelectOptionId")
            if option not in dict(found.options):
                raise fake_github_graphql.NotFound(
                    "The single select option Id does not belong to the field"
                )
            project.items[number][found.id] = option
        else:
            project.items[number][found.id] = value.get("number")
        self._touch(number)
        return number


def _make_handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out, body = fake.handle(self.command, self.path, raw, headers)
            self.send_response(status)
            for key, value in out.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _user(login: str) -> dict[str, Any]:
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:6], 16)
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login, "id": uid, "node_id": f"U_{uid}", "avatar_url": f"https://avatars.example/{uid}",
        "gravatar_id": "", "url": base, "html_url": f"https://github.com/{login}",
        "followers_url": base + "/followers", "following_url": base + "/following{/other_user}",
        "gists_url": base + "/gists{/gist_id}", "starred_url": base + "/starred{/owner}{/repo}",
        "subscriptions_url": base + "/subscriptions", "organizations_url": base + "/orgs",
        "repos_url": base + "/repos", "events_url": base + "/events{/privacy}",
        "received_events_url": base + "/received_events", "type": "User", "site_admin": False,
    }  # fmt: skip


def _not_found() -> dict[str, str]:
    return {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


def _one(query: dict[str, list[str]], key: str, default: str) -> str:
    values = query.get(key)
    return values[-1] if values else default


def _page_args(query: dict[str, list[str]]) -> tuple[int, int]:
    try:
        page = max(1, int(_one(query, "page", "1")))
        size = min(100, max(1, int(_one(query, "per_page", "30"))))
    except ValueError:
        return 1, 30
    return page, size


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
