"""GitHub's rate limits (REST docs, "Rate limits for the REST API"): a spent primary budget
(403 with ``x-ratelimit-remaining: 0``; GraphQL 200 with ``RATE_LIMITED``) pauses until
``x-ratelimit-reset``; a secondary limit pauses for ``retry-after`` (or a minute); while paused
nothing is sent; an accepted answer with no budget left pauses before GitHub refuses."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.github import GitHubTracker
from symphony_tui.trackers.github.client import graphql_url, next_link

from .conftest import github_settings


async def test_primary_limit_pauses_until_reset_and_sends_nothing_meanwhile(
    fake, tracker, clock
) -> None:
    fake.add_issues(3)
    reset = (clock.now + timedelta(seconds=600)).replace(microsecond=0)
    fake.exhaust(reset)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "rate_limited"
    assert info.value.retry_at == reset
    assert "primary" in info.value.message
    assert tracker.paused_until == reset
    sent = len(fake.requests)
    clock.advance(300)
    with pytest.raises(TrackerError):
        await tracker.fetch_issues_by_ids(["1"])
    assert len(fake.requests) == sent  # paused: nothing sent
    clock.advance(301)
    assert tracker.paused_until is None
    assert len(await tracker.fetch_candidate_issues()) == 3
    status = tracker.rate_limit_status()
    assert status["core"]["limit"] == 5000 and status["paused_until"] is None


async def test_graphql_primary_limit_is_rate_limited(fake, tracker, clock) -> None:
    fake.add_issues(1)
    reset = (clock.now + timedelta(seconds=120)).replace(microsecond=0)
    fake.exhaust(reset, resource="graphql")
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_issues_by_ids(["1"])
    assert info.value.category == "rate_limited" and info.value.retry_at == reset


@pytest.mark.parametrize("status", [403, 429])
async def test_secondary_limit_waits_retry_after(fake, tracker, clock, status: int) -> None:
    fake.add_issues(2)
    fake.secondary_limit(retry_after=90, status=status)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "rate_limited"
    assert info.value.retry_at == clock.now + timedelta(seconds=90)
    assert "secondary" in info.value.message
    clock.advance(91)
    assert len(await tracker.fetch_candidate_issues()) == 2


async def test_secondary_limit_without_retry_after_waits_a_minute(fake, tracker, clock) -> None:
    fake.secondary_limit(retry_after=None)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.retry_at == clock.now + timedelta(seconds=60)


async def test_a_403_that_is_not_a_rate_limit_is_a_status_error(fake, tracker) -> None:
    fake.fail_next(403, {"message": "Resource not accessible by integration"})
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "github_api_status"
    assert tracker.paused_until is None


async def test_last_request_of_the_budget_pauses_before_github_refuses(settings, clock) -> None:
    reset = int((clock.now + timedelta(seconds=30)).timestamp())

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "5000",
                   "x-ratelimit-reset": str(reset), "x-ratelimit-resource": "core"}  # fmt: skip
        return httpx.Response(200, json=[], headers=headers)

    tracker = GitHubTracker(settings, transport=httpx.MockTransport(handler), clock=clock)
    assert await tracker.fetch_candidate_issues() == []
    assert tracker.paused_until is not None
    assert int(tracker.paused_until.timestamp()) == reset
    await tracker.aclose()


def test_link_and_graphql_url_helpers() -> None:
    link = '<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=9>; rel="last"'
    assert next_link(link) == "https://api.github.com/x?page=2"
    assert next_link('<https://api.github.com/x?page=1>; rel="prev"') is None
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example/api/v3/") == "https://ghe.example/api/graphql"


async def test_missing_token_is_a_config_error(fake) -> None:
    settings = github_settings(fake, token="$NOT_SET_ANYWHERE")
    tracker = GitHubTracker(lambda: settings)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "missing_github_token"
    assert fake.requests == []
    await tracker.aclose()


async def test_writes_go_one_at_a_time_a_second_apart(fake, settings, clock) -> None:
    import asyncio

    from symphony_tui.trackers.github.client import GitHubClient

    now = [100.0]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 3))
        now[0] += seconds

    client = GitHubClient(settings, clock=clock, sleep=sleep, monotonic=lambda: now[0])
    a, b = fake.add_issues(2)
    await client.request("GET", f"/repos/octo/app/issues/{a}")
    await client.request("GET", f"/repos/octo/app/issues/{b}")
    assert waits == []  # reads are not paced
    path = "/repos/octo/app/issues/{}/comments"
    await asyncio.gather(
        client.request("POST", path.format(a), body={"body": "one"}),
        client.request("POST", path.format(b), body={"body": "two"}),
    )
    now[0] += 0.25
    await client.request("PATCH", f"/repos/octo/app/issues/{a}", body={"state": "closed"})
    assert waits == [1.0, 0.75]
    assert [r.method for r in fake.requests[-3:]] == ["POST", "POST", "PATCH"]
    await client.aclose()
