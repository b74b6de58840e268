"""The GitHub tracker against FakeGitHub (REST): reference-compatible open/closed states,
pagination past 100 through Link headers, ETag 304s, pull requests dropped, refresh by number
in GraphQL batches, moves, state labels and priority labels."""

from __future__ import annotations

import pytest

from symphony_tui.trackers.base import TrackerError

from .conftest import REPO, TOKEN, github_settings


async def test_candidates_page_past_100_through_link_oldest_first(fake, tracker) -> None:
    numbers = fake.add_issues(230)
    fake.add_issue("a pull request", pull_request=True)
    fake.close(numbers[5])
    issues = await tracker.fetch_candidate_issues()
    assert [i.id for i in issues] == [str(n) for n in numbers if n != numbers[5]]
    assert issues[0].identifier == "GH-1" and issues[0].state == "open"
    assert issues[0].url == "https://github.com/octo/app/issues/1"
    pages = fake.rest_requests("GET", "/repos/octo/app/issues")
    assert len(pages) == 3  # 231 listed (one PR) at 100 a page
    assert pages[0].query == {
        "state": ["open"], "per_page": ["100"], "sort": ["created"], "direction": ["asc"]
    }  # fmt: skip
    assert [p.query.get("page") for p in pages[1:]] == [["2"], ["3"]]
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert all(r.headers["x-github-api-version"] == "2022-11-28" for r in fake.requests)


async def test_etag_304_reuses_the_kept_pages(fake, tracker) -> None:
    fake.add_issues(150)
    first = await tracker.fetch_candidate_issues()
    again = await tracker.fetch_candidate_issues()
    assert again == first
    second_round = fake.rest_requests("GET", "/repos/octo/app/issues")[2:]
    assert [r.status for r in second_round] == [304, 304]
    assert all(r.headers.get("if-none-match") for r in second_round)
    assert tracker.client.not_modified == 2
    fake.update(1, title="Renamed")
    third = await tracker.fetch_candidate_issues()
    assert third[0].title == "Renamed"
    assert [r.status for r in fake.rest_requests("GET", "/repos/octo/app/issues")[4:]] == [200, 304]


async def test_refresh_by_number_in_batches_of_50_and_missing_issues_absent(fake, tracker) -> None:
    numbers = fake.add_issues(60)
    fake.close(numbers[3])
    fake.delete(numbers[4])
    ids = [str(n) for n in numbers]
    found = await tracker.fetch_issues_by_ids(ids)
    assert [i.id for i in found] == [i for i in ids if i != str(numbers[4])]
    assert found[3].state == "closed"
    batches = fake.graphql_requests("SymphonyGitHubIssuesByNumber")
    assert sorted(r.graphql.count("issue(number:") for r in batches) == [10, 50]


async def test_issues_by_states_closed_only(fake, tracker) -> None:
    _a, b = fake.add_issues(2)
    fake.close(b)
    assert [i.id for i in await tracker.fetch_issues_by_states(["closed"])] == [str(b)]
    assert await tracker.fetch_issues_by_states([]) == []
    assert fake.rest_requests()[-1].query["state"] == ["closed"]


async def test_move_closes_and_reopens(fake, tracker) -> None:
    (n,) = fake.add_issues(1)
    moved = await tracker.move_issue(str(n), "closed")
    assert moved.state == "closed" and fake.issue(n).state == "closed"
    assert fake.issue(n).state_reason == "completed"
    moved = await tracker.move_issue(str(n), "open")
    assert moved.state == "open"
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue(str(n), "In Review")
    assert info.value.category == "github_unknown_state"


async def test_state_labels_and_priority_labels(fake, settings, tracker) -> None:
    settings.value = github_settings(
        fake,
        state_labels=["Todo", "In Progress", "Human Review"],
        active_states=["Todo", "In Progress"],
        terminal_states=["closed"],
        priority_labels={"P1": 1, "p2": 2},
    )
    a = fake.add_issue("a", labels=["Todo", "p2", "bug"])
    b = fake.add_issue("b", labels=["in progress", "P1"])
    fake.add_issue("c", labels=["Human Review"])
    fake.add_issue("d")
    issues = await tracker.fetch_candidate_issues()
    assert [(i.id, i.state, i.priority) for i in issues] == [
        (str(a), "Todo", 2),
        (str(b), "In Progress", 1),
    ]
    assert issues[0].labels == ("todo", "p2", "bug")
    moved = await tracker.move_issue(str(a), "Human Review")
    assert moved.state == "Human Review"
    assert fake.issue(a).labels == ["p2", "bug", "Human Review"]
    moved = await tracker.move_issue(str(a), "closed")
    assert moved.state == "closed"


async def test_blockers_from_issue_dependencies(fake, settings, tracker) -> None:
    settings.value = github_settings(
        fake, state_labels=["Todo"], active_states=["Todo"], terminal_states=["Done", "closed"]
    )
    blocker = fake.add_issue("blocker")
    done = fake.add_issue("done blocker", state="closed")
    waiting = fake.add_issue("waits", labels=["Todo"])
    free = fake.add_issue("free", labels=["Todo"])
    fake.block(waiting, blocker)
    fake.block(free, done)
    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    assert [(b.identifier, b.state) for b in issues[str(waiting)].blocked_by] == [
        (f"GH-{blocker}", "open")
    ]
    assert [(b.identifier, b.state) for b in issues[str(free)].blocked_by] == [
        (f"GH-{done}", "Done")
    ]
    asked = fake.rest_requests("GET", "/dependencies/blocked_by")
    assert sorted(r.path for r in asked) == sorted(
        f"/repos/octo/app/issues/{n}/dependencies/blocked_by" for n in (waiting, free)
    )
    assert [issues[str(n)].dispatchable for n in (waiting, free)] == [False, True]
    # A refresh by id (a due retry's) sees the open blocker too: still not dispatchable.
    refreshed = {i.id: i for i in await tracker.fetch_issues_by_ids([str(waiting), str(free)])}
    assert [refreshed[str(n)].dispatchable for n in (waiting, free)] == [False, True]


async def test_token_never_in_errors(fake, tracker) -> None:
    fake.fail_next(500, {"message": f"boom {TOKEN}"})
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "github_api_status"
    assert TOKEN not in str(info.value) and "[redacted]" in str(info.value)


async def test_enterprise_server_api_url(clock) -> None:
    from symphony_tui.trackers.github import GitHubTracker
    from symphony_tui_testing.fake_github import FakeGitHub

    from .conftest import require_contracts

    require_contracts()
    with FakeGitHub(token=TOKEN, clock=clock, enterprise=True) as ghes:
        assert ghes.url.endswith("/api/v3")
        (n,) = ghes.add_issues(1)
        tracker = GitHubTracker(lambda: github_settings(ghes), clock=clock)
        assert [i.id for i in await tracker.fetch_candidate_issues()] == [str(n)]
        assert [i.id for i in await tracker.fetch_issues_by_ids([str(n)])] == [str(n)]
        await tracker.aclose()
    assert ghes.violations == []
    assert all(r.status == 200 for r in ghes.requests)


def _dispatchable(issues) -> list[str]:
    return [i.id for i in issues if i.dispatchable]


async def test_assignee_decides_dispatchable_in_lists_and_refreshes(
    fake, settings, tracker
) -> None:
    settings.value = github_settings(fake, assignee="Bot-User")
    mine = fake.add_issue("mine", assignees=["bot-user"])
    theirs = fake.add_issue("theirs", assignees=["someone"])
    candidates = await tracker.fetch_candidate_issues()
    assert [i.id for i in candidates] == [str(mine), str(theirs)]  # listed (§11.1) ...
    assert _dispatchable(candidates) == [str(mine)]  # ... but only one is routed here
    refreshed = await tracker.fetch_issues_by_ids([str(mine), str(theirs)])
    assert [i.id for i in refreshed] == [str(mine), str(theirs)]
    assert _dispatchable(refreshed) == [str(mine)]
    assert [i.assignees for i in refreshed] == [("bot-user",), ("someone",)]
    assert [i.assignee_id for i in refreshed] == ["bot-user", "someone"]
    assert refreshed[0].template_view()["assignees"] == ["bot-user"]
    assert refreshed[0].native_ref == {"repository": REPO, "number": mine}


async def test_assignee_me_is_the_tokens_login(fake, settings, tracker) -> None:
    settings.value = github_settings(fake, assignee="me")
    mine = fake.add_issue("mine", assignees=[fake.viewer_login])
    fake.add_issue("theirs", assignees=["someone"])
    assert _dispatchable(await tracker.fetch_candidate_issues()) == [str(mine)]
    assert _dispatchable(await tracker.fetch_candidate_issues()) == [str(mine)]
    assert len(fake.graphql_requests("SymphonyGitHubViewer")) == 1
