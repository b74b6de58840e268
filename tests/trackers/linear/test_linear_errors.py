"""Error categories (spec §11.4), the 30 s timeout and key redaction, with exact payloads
served by ``httpx.MockTransport``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear import LinearTracker
from tests.helpers import WallClock

from .conftest import API_KEY

ENDPOINT = "https://linear.invalid/graphql"


def settings() -> Settings:
    return Settings.model_validate(
        {
            "tracker": {
                "kind": "linear",
                "endpoint": ENDPOINT,
                "api_key": API_KEY,
                "project_slug": "proj-1",
            }
        }
    )


def make(
    handler: Callable[[httpx.Request], httpx.Response], clock: WallClock | None = None
) -> tuple[LinearTracker, list]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    s = settings()
    return LinearTracker(
        lambda: s, transport=httpx.MockTransport(record), clock=clock or WallClock()
    ), seen


def node(n: int, **over: Any) -> dict[str, Any]:
    return {
        "id": f"id-{n}",
        "identifier": f"P-{n}",
        "title": f"T{n}",
        "description": None,
        "priority": 1,
        "state": {"name": "Todo"},
        "branchName": None,
        "url": f"https://linear.app/x/issue/P-{n}",
        "assignee": None,
        "labels": {"nodes": []},
        "inverseRelations": {"nodes": []},
        "createdAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
        **over,
    }


def page(nodes: list, has_next: bool = False, cursor: str | None = None) -> dict:
    return {
        "data": {
            "issues": {"nodes": nodes, "pageInfo": {"hasNextPage": has_next, "endCursor": cursor}}
        }
    }


async def category_of(handler: Callable[[httpx.Request], httpx.Response]) -> TrackerError:
    tracker, _ = make(handler)
    try:
        with pytest.raises(TrackerError) as info:
            await tracker.fetch_candidate_issues()
    finally:
        await tracker.aclose()
    assert API_KEY not in str(info.value)
    return info.value


async def test_request_carries_key_json_and_30s_timeout() -> None:
    tracker, seen = make(lambda r: httpx.Response(200, json=page([node(1)])))
    issues = await tracker.fetch_candidate_issues()
    await tracker.aclose()
    assert [i.id for i in issues] == ["id-1"]
    request = seen[0]
    assert request.headers["authorization"] == API_KEY
    assert request.headers["content-type"] == "application/json"
    assert request.extensions["timeout"] == {
        "connect": 30.0,
        "read": 30.0,
        "write": 30.0,
        "pool": 30.0,
    }
    body = json.loads(request.content)
    assert body["variables"]["projectSlug"] == "proj-1"
    assert body["variables"]["first"] == 50


async def test_transport_failure_is_linear_api_request() -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"connection refused (auth {API_KEY})", request=request)

    err = await category_of(boom)
    assert err.category == "linear_api_request"
    assert err.portable == "tracker_request"
    assert "[redacted]" in err.message


async def test_timeout_is_linear_api_request() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    err = await category_of(slow)
    assert err.category == "linear_api_request"
    assert "30000 ms" in err.message


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_linear_api_status_with_code(status: int) -> None:
    err = await category_of(lambda r: httpx.Response(status, text=f"upstream sad {API_KEY}"))
    assert err.category == "linear_api_status"
    assert err.portable == "tracker_status"
    assert str(status) in err.message


async def test_graphql_errors() -> None:
    body = {"data": None, "errors": [{"message": f"Field 'x' bad; key {API_KEY}"}]}
    err = await category_of(lambda r: httpx.Response(200, json=body))
    assert err.category == "linear_graphql_errors"
    assert "Field 'x' bad" in err.message


@pytest.mark.parametrize(
    "body",
    [
        "<html>not json</html>",
        json.dumps([1, 2]),
        json.dumps({"data": None}),
        json.dumps({"data": {"issues": None}}),
        json.dumps({"data": {"issues": {"nodes": []}}}),  # no pageInfo
    ],
)
async def test_unknown_payload(body: str) -> None:
    err = await category_of(lambda r: httpx.Response(200, text=body))
    assert err.category == "linear_unknown_payload"
    assert err.portable == "tracker_response"


@pytest.mark.parametrize("bad", [{"id": "x"}, {"id": 7, "title": "t"}, "not a node", None])
async def test_state_list_reads_omit_and_log_a_malformed_record(bad, caplog) -> None:
    tracker, _ = make(lambda r: httpx.Response(200, json=page([node(1), bad, node(2)])))
    try:
        issues = await tracker.fetch_candidate_issues()
    finally:
        await tracker.aclose()
    assert [i.id for i in issues] == ["id-1", "id-2"]
    assert any("tracker record omitted kind=linear" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("bad", [{"id": "x"}, {"id": "id-2", "title": "t"}, "not a node"])
async def test_id_refresh_fails_on_a_malformed_requested_record(bad) -> None:
    tracker, _ = make(lambda r: httpx.Response(200, json=page([node(1), bad])))
    try:
        with pytest.raises(TrackerError) as info:
            await tracker.fetch_issues_by_ids(["id-1", "id-2"])
    finally:
        await tracker.aclose()
    assert info.value.portable == "tracker_response"


async def test_id_refresh_of_nothing_makes_no_request() -> None:
    tracker, seen = make(lambda r: httpx.Response(200, json=page([node(1)])))
    try:
        assert await tracker.fetch_issues_by_ids([]) == []
        assert await tracker.fetch_issues_by_ids(["", ""]) == []
    finally:
        await tracker.aclose()
    assert seen == []


@pytest.mark.parametrize("cursor", [None, ""])
async def test_missing_end_cursor(cursor: str | None) -> None:
    err = await category_of(lambda r: httpx.Response(200, json=page([node(1)], True, cursor)))
    assert err.category == "linear_missing_end_cursor"
    assert err.portable == "tracker_pagination"


async def test_cursor_that_does_not_advance_stops() -> None:
    err = await category_of(lambda r: httpx.Response(200, json=page([node(1)], True, "same")))
    assert err.category == "linear_missing_end_cursor"


async def test_duplicate_across_pages_is_kept_once() -> None:
    def pages(request: httpx.Request) -> httpx.Response:
        after = json.loads(request.content)["variables"]["after"]
        if after is None:
            return httpx.Response(200, json=page([node(1), node(2)], True, "c1"))
        return httpx.Response(200, json=page([node(2), node(3)]))

    tracker, _ = make(pages)
    issues = await tracker.fetch_candidate_issues()
    await tracker.aclose()
    assert [i.id for i in issues] == ["id-1", "id-2", "id-3"]


async def test_key_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def boom(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused {API_KEY}", request=request)

    await category_of(boom)
    await category_of(lambda r: httpx.Response(503, text=API_KEY))
    assert caplog.records
    assert all(API_KEY not in r.getMessage() for r in caplog.records)
