"""The GraphQL half of :class:`~symphony_tui_testing.fake_github.FakeGitHub`: documents run
with graphql-core against GitHub's published schema (``@octokit/graphql-schema``, see
:mod:`.github_contracts`), so a document the real API would reject is rejected here too and
every answer has the schema's shape (graphql-core checks nullability, enums and lists while
it executes).

Objects are plain dicts; a field with arguments is a callable ``(info, **args)`` (graphql-core's
default resolver calls it), unions and interfaces resolve through ``__typename``. Resolved:
``viewer { login }``, ``repository(owner, name) { nameWithOwner issue(number) }``, ``repositoryOwner(login) { ... on
ProjectV2Owner { projectV2(number) } }``, ``node(id)`` (a project), ``Issue { id number title body
state url createdAt updatedAt labels assignees projectItems repository }``, ``ProjectV2 { id
number title field(name) items(first, after) }``, ``ProjectV2Item { id project content
fieldValueByName(name) }`` and the mutation ``updateProjectV2ItemFieldValue``. Any other field
reads as null (or a schema error when non-null), never invented data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import GraphQLError, execute_sync, parse, validate

from symphony_tui_testing.github_contracts import graphql_schema

# The fake's objects (FakeGitHub, its issue and project records) are typed Any here: this
# module is imported by fake_github.py and must not import it back.
FakeGitHub = _Issue = _Project = Any

MAX_FIRST = 100


class NotFound(GraphQLError):
    """GitHub's ``NOT_FOUND`` error (``type`` at the error's top level)."""

    gh_type = "NOT_FOUND"


def run(fake: FakeGitHub, query: str, variables: dict[str, Any]) -> tuple[dict, list[str]]:
    """Execute one document: (answer body, contract problems of the request)."""
    try:
        document = parse(query)
    except GraphQLError as exc:
        return {"errors": [{"message": exc.message}]}, [f"GraphQL syntax: {exc.message}"]
    problems = validate(graphql_schema(), document)
    if problems:
        messages = [e.message for e in problems]
        return {"errors": [{"message": m} for m in messages]}, messages
    result = execute_sync(
        graphql_schema(), document, root_value=_root(fake), variable_values=variables
    )
    body: dict[str, Any] = {"data": result.data}
    if result.errors:
        errors = []
        for error in result.errors:
            formatted = dict(error.formatted)
            gh_type = getattr(error.original_error, "gh_type", None) or getattr(
                error, "gh_type", None
            )
            if gh_type:
                formatted["type"] = gh_type
            errors.append(formatted)
        body["errors"] = errors
    return body, []


def _root(fake: FakeGitHub) -> dict[str, Any]:
    def repository(info: Any, owner: str, name: str, **_: Any) -> dict | None:
        if f"{owner}/{name}".lower() != fake.repo.lower():
            raise NotFound(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
        return _repository(fake)

    def repository_owner(info: Any, login: str) -> dict | None:
        project = fake._project
        if project is None or project.owner.lower() != login.lower():
            return None
        return _owner(fake, project)

    def node(info: Any, id: str) -> dict | None:
        project = fake._project
        return _project(fake, project) if project is not None and project.id == id else None

    def update_field(info: Any, input: dict[str, Any]) -> dict:
        return {"projectV2Item": _item(fake, fake._set_board_value(input))}

    return {
        "viewer": {"__typename": "User", "login": fake.viewer_login},
        "repository": repository,
        "repositoryOwner": repository_owner,
        "node": node,
        "updateProjectV2ItemFieldValue": update_field,
    }


def _repository(fake: FakeGitHub) -> dict[str, Any]:
    def issue(info: Any, number: int) -> dict:
        record = fake._issues.get(number)
        if record is None or record.is_pr:
            raise NotFound(f"Could not resolve to an Issue with the number of {number}.")
        return _issue(fake, record)

    def pull_requests(info: Any, headRefName: str | None = None, **args: Any) -> dict:
        found = [
            p for p in reversed(list(fake._pulls.values()))  # newest first (CREATED_AT DESC)
            if headRefName is None or p.head_ref == headRefName
        ]  # fmt: skip
        states = args.pop("states", None)
        if states:
            found = [p for p in found if p.state in states]
        args.pop("orderBy", None)
        return _connection([_pull(fake, p) for p in found])(info, **args)

    def pull_request(info: Any, number: int) -> dict | None:
        pull = fake._pulls.get(number)
        if pull is None:
            raise NotFound(f"Could not resolve to a PullRequest with the number of {number}.")
        return _pull(fake, pull)

    return {
        "__typename": "Repository",
        "nameWithOwner": fake.repo,
        "issue": issue,
        "pullRequests": pull_requests,
        "pullRequest": pull_request,
    }


def _last(nodes: list[Any]) -> Callable[..., dict]:
    """A connection read with ``last`` (or ``first``)."""

    def resolve(info: Any, last: int | None = None, **args: Any) -> dict:
        page = nodes[-last:] if last else nodes
        return _connection(page)(info, **args)

    return resolve


def _pull(fake: FakeGitHub, pull: Any) -> dict[str, Any]:
    """A ``PullRequest`` object: head, checks of the head commit, reviews and threads."""
    checks = pull.checks.get(pull.head_sha)

    def context(check: Any) -> dict[str, Any]:
        def is_required(
            info: Any, pullRequestNumber: int | None = None, pullRequestId: str | None = None
        ) -> bool:
            if pullRequestNumber is None and pullRequestId is None:
                raise GraphQLError("isRequired needs pullRequestId or pullRequestNumber")
            return bool(check.required)

        if check.job_id is None:
            state = {"SUCCESS": "SUCCESS", "FAILURE": "FAILURE", None: "PENDING"}.get(
                check.conclusion, "ERROR"
            )
            return {"__typename": "StatusContext", "context": check.name, "state": state,
                    "targetUrl": None, "isRequired": is_required}  # fmt: skip
        run = None
        if check.workflow:
            run = {"__typename": "WorkflowRun",
                   "workflow": {"__typename": "Workflow", "name": check.workflow}}  # fmt: skip
        return {
            "__typename": "CheckRun", "name": check.name, "conclusion": check.conclusion,
            "status": "COMPLETED" if check.conclusion else "IN_PROGRESS",
            "databaseId": check.job_id, "isRequired": is_required,
            "detailsUrl": f"https://github.com/{fake.repo}/actions/runs/1/job/{check.job_id}",
            "checkSuite": {"__typename": "CheckSuite", "workflowRun": run},
        }  # fmt: skip

    rollup = None
    if checks is not None:
        states = [c.conclusion for c in checks]
        state = (
            "PENDING" if any(s is None for s in states)
            else "FAILURE" if any(s not in ("SUCCESS", "NEUTRAL", "SKIPPED") for s in states)
            else "SUCCESS"
        )  # fmt: skip
        rollup = {"__typename": "StatusCheckRollup", "state": state,
                  "contexts": _connection([context(c) for c in checks])}  # fmt: skip
    commit = {"__typename": "Commit", "oid": pull.head_sha, "statusCheckRollup": rollup}
    threads = [
        {
            "__typename": "PullRequestReviewThread", "isResolved": t.resolved,
            "isOutdated": False, "path": t.path, "line": t.line,
            "comments": _connection([
                {"__typename": "PullRequestReviewComment", "body": body,
                 "url": f"https://github.com/{fake.repo}/pull/{pull.number}#discussion_r{i}",
                 "author": {"__typename": "User", "login": who},
                 "authorAssociation": fake.association(who)}
                for i, (who, body) in enumerate(t.comments)
            ]),
        }
        for t in pull.threads
    ]  # fmt: skip
    latest: dict[str, dict] = {}
    for who, state, body in pull.reviews:
        latest[who] = {"__typename": "PullRequestReview", "state": state, "body": body,
                       "url": f"https://github.com/{fake.repo}/pull/{pull.number}#review",
                       "author": {"__typename": "User", "login": who},
                       "authorAssociation": fake.association(who)}  # fmt: skip
    return {
        "__typename": "PullRequest",
        "number": pull.number,
        "url": f"https://github.com/{fake.repo}/pull/{pull.number}",
        "state": pull.state,
        "isDraft": pull.draft,
        "headRefName": pull.head_ref,
        "headRefOid": pull.head_sha,
        "baseRefName": pull.base_ref,
        "mergeable": pull.mergeable,
        "reviewDecision": pull.review_decision,
        "author": {"__typename": "User", "login": pull.author},
        "authorAssociation": fake.association(pull.author),
        "isCrossRepository": pull.fork_owner is not None,
        "headRepositoryOwner": {
            "__typename": "User",
            "login": pull.fork_owner or fake.repo.split("/")[0],
        },
        "commits": _last([{"__typename": "PullRequestCommit", "commit": commit}]),
        "reviewThreads": _connection(threads),
        "latestReviews": _connection(list(latest.values())),
    }


def _connection(nodes: list[Any]) -> Callable[..., dict]:
    def resolve(info: Any, first: int | None = None, after: str | None = None, **_: Any) -> dict:
        start = int(after) if after and after.isdigit() else 0
        size = min(first or MAX_FIRST, MAX_FIRST)
        page = nodes[start : start + size]
        more = start + size < len(nodes)
        return {
            "nodes": page,
            "totalCount": len(nodes),
            "pageInfo": {
                "hasNextPage": more,
                "hasPreviousPage": start > 0,
                "endCursor": str(start + len(page)) if page else None,
                "startCursor": str(start) if page else None,
            },
        }

    return resolve


def _issue(fake: FakeGitHub, record: _Issue) -> dict[str, Any]:
    def closed_by(info: Any, includeClosedPrs: bool = False, **args: Any) -> dict:
        found = [
            _pull(fake, p) for p in fake._pulls.values()
            if record.number in p.closes and (includeClosedPrs or p.state == "OPEN")
        ]  # fmt: skip
        args.pop("orderByState", None)
        args.pop("userLinkedOnly", None)
        return _connection(found)(info, **args)

    def project_items(info: Any, **args: Any) -> dict:
        project = fake._project
        on = project is not None and record.number in project.items
        return _connection([_item(fake, record.number)] if on else [])(info, **args)

    return {
        "__typename": "Issue",
        "id": record.node_id,
        "number": record.number,
        "title": record.title,
        "body": record.body or "",
        "state": record.state.upper(),
        "url": fake.html_url(record.number),
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
        "labels": _connection([{"name": n, "__typename": "Label"} for n in record.labels]),
        "assignees": _connection([{"login": a, "__typename": "User"} for a in record.assignees]),
        "projectItems": project_items,
        "repository": {"__typename": "Repository", "nameWithOwner": fake.repo},
        "closedByPullRequestsReferences": closed_by,
    }


def _owner(fake: FakeGitHub, project: _Project) -> dict[str, Any]:
    def project_v2(info: Any, number: int) -> dict | None:
        if number != project.number:
            raise NotFound(f"Could not resolve to a ProjectV2 with the number {number}.")
        return _project(fake, project)

    return {"__typename": "Organization", "login": project.owner, "projectV2": project_v2}


def _project(fake: FakeGitHub, project: _Project) -> dict[str, Any]:
    def field(info: Any, name: str) -> dict | None:
        found = project.fields.get(name)
        if found is None:
            return None
        if found.options is not None:
            return {
                "__typename": "ProjectV2SingleSelectField",
                "id": found.id,
                "name": found.name,
                "dataType": "SINGLE_SELECT",
                "options": [{"id": i, "name": n} for i, n in found.options],
            }
        return {"__typename": "ProjectV2Field", "id": found.id, "name": found.name,
                "dataType": "NUMBER"}  # fmt: skip

    def items(info: Any, **args: Any) -> dict:
        return _connection([_item(fake, n) for n in project.items])(info, **args)

    return {
        "__typename": "ProjectV2",
        "id": project.id,
        "number": project.number,
        "title": project.title,
        "field": field,
        "items": items,
    }


def _item(fake: FakeGitHub, number: int) -> dict[str, Any]:
    project = fake._project
    assert project is not None
    values = project.items[number]

    def field_value(info: Any, name: str) -> dict | None:
        found = project.fields.get(name)
        value = values.get(found.id) if found is not None else None
        if found is None or value is None:
            return None
        if found.options is not None:
            option = dict(found.options).get(value)
            return {"__typename": "ProjectV2ItemFieldSingleSelectValue", "name": option,
                    "optionId": value}  # fmt: skip
        return {"__typename": "ProjectV2ItemFieldNumberValue", "number": float(value)}

    return {
        "__typename": "ProjectV2Item",
        "id": f"PVTI_{project.number}_{number}",
        "project": {"__typename": "ProjectV2", "id": project.id, "number": project.number},
        "content": _issue(fake, fake._issues[number]),
        "fieldValueByName": field_value,
    }
