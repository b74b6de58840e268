"""A fake Linear GraphQL endpoint: a real HTTP server on 127.0.0.1 that executes queries
against Linear's public schema (vendored in ``data/linear_schema.graphql``) with graphql-core.

Because execution goes through the real schema, a query the real Linear would reject (unknown
field, wrong variable type such as ``[String!]`` where ``[ID!]`` is wanted) is rejected here too,
with HTTP 400 and GraphQL ``errors``. Resolvers cover the surface the tracker and typical agent
tool calls use; any other root field answers with a GraphQL error naming it, never a silent null.

Implemented: ``issues(filter, first, after, orderBy)``, ``issue(id)``, ``viewer``,
``workflowStates``, ``teams`` / ``team``, ``projects`` / ``project``, ``issueUpdate`` (stateId,
title, description, priority, assigneeId, labelIds), and on ``Issue``: ``state``, ``team``,
``project``, ``assignee``, ``labels``, ``relations``, ``inverseRelations``. Filters: ``and`` /
``or``, comparators (``eq neq in nin eqIgnoreCase neqIgnoreCase contains containsIgnoreCase
startsWith endsWith lt lte gt gte null``) on the fields listed in :data:`_FILTERS`; an
unsupported filter key is a GraphQL error. Pages: ``first`` (default 50, at most 250) and
``after``; ``pageInfo {hasNextPage endCursor startCursor hasPreviousPage}``.

Knobs: :meth:`FakeLinear.fail_next` (canned HTTP failures), :meth:`FakeLinear.rate_limit` (HTTP
429 with Linear's headers until a reset time on the fake's clock), ``requests`` (every request
seen), and helpers to add, move and delete issues. Requests must carry
``Authorization: <api_key>`` exactly as given to the fake (401 otherwise).

Usage::

    with FakeLinear(api_key="lin_api_test") as linear:
        linear.add_issues(3, state="Todo")
        settings = Settings.model_validate({"tracker": {
            "kind": "linear", "endpoint": linear.url, "api_key": "lin_api_test",
            "project_slug": linear.project_slug}})
        issues = await LinearTracker(lambda: settings).fetch_candidate_issues()

Needs ``graphql-core`` (a dev dependency of symphony-tui).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:
    from graphql import GraphQLError, GraphQLSchema, build_schema, execute_sync, parse, validate
except ImportError as e:  # a dev/testing dependency, not a runtime one
    raise ImportError(
        "symphony_tui_testing.fake_linear needs graphql-core: pip install 'symphony-tui[testing]'"
    ) from e

SCHEMA_PATH = Path(__file__).parent / "data" / "linear_schema.graphql"

DEFAULT_STATES: tuple[tuple[str, str], ...] = (
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
    ("Duplicate", "canceled"),
)
"""Workflow states of the default team: (name, Linear state type)."""

MAX_PAGE = 250
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_NS = uuid.UUID("6f1d2a43-6c1e-4b59-9d7c-2f3f6b0c1a77")


@functools.cache
def linear_schema() -> GraphQLSchema:
    """Linear's schema with the fake's resolvers installed (built once per process, ~1.5 s)."""
    schema = build_schema(SCHEMA_PATH.read_text(encoding="utf-8"))
    _install_resolvers(schema)
    return schema


@dataclass(frozen=True)
class FakeRequest:
    """One request the fake received. ``headers`` keys are lowercase."""

    query: str | None
    variables: dict[str, Any]
    headers: dict[str, str]
    status: int
    at: datetime


@dataclass
class _Failure:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class _Store:
    """The fake workspace. Records are dicts keyed by schema field names, plus ``_``-prefixed
    links (ids of related records)."""

    clock: Callable[[], datetime]
    viewer: dict[str, Any]
    teams: dict[str, dict] = field(default_factory=dict)
    states: dict[str, dict] = field(default_factory=dict)
    projects: dict[str, dict] = field(default_factory=dict)
    labels: dict[str, dict] = field(default_factory=dict)
    users: dict[str, dict] = field(default_factory=dict)
    issues: dict[str, dict] = field(default_factory=dict)
    relations: dict[str, dict] = field(default_factory=dict)
    comments: dict[str, dict] = field(default_factory=dict)
    sync_id: int = 0

    def issue(self, key: str) -> dict:
        """An issue by id or identifier; GraphQL error if unknown (like Linear)."""
        found = self.issues.get(key)
        if found is None:
            found = next((i for i in self.issues.values() if i["identifier"] == key), None)
        if found is None:
            raise GraphQLError("Entity not found: Issue", extensions={"code": "INVALID_INPUT"})
        return found


class FakeLinear:
    """A Linear GraphQL server over fixture data (see the module docstring).

    ``api_key`` is what ``Authorization`` must equal. ``clock`` (aware UTC datetimes) drives
    timestamps and :meth:`rate_limit`; share it with the tracker under test for a fake clock.
    One team (``team_key``) with :data:`DEFAULT_STATES` and one project (``project_slug``) exist
    from the start. Thread-safe: the server thread and the test thread share one lock.
    """

    def __init__(
        self,
        api_key: str = "lin_api_fake_0123456789",
        *,
        project_slug: str = "symphony-7f3a2c9d1e0b",
        team_key: str = "SYM",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.api_key = api_key
        self.project_slug = project_slug
        self.team_key = team_key
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        viewer = {
            "id": self._uuid("user", "viewer"),
            "name": "Symphony Bot",
            "displayName": "symphony-bot",
        }
        viewer["email"] = "bot@example.invalid"
        self._store = _Store(clock=self._clock, viewer=viewer)
        self._store.users[viewer["id"]] = viewer
        self._failures: list[_Failure | None] = []  # None: let one request through
        self._limited_until: datetime | None = None
        self._requests_limit = 5000
        self.requests: list[FakeRequest] = []
        self._counter = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.team_id = self.add_team(team_key, "Symphony")
        self.project_id = self.add_project(project_slug, "Symphony")

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeLinear:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._server is not None:
            return self
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll interval keeps stop() fast (shutdown waits for one poll).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-linear", daemon=True
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

    def __enter__(self) -> FakeLinear:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The GraphQL endpoint (``tracker.endpoint``)."""
        if self._server is None:
            raise RuntimeError("FakeLinear is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/graphql"

    # -- fixture data ------------------------------------------------------------------

    @property
    def viewer_id(self) -> str:
        return self._store.viewer["id"]

    def add_team(
        self, key: str, name: str, states: Iterable[tuple[str, str]] = DEFAULT_STATES
    ) -> str:
        """A team with workflow states ``(name, type)``; returns the team id."""
        with self._lock:
            team_id = self._uuid("team", key)
            self._store.teams[team_id] = {
                "id": team_id,
                "key": key,
                "name": name,
                "createdAt": _iso(_EPOCH),
                "updatedAt": _iso(_EPOCH),
            }
            for position, (state_name, state_type) in enumerate(states):
                self.add_state(state_name, state_type, team_id=team_id, position=position)
            return team_id

    def add_state(
        self, name: str, type: str, *, team_id: str | None = None, position: int = 0
    ) -> str:
        """A workflow state of a team (default: the fake's team); returns its id."""
        with self._lock:
            team_id = team_id or self.team_id
            state_id = self._uuid("state", f"{team_id}/{name}")
            self._store.states[state_id] = {
                "id": state_id,
                "name": name,
                "type": type,
                "position": float(position),
                "color": "#888888",
                "_team": team_id,
                "createdAt": _iso(_EPOCH),
                "updatedAt": _iso(_EPOCH),
            }
            return state_id

    def add_project(self, slug: str, name: str) -> str:
        """A project with ``slugId`` = ``slug``; returns its id."""
        with self._lock:
            project_id = self._uuid("project", slug)
            self._store.projects[project_id] = {
                "id": project_id,
                "slugId": slug,
                "name": name,
                "url": f"https://linear.app/fake/project/{slug}",
                "createdAt": _iso(_EPOCH),
                "updatedAt": _iso(_EPOCH),
            }
            return project_id

    def add_user(self, name: str) -> str:
        with self._lock:
            user_id = self._uuid("user", name)
            self._store.users[user_id] = {"id": user_id, "name": name, "displayName": name}
            return user_id

    def add_issue(
        self,
        title: str,
        *,
        state: str = "Todo",
        priority: int = 0,
        labels: Iterable[str] = (),
        description: str | None = None,
        project_slug: str | None = None,
        assignee_id: str | None = None,
        branch_name: str | None = None,
        created_at: datetime | None = None,
    ) -> str:
        """An issue of the fake's team in ``state`` (a state name of the team) and project
        ``project_slug`` (default: the fake's project; ``""`` for none). Returns the id.
        Identifiers are ``<team_key>-<n>``; ``createdAt`` defaults to one minute per issue
        after 2026-01-01, so creation order is insertion order."""
        with self._lock:
            self._counter += 1
            n = self._counter
            identifier = f"{self.team_key}-{n}"
            issue_id = self._uuid("issue", identifier)
            created = created_at or (_EPOCH + timedelta(minutes=n))
            slug = self.project_slug if project_slug is None else project_slug
            project_id = None
            if slug:
                project_id = next(
                    (p["id"] for p in self._store.projects.values() if p["slugId"] == slug), None
                )
                if project_id is None:
                    project_id = self.add_project(slug, slug)
            self._store.issues[issue_id] = {
                "id": issue_id,
                "identifier": identifier,
                "number": float(n),
                "title": title,
                "description": description,
                "priority": float(priority),
                "branchName": branch_name or f"sym-{n}-{_slug(title)}"[:60],
                "url": f"https://linear.app/fake/issue/{identifier}/{_slug(title)}",
                "createdAt": _iso(created),
                "updatedAt": _iso(created),
                "_state": self._state_id(self.team_id, state),
                "_team": self.team_id,
                "_project": project_id,
                "_assignee": assignee_id,
                "_labels": [self._label_id(name) for name in labels],
            }
            return issue_id

    def add_issues(
        self, count: int, *, state: str = "Todo", prefix: str = "Issue", **kw: Any
    ) -> list[str]:
        """``count`` issues titled ``<prefix> <i>``; returns their ids in creation order."""
        return [self.add_issue(f"{prefix} {i + 1}", state=state, **kw) for i in range(count)]

    def add_relation(self, blocker_id: str, blocked_id: str, type: str = "blocks") -> str:
        """``blocker_id`` <type> ``blocked_id`` (so ``blocked_id``'s inverse relations list it)."""
        with self._lock:
            self._store.issue(blocker_id)
            self._store.issue(blocked_id)
            rel_id = self._uuid("relation", f"{blocker_id}/{blocked_id}/{type}")
            self._store.relations[rel_id] = {
                "id": rel_id,
                "type": type,
                "_issue": blocker_id,
                "_related": blocked_id,
                "createdAt": _iso(self._clock()),
                "updatedAt": _iso(self._clock()),
            }
            return rel_id

    def add_comment(
        self,
        issue_id: str,
        body: str,
        *,
        user_id: str | None = None,
        created_at: datetime | None = None,
    ) -> str:
        """A comment on ``issue_id`` by ``user_id`` (a user of :meth:`add_user`; ``None``
        for the viewer). Returns the comment's id."""
        with self._lock:
            self._store.issue(issue_id)
            n = len(self._store.comments) + 1
            comment_id = self._uuid("comment", f"{issue_id}-{n}")
            created = created_at or self._clock()
            self._store.comments[comment_id] = {
                "id": comment_id,
                "body": body,
                "createdAt": _iso(created),
                "url": f"https://linear.app/fake/comment/{comment_id}",
                "_issue": issue_id,
                "_user": user_id or self._store.viewer["id"],
            }
            return comment_id

    def move_issue(self, issue_id: str, state: str) -> None:
        """Move an issue to the state of its team named ``state`` (as a human would)."""
        with self._lock:
            issue = self._store.issue(issue_id)
            issue["_state"] = self._state_id(issue["_team"], state)
            issue["updatedAt"] = _iso(self._clock())

    def delete_issue(self, issue_id: str) -> None:
        """Remove an issue (and its relations) entirely."""
        with self._lock:
            self._store.issues.pop(self._store.issue(issue_id)["id"])
            for rel_id in [
                r["id"]
                for r in self._store.relations.values()
                if issue_id in (r["_issue"], r["_related"])
            ]:
                del self._store.relations[rel_id]

    def issue(self, issue_id: str) -> dict[str, Any]:
        """A plain view of one issue: schema fields plus ``state`` (name), ``project_slug``,
        ``labels`` (names)."""
        with self._lock:
            rec = self._store.issue(issue_id)
            project = self._store.projects.get(rec["_project"] or "")
            return {
                **{k: v for k, v in rec.items() if not k.startswith("_")},
                "state": self._store.states[rec["_state"]]["name"],
                "project_slug": project["slugId"] if project else None,
                "labels": [self._store.labels[i]["name"] for i in rec["_labels"]],
            }

    def issue_ids(self) -> list[str]:
        with self._lock:
            return list(self._store.issues)

    # -- knobs -------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        count: int = 1,
        headers: dict[str, str] | None = None,
        body: Any = None,
        *,
        after: int = 0,
    ) -> None:
        """Answer ``count`` requests with ``status``, ``headers`` and ``body`` (JSON; default:
        a GraphQL error body, with ``RATELIMITED`` for 429; ``str`` bodies are sent as they
        are), after letting ``after`` requests through normally."""
        if body is None:
            code = "RATELIMITED" if status == 429 else "FAKE_FAILURE"
            body = _errors(f"fake failure (HTTP {status})", code)
        with self._lock:
            self._failures.extend([None] * after)
            self._failures.extend(_Failure(status, dict(headers or {}), body) for _ in range(count))

    def rate_limit(self, reset_at: datetime) -> None:
        """Refuse every request with HTTP 429, ``X-RateLimit-Requests-Remaining: 0`` and
        ``X-RateLimit-Requests-Reset: <reset_at in epoch ms>`` while the clock is before
        ``reset_at``."""
        with self._lock:
            self._limited_until = reset_at

    def lift_rate_limit(self) -> None:
        with self._lock:
            self._limited_until = None

    def graphql_requests(self, operation: str | None = None) -> list[FakeRequest]:
        """Requests that reached GraphQL execution, optionally only those whose document
        contains ``operation`` (an operation name)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.query is not None and (operation is None or operation in r.query)
            ]

    # -- HTTP --------------------------------------------------------------------------

    def handle(self, raw: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """One POST body -> (status, headers, body). Called from the server thread."""
        with self._lock:
            now = self._clock()
            status, out_headers, body, parsed = self._answer(raw, headers, now)
            query = parsed.get("query") if isinstance(parsed, dict) else None
            variables = parsed.get("variables") if isinstance(parsed, dict) else None
            self.requests.append(
                FakeRequest(
                    query=query if isinstance(query, str) else None,
                    variables=variables if isinstance(variables, dict) else {},
                    headers=dict(headers),
                    status=status,
                    at=now,
                )
            )
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return status, {"Content-Type": "application/json", **out_headers}, data

    def _answer(
        self, raw: bytes, headers: dict[str, str], now: datetime
    ) -> tuple[int, dict[str, str], Any, Any]:
        try:
            parsed = json.loads(raw or b"null")
        except ValueError:
            parsed = None
        failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            body = failure.body.encode() if isinstance(failure.body, str) else failure.body
            return failure.status, failure.headers, body, parsed
        if headers.get("authorization") != self.api_key:
            body = _errors("Authentication required, not authenticated", "AUTHENTICATION_ERROR")
            return 401, {}, body, parsed
        if self._limited_until is not None and now < self._limited_until:
            reset_ms = str(int(self._limited_until.timestamp() * 1000))
            limit_headers = {
                "X-RateLimit-Requests-Limit": str(self._requests_limit),
                "X-RateLimit-Requests-Remaining": "0",
                "X-RateLimit-Requests-Reset": reset_ms,
            }
            return 429, limit_headers, _errors("Rate limit exceeded", "RATELIMITED"), parsed
        if not isinstance(parsed, dict) or not isinstance(parsed.get("query"), str):
            return (
                400,
                {},
                _errors("Body must be a JSON object with a query", "BAD_REQUEST"),
                parsed,
            )
        variables = parsed.get("variables")
        if variables is not None and not isinstance(variables, dict):
            return 400, {}, _errors("variables must be an object", "BAD_REQUEST"), parsed
        schema = linear_schema()
        # Like Linear (Apollo): a document that does not parse or validate is HTTP 400; errors
        # raised while executing come back with HTTP 200 next to whatever data there is.
        try:
            document = parse(parsed["query"])
        except GraphQLError as exc:
            return 400, {}, {"errors": [exc.formatted]}, parsed
        problems = validate(schema, document)
        if problems:
            return 400, {}, {"errors": [e.formatted for e in problems]}, parsed
        result = execute_sync(
            schema,
            document,
            variable_values=variables,
            operation_name=parsed.get("operationName"),
            context_value=self._store,
        )
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [e.formatted for e in result.errors]
        status = 200 if result.data is not None or not _is_input_error(result.errors) else 400
        return status, self._budget_headers(now), body, parsed

    def _budget_headers(self, now: datetime) -> dict[str, str]:
        window = now.replace(minute=0, second=0, microsecond=0)
        used = sum(1 for r in self.requests if r.at >= window and r.status == 200) + 1
        reset = window + timedelta(hours=1)
        return {
            "X-RateLimit-Requests-Limit": str(self._requests_limit),
            "X-RateLimit-Requests-Remaining": str(max(0, self._requests_limit - used)),
            "X-RateLimit-Requests-Reset": str(int(reset.timestamp() * 1000)),
            "X-Complexity": "1",
        }

    # -- helpers -----------------------------------------------------------------------

    def _uuid(self, kind: str, key: str) -> str:
        return str(uuid.uuid5(_NS, f"{self.team_key}/{kind}/{key}"))

    def _state_id(self, team_id: str, name: str) -> str:
        for s in self._store.states.values():
            if s["_team"] == team_id and s["name"] == name:
                return s["id"]
        raise ValueError(f"team has no workflow state {name!r}")

    def _label_id(self, name: str) -> str:
        for label in self._store.labels.values():
            if label["name"] == name:
                return label["id"]
        label_id = self._uuid("label", name)
        self._store.labels[label_id] = {"id": label_id, "name": name, "color": "#888888"}
        return label_id


def _make_handler(fake: FakeLinear) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/graphql":
                self._send(404, {}, json.dumps(_errors("Not found", "NOT_FOUND")).encode())
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > 10_000_000:
                self._send(
                    400, {}, json.dumps(_errors("Bad Content-Length", "BAD_REQUEST")).encode()
                )
                return
            raw = self.rfile.read(length) if length > 0 else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out_headers, body = fake.handle(raw, headers)
            self._send(status, out_headers, body)

        def do_GET(self) -> None:
            self._send(405, {"Allow": "POST"}, b'{"errors":[{"message":"POST only"}]}')

        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if "Content-Type" not in headers:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # A client that gave up first (its own timeout, a test's short deadline) is
            # not the fake's error: no traceback on the test's stderr.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # tests read fake.requests instead of stderr noise

    return Handler


# -- resolvers -----------------------------------------------------------------------------


def _install_resolvers(schema: GraphQLSchema) -> None:
    def on(type_name: str, field_name: str, fn: Callable[..., Any]) -> None:
        schema.get_type(type_name).fields[field_name].resolve = fn  # type: ignore[union-attr]  # an object type of the schema

    def store(info: Any) -> _Store:
        return info.context

    on("Query", "issues", lambda _, info, **a: _issues_connection(store(info), a))
    on("Query", "issue", lambda _, info, id: store(info).issue(id))
    on("Query", "viewer", lambda _, info: store(info).viewer)
    on("Query", "user", lambda _, info, id: _by_id(store(info).users, id, "User"))
    on(
        "Query",
        "workflowStates",
        lambda _, info, **a: _connection(
            store(info), "WorkflowState", store(info).states.values(), a
        ),
    )
    on(
        "Query",
        "workflowState",
        lambda _, info, id: _by_id(store(info).states, id, "WorkflowState"),
    )
    on(
        "Query",
        "teams",
        lambda _, info, **a: _connection(store(info), "Team", store(info).teams.values(), a),
    )
    on("Query", "team", lambda _, info, id: _by_id(store(info).teams, id, "Team"))
    on(
        "Query",
        "projects",
        lambda _, info, **a: _connection(store(info), "Project", store(info).projects.values(), a),
    )
    on("Query", "project", lambda _, info, id: _by_id(store(info).projects, id, "Project"))
    on("Mutation", "issueUpdate", lambda _, info, id, input: _issue_update(store(info), id, input))

    on("Issue", "state", lambda i, info: store(info).states[i["_state"]])
    on("Issue", "team", lambda i, info: store(info).teams[i["_team"]])
    on("Issue", "project", lambda i, info: store(info).projects.get(i["_project"] or ""))
    on("Issue", "assignee", lambda i, info: store(info).users.get(i["_assignee"] or ""))
    on(
        "Issue",
        "labels",
        lambda i, info, **a: _connection(
            store(info), "IssueLabel", [store(info).labels[x] for x in i["_labels"]], a
        ),
    )
    on(
        "Issue",
        "relations",
        lambda i, info, **a: _connection(
            store(info),
            "IssueRelation",
            [r for r in store(info).relations.values() if r["_issue"] == i["id"]],
            a,
        ),
    )
    on(
        "Issue",
        "inverseRelations",
        lambda i, info, **a: _connection(
            store(info),
            "IssueRelation",
            [r for r in store(info).relations.values() if r["_related"] == i["id"]],
            a,
        ),
    )
    on("Issue", "comments", lambda i, info, **a: _comments(store(info), i["id"], a))
    on("Comment", "user", lambda c, info: store(info).users.get(c["_user"] or ""))
    on("Comment", "botActor", lambda c, info: None)
    on("IssueRelation", "issue", lambda r, info: store(info).issues.get(r["_issue"]))
    on("IssueRelation", "relatedIssue", lambda r, info: store(info).issues.get(r["_related"]))
    on("WorkflowState", "team", lambda s, info: store(info).teams[s["_team"]])
    on(
        "Team",
        "states",
        lambda t, info, **a: _connection(
            store(info),
            "WorkflowState",
            [s for s in store(info).states.values() if s["_team"] == t["id"]],
            a,
        ),
    )
    on(
        "Team",
        "issues",
        lambda t, info, **a: _issues_connection(store(info), a, team_id=t["id"]),
    )
    on(
        "Project",
        "issues",
        lambda p, info, **a: _issues_connection(store(info), a, project_id=p["id"]),
    )

    # Root fields without a resolver would answer null (or a non-null error that hides the
    # cause); name the gap instead.
    for root in (schema.query_type, schema.mutation_type):
        assert root is not None
        for name, fld in root.fields.items():
            if fld.resolve is None:
                fld.resolve = _unimplemented(f"{root.name}.{name}")


def _unimplemented(name: str) -> Callable[..., Any]:
    def resolve(*_: Any, **__: Any) -> Any:
        raise GraphQLError(f"FakeLinear does not implement {name}")

    return resolve


def _by_id(records: dict[str, dict], key: str, kind: str) -> dict:
    if key in records:
        return records[key]
    raise GraphQLError(f"Entity not found: {kind}", extensions={"code": "INVALID_INPUT"})


def _issues_connection(
    store: _Store,
    args: dict[str, Any],
    *,
    team_id: str | None = None,
    project_id: str | None = None,
) -> dict:
    items = [
        i
        for i in store.issues.values()
        if (team_id is None or i["_team"] == team_id)
        and (project_id is None or i["_project"] == project_id)
    ]
    order = args.get("orderBy") or "createdAt"
    items.sort(key=lambda i: i[order if order in ("createdAt", "updatedAt") else "createdAt"])
    return _connection(store, "Issue", items, args)


def _comments(store: _Store, issue_id: str, args: dict[str, Any]) -> dict:
    """An issue's comments in creation order; ``first`` or ``last`` (one page, no cursors)."""
    rows = sorted(
        (c for c in store.comments.values() if c["_issue"] == issue_id),
        key=lambda c: c["createdAt"],
    )
    first, last = args.get("first"), args.get("last")
    if first is not None and last is not None:
        raise GraphQLError("first and last cannot be combined")
    for count in (first, last):
        if count is not None and not 0 <= count <= MAX_PAGE:
            raise GraphQLError(f"first/last must be between 0 and {MAX_PAGE}")
    page = rows[-last:] if last else rows[: 50 if first is None else first]
    if last == 0:
        page = []
    return {
        "nodes": page,
        "edges": [{"node": c, "cursor": c["id"]} for c in page],
        "pageInfo": {
            "hasNextPage": False,
            "hasPreviousPage": len(page) < len(rows),
            "startCursor": page[0]["id"] if page else None,
            "endCursor": page[-1]["id"] if page else None,
        },
    }


def _connection(store: _Store, kind: str, items: Iterable[dict], args: dict[str, Any]) -> dict:
    for unsupported in ("last", "before"):
        if args.get(unsupported) is not None:
            raise GraphQLError(f"FakeLinear does not implement `{unsupported}` pagination")
    flt = args.get("filter")
    if flt:
        _check_filter(kind, flt)
    rows = [r for r in items if not flt or _matches(store, kind, r, flt)]
    first = args.get("first")
    first = 50 if first is None else first
    if first < 0 or first > MAX_PAGE:
        raise GraphQLError(f"first must be between 0 and {MAX_PAGE}")
    start = 0
    after = args.get("after")
    if after is not None:
        index = next((n for n, r in enumerate(rows) if r["id"] == after), None)
        if index is None:
            raise GraphQLError(f"Invalid cursor: {after!s:.60}")
        start = index + 1
    page = rows[start : start + first]
    return {
        "nodes": page,
        "edges": [{"node": r, "cursor": r["id"]} for r in page],
        "pageInfo": {
            "hasNextPage": start + first < len(rows),
            "hasPreviousPage": start > 0,
            "startCursor": page[0]["id"] if page else None,
            "endCursor": page[-1]["id"] if page else None,
        },
    }


def _issue_update(store: _Store, key: str, data: dict[str, Any]) -> dict:
    issue = store.issue(key)
    allowed = {"stateId", "title", "description", "priority", "assigneeId", "labelIds"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise GraphQLError(f"FakeLinear issueUpdate does not implement {', '.join(unknown)}")
    if "stateId" in data:
        state = store.states.get(data["stateId"])
        if state is None or state["_team"] != issue["_team"]:
            raise GraphQLError("Invalid state for this team", extensions={"code": "INVALID_INPUT"})
        issue["_state"] = state["id"]
    for name in ("title", "description"):
        if name in data:
            issue[name] = data[name]
    if "priority" in data:
        issue["priority"] = float(data["priority"])
    if "assigneeId" in data:
        issue["_assignee"] = data["assigneeId"]
    if "labelIds" in data:
        missing = [x for x in data["labelIds"] if x not in store.labels]
        if missing:
            raise GraphQLError("Entity not found: IssueLabel")
        issue["_labels"] = list(data["labelIds"])
    issue["updatedAt"] = _iso(store.clock())
    store.sync_id += 1
    return {"success": True, "issue": issue, "lastSyncId": float(store.sync_id)}


# -- filters -------------------------------------------------------------------------------

_Get = Callable[[_Store, dict], Any]


def _field(name: str) -> tuple[str, _Get]:
    return ("value", lambda _s, r: r.get(name))


def _link(kind: str, table: str, key: str) -> tuple[str, str, _Get]:
    return ("relation", kind, lambda s, r: getattr(s, table).get(r.get(key) or ""))


_FILTERS: dict[str, dict[str, tuple]] = {
    "Issue": {
        "id": _field("id"),
        "title": _field("title"),
        "description": _field("description"),
        "priority": _field("priority"),
        "number": _field("number"),
        "createdAt": _field("createdAt"),
        "updatedAt": _field("updatedAt"),
        "state": _link("WorkflowState", "states", "_state"),
        "team": _link("Team", "teams", "_team"),
        "project": _link("Project", "projects", "_project"),
        "assignee": _link("User", "users", "_assignee"),
        "labels": ("collection", "IssueLabel", lambda s, r: [s.labels[x] for x in r["_labels"]]),
    },
    "WorkflowState": {
        "id": _field("id"),
        "name": _field("name"),
        "type": _field("type"),
        "position": _field("position"),
        "team": _link("Team", "teams", "_team"),
    },
    "Project": {"id": _field("id"), "name": _field("name"), "slugId": _field("slugId")},
    "Team": {"id": _field("id"), "key": _field("key"), "name": _field("name")},
    "User": {
        "id": _field("id"),
        "name": _field("name"),
        "displayName": _field("displayName"),
        "email": _field("email"),
        "isMe": ("value", lambda s, r: r.get("id") == s.viewer["id"]),
    },
    "IssueLabel": {"id": _field("id"), "name": _field("name")},
    "IssueRelation": {"id": _field("id"), "type": _field("type")},
}


_COMPARATORS = frozenset(
    [
        "eq",
        "neq",
        "in",
        "nin",
        "eqIgnoreCase",
        "neqIgnoreCase",
        "contains",
        "notContains",
        "containsIgnoreCase",
        "startsWith",
        "endsWith",
        "lt",
        "lte",
        "gt",
        "gte",
        "null",
    ]
)


def _check_filter(kind: str, flt: dict[str, Any]) -> None:
    """Reject unsupported filter keys up front, whether or not any row reaches them."""
    for key, cond in flt.items():
        if cond is None or key == "null":
            continue
        if key in ("and", "or"):
            for sub in cond:
                _check_filter(kind, sub)
            continue
        spec = _FILTERS.get(kind, {}).get(key)
        if spec is None:
            raise GraphQLError(f"FakeLinear does not implement the {kind} filter `{key}`")
        if spec[0] == "value":
            unknown = sorted(set(cond) - _COMPARATORS)
            if unknown:
                raise GraphQLError(f"FakeLinear does not implement the comparator `{unknown[0]}`")
        elif spec[0] == "relation":
            _check_filter(spec[1], cond)
        else:
            for sub_key, sub in cond.items():
                if sub is None:
                    continue
                if sub_key in ("some", "every"):
                    _check_filter(spec[1], sub)
                elif sub_key == "length":
                    _check_filter("IssueLabel", {"id": sub})  # comparator check only
                else:
                    _check_filter(spec[1], {sub_key: sub})


def _matches(store: _Store, kind: str, record: dict | None, flt: dict[str, Any]) -> bool:
    for key, cond in flt.items():
        if cond is None:
            continue
        if key == "and":
            ok = all(_matches(store, kind, record, f) for f in cond)
        elif key == "or":
            ok = any(_matches(store, kind, record, f) for f in cond)
        elif key == "null":
            ok = (record is None) == cond
        elif record is None:
            ok = False
        else:
            spec = _FILTERS.get(kind, {}).get(key)
            if spec is None:
                raise GraphQLError(f"FakeLinear does not implement the {kind} filter `{key}`")
            if spec[0] == "value":
                ok = _compare(spec[1](store, record), cond)
            elif spec[0] == "relation":
                ok = _matches(store, spec[1], spec[2](store, record), cond)
            else:
                ok = _matches_collection(store, spec[1], spec[2](store, record), cond)
        if not ok:
            return False
    return True


def _matches_collection(store: _Store, kind: str, rows: list[dict], flt: dict[str, Any]) -> bool:
    for key, cond in flt.items():
        if cond is None:
            continue
        if key == "some":
            ok = any(_matches(store, kind, r, cond) for r in rows)
        elif key == "every":
            ok = all(_matches(store, kind, r, cond) for r in rows)
        elif key == "length":
            ok = _compare(len(rows), cond)
        else:
            ok = any(_matches(store, kind, r, {key: cond}) for r in rows)
        if not ok:
            return False
    return True


def _compare(value: Any, cond: dict[str, Any]) -> bool:
    def low(v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    checks: dict[str, Callable[[Any], bool]] = {
        "eq": lambda c: value == c,
        "neq": lambda c: value != c,
        "in": lambda c: value in c,
        "nin": lambda c: value not in c,
        "eqIgnoreCase": lambda c: low(value) == low(c),
        "neqIgnoreCase": lambda c: low(value) != low(c),
        "contains": lambda c: isinstance(value, str) and c in value,
        "notContains": lambda c: not (isinstance(value, str) and c in value),
        "containsIgnoreCase": lambda c: isinstance(value, str) and low(c) in low(value),
        "startsWith": lambda c: isinstance(value, str) and value.startswith(c),
        "endsWith": lambda c: isinstance(value, str) and value.endswith(c),
        "lt": lambda c: value is not None and value < c,
        "lte": lambda c: value is not None and value <= c,
        "gt": lambda c: value is not None and value > c,
        "gte": lambda c: value is not None and value >= c,
        "null": lambda c: (value is None) == c,
    }
    for op, operand in cond.items():
        if operand is None:
            continue
        check = checks.get(op)
        if check is None:
            raise GraphQLError(f"FakeLinear does not implement the comparator `{op}`")
        if not check(operand):
            return False
    return True


def _is_input_error(errors: list[GraphQLError] | None) -> bool:
    # Variable coercion failures (wrong type for $ids, missing required variable) are request
    # errors: no field ran, so there is no path.
    return bool(errors) and all(e.path is None for e in errors)


def _errors(message: str, code: str) -> dict[str, Any]:
    return {"errors": [{"message": message, "extensions": {"code": code}}]}


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _slug(text: str) -> str:
    out = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(p for p in out.split("-") if p)
