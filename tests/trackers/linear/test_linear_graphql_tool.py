"""The ``linear_graphql`` client-side tool (spec §10.5) against FakeLinear."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from graphql import OperationDefinitionNode, parse

from symphony_tui.trackers.linear import LINEAR_GRAPHQL_TOOL, LinearTracker, call_linear_graphql
from symphony_tui.trackers.linear.queries import ALL_DOCUMENTS
from symphony_tui.trackers.linear.tool import count_operations
from symphony_tui_testing.fake_linear import FakeLinear
from tests.helpers import SettingsBox, WallClock

from .conftest import API_KEY
from .test_linear_errors import make

VIEWER = "query Me { viewer { id name } }"


def error_of(text: str) -> dict:
    return json.loads(text)["error"]


def test_tool_spec() -> None:
    assert LINEAR_GRAPHQL_TOOL.name == "linear_graphql"
    schema = LINEAR_GRAPHQL_TOOL.input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["variables"]["type"] == "object"


async def test_query_success(fake: FakeLinear, tracker: LinearTracker) -> None:
    result = await call_linear_graphql(tracker, {"query": VIEWER})
    assert result.success
    assert json.loads(result.text)["data"]["viewer"]["id"] == fake.viewer_id
    assert fake.requests[0].headers["authorization"] == API_KEY


async def test_raw_string_shorthand(fake: FakeLinear, tracker: LinearTracker) -> None:
    result = await call_linear_graphql(tracker, VIEWER)
    assert result.success


async def test_mutation_with_variables(fake: FakeLinear, tracker: LinearTracker) -> None:
    issue_id = fake.add_issue("Rename me")
    mutation = (
        "mutation Rename($id: String!, $title: String!) {"
        " issueUpdate(id: $id, input: {title: $title}) { success issue { title } } }"
    )
    result = await call_linear_graphql(
        tracker, {"query": mutation, "variables": {"id": issue_id, "title": "Renamed"}}
    )
    assert result.success, result.text
    assert fake.issue(issue_id)["title"] == "Renamed"


@pytest.mark.parametrize(
    "query",
    [
        "query Bad { viewer { noSuchField } }",  # validation error: HTTP 400 with errors
        'query Missing { issue(id: "nope") { id } }',  # execution error: HTTP 200 with errors
    ],
)
async def test_graphql_errors_keep_the_body(tracker: LinearTracker, query: str) -> None:
    result = await call_linear_graphql(tracker, {"query": query})
    assert not result.success
    body = json.loads(result.text)
    assert body["errors"] and "error" not in body  # Linear's body, not our wrapper


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"query": "query A { viewer { id } } query B { viewer { id } }"}, "exactly one"),
        ({"query": "{ viewer { id } } { viewer { name } }"}, "exactly one"),
        ({"query": "fragment F on User { id }"}, "exactly one"),
        ({"query": VIEWER, "variables": [1, 2]}, "variables"),
        ({"query": VIEWER, "variables": "{}"}, "variables"),
        ({"query": ""}, "non-empty"),
        ({"query": "   "}, "non-empty"),
        ({"variables": {}}, "non-empty"),
        ({"query": 42}, "non-empty"),
        ({"query": "query A { viewer { id }"}, "not a GraphQL document"),
        ({"query": 'query A { issue(id: "x) { id } }'}, "not a GraphQL document"),
        (42, "arguments"),
        (None, "arguments"),
    ],
)
async def test_invalid_input_is_rejected_without_a_request(
    fake: FakeLinear, tracker: LinearTracker, arguments: object, fragment: str
) -> None:
    result = await call_linear_graphql(tracker, arguments)
    assert not result.success
    error = error_of(result.text)
    assert error["code"] == "invalid_input"
    assert fragment in error["message"]
    assert fake.requests == []


async def test_missing_auth(
    fake: FakeLinear, settings: SettingsBox, tracker: LinearTracker
) -> None:
    settings.update(api_key=None)
    result = await call_linear_graphql(tracker, {"query": VIEWER})
    assert not result.success
    assert error_of(result.text)["code"] == "missing_tracker_api_key"
    assert fake.requests == []


async def test_transport_failure(fake: FakeLinear, tracker: LinearTracker) -> None:
    fake.stop()  # nothing listens on the port any more
    result = await call_linear_graphql(tracker, {"query": VIEWER})
    assert not result.success
    assert error_of(result.text)["code"] == "linear_api_request"
    assert API_KEY not in result.text


async def test_rate_limited_is_structured_with_retry_at(
    fake: FakeLinear, tracker: LinearTracker, clock: WallClock
) -> None:
    fake.rate_limit(clock.now + timedelta(seconds=30))
    result = await call_linear_graphql(tracker, {"query": VIEWER})
    error = error_of(result.text)
    assert not result.success and error["code"] == "rate_limited"
    assert error["retry_at"] == (clock.now + timedelta(seconds=30)).isoformat()
    assert tracker.paused_until is not None  # the tool shares the tracker's pause


async def test_non_json_and_status_failures() -> None:
    tracker, _ = make(lambda r: httpx.Response(502, text="<html>bad gateway</html>"))
    result = await call_linear_graphql(tracker, VIEWER)
    assert not result.success and error_of(result.text)["code"] == "linear_unknown_payload"
    tracker, _ = make(lambda r: httpx.Response(503, json={"data": None}))
    result = await call_linear_graphql(tracker, VIEWER)
    error = error_of(result.text)
    assert error["code"] == "linear_api_status" and error["status"] == 503
    await tracker.aclose()


async def test_key_echoed_by_server_is_redacted() -> None:
    body = {"errors": [{"message": f"bad key {API_KEY}"}]}
    tracker, _ = make(lambda r: httpx.Response(400, json=body))
    result = await call_linear_graphql(tracker, VIEWER)
    assert not result.success
    assert API_KEY not in result.text and "[redacted]" in result.text
    await tracker.aclose()


@pytest.mark.parametrize(
    "document",
    [
        *ALL_DOCUMENTS,
        "{ viewer { id } }",
        "query { viewer { id } }",
        "query query { viewer { id } }",
        "subscription S { issueUpdates { id } }",
        '# query X { a }\nquery Y($s: String = "} query {") { viewer { id } }',
        'query Y { a(x: """\n } query Q { \\""" """) }\nfragment F on U { a }',
        "fragment A on User { id } fragment B on User { name }",
        "query A { a } mutation B { b } { c }",
    ],
)
def test_count_operations_agrees_with_graphql_core(document: str) -> None:
    definitions = parse(document).definitions
    expected = sum(isinstance(d, OperationDefinitionNode) for d in definitions)
    assert count_operations(document) == expected
