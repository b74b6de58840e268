"""HTTP 429 / RATELIMITED: pause until Linear's stated reset, refuse to send meanwhile, expose
the pause and the header values, lose nothing (fake clock throughout)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui_testing.fake_linear import FakeLinear
from tests.helpers import WallClock

from .test_linear_errors import make, node, page


def ms(dt) -> str:
    return str(int(dt.timestamp() * 1000))


async def test_429_pauses_until_reset_then_resumes_with_everything(
    fake: FakeLinear, tracker: LinearTracker, clock: WallClock
) -> None:
    ids = fake.add_issues(120, state="Todo")
    reset = clock.now + timedelta(seconds=90)
    fake.rate_limit(reset)

    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    err = info.value
    assert err.category == "rate_limited"
    assert err.retry_at == reset
    assert "2026-03-01T12:01:30Z" in err.message  # what the console shows
    assert tracker.paused_until == reset
    assert tracker.rate_limit_status()["paused_until"] == reset
    assert tracker.rate_limit_status()["requests_remaining"] == 0
    sent = len(fake.requests)
    assert sent == 1

    clock.advance(60)  # still paused: nothing is sent, for any call
    for call in (
        tracker.fetch_candidate_issues(),
        tracker.fetch_issues_by_ids(ids[:3]),
        tracker.fetch_issues_by_states(["Done"]),
        tracker.move_issue(ids[0], "Done"),
    ):
        with pytest.raises(TrackerError) as again:
            await call
        assert again.value.category == "rate_limited" and again.value.retry_at == reset
    assert len(fake.requests) == sent

    clock.advance(31)
    assert tracker.paused_until is None
    issues = await tracker.fetch_candidate_issues()
    assert [i.id for i in issues] == ids  # nothing lost
    assert tracker.rate_limit_status()["paused_until"] is None


async def test_429_in_the_middle_of_paging_returns_nothing_partial(
    fake: FakeLinear, tracker: LinearTracker, clock: WallClock
) -> None:
    ids = fake.add_issues(120, state="Todo")
    reset = clock.now + timedelta(seconds=20)
    fake.fail_next(
        429,
        headers={"X-RateLimit-Requests-Remaining": "0", "X-RateLimit-Requests-Reset": ms(reset)},
        after=1,
    )
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.retry_at == reset
    clock.advance(21)
    assert [i.id for i in await tracker.fetch_candidate_issues()] == ids


async def test_ratelimited_graphql_error_with_retry_after() -> None:
    clock = WallClock()
    body = {"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]}
    tracker, _ = make(
        lambda r: httpx.Response(400, json=body, headers={"Retry-After": "120"}), clock
    )
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "rate_limited"
    assert info.value.retry_at == clock.now + timedelta(seconds=120)
    await tracker.aclose()


async def test_429_without_headers_backs_off_a_minute() -> None:
    clock = WallClock()
    tracker, seen = make(lambda r: httpx.Response(429, text="slow down"), clock)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.retry_at == clock.now + timedelta(seconds=60)
    with pytest.raises(TrackerError):
        await tracker.fetch_candidate_issues()
    assert len(seen) == 1
    await tracker.aclose()


async def test_exhausted_complexity_budget_sets_the_reset() -> None:
    clock = WallClock()
    complexity_reset = clock.now + timedelta(seconds=300)
    headers = {
        "X-RateLimit-Requests-Remaining": "900",
        "X-RateLimit-Requests-Reset": ms(clock.now + timedelta(seconds=3600)),
        "X-RateLimit-Complexity-Remaining": "0",
        "X-RateLimit-Complexity-Reset": ms(complexity_reset),
    }
    tracker, _ = make(lambda r: httpx.Response(429, json={}, headers=headers), clock)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.retry_at == complexity_reset
    await tracker.aclose()


async def test_exhausted_budget_on_success_pauses_before_linear_refuses() -> None:
    clock = WallClock()
    reset = clock.now + timedelta(seconds=45)
    headers = {
        "X-RateLimit-Requests-Limit": "1500",
        "X-RateLimit-Requests-Remaining": "0",
        "X-RateLimit-Requests-Reset": ms(reset),
        "X-Complexity": "12",
    }
    tracker, seen = make(
        lambda r: httpx.Response(200, json=page([node(1)]), headers=headers), clock
    )
    assert len(await tracker.fetch_candidate_issues()) == 1  # this answer is still used
    status = tracker.rate_limit_status()
    assert status["requests_limit"] == 1500 and status["complexity"] == 12
    assert tracker.paused_until == reset
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "rate_limited" and len(seen) == 1
    clock.advance(46)
    assert len(await tracker.fetch_candidate_issues()) == 1
    await tracker.aclose()


async def test_status_tracks_headers_of_normal_answers(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    assert tracker.rate_limit_status() == {"paused_until": None}
    fake.add_issues(2)
    await tracker.fetch_candidate_issues()
    status = tracker.rate_limit_status()
    assert status["requests_limit"] == 5000
    assert 0 < status["requests_remaining"] < 5000
    assert "observed_at" in status
