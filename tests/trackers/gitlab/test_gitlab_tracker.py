"""The GitLab tracker against FakeGitLab: labels as states, paging by X-Next-Page (and
without it), blockers from ``is_blocked_by`` links and the wait of not-started issues,
refresh by iid, moves by label and state event, 429 / 5xx, malformed records, the
``gitlab_api`` tool and its scope, settings. Every request is checked against GitLab's
published description (the ``fake`` fixture fails the test on any violation)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from symphony_tui.domain import BlockerRef
from symphony_tui.trackers.base import TrackerError

from .conftest import PROJECT, TOKEN, gitlab_settings


async def test_candidates_take_their_state_from_labels(fake, tracker) -> None:
    fake.add_issue(
        "Fix the login",
        labels=["Todo", "Backend", " backend"],
        description="Steps\n",
        assignees=["ana"],
    )
    fake.add_issue("Nobody labelled it")
    fake.add_issue("Going", labels=["In Progress", "P1"])
    fake.add_issue("Done", state="closed", labels=["Todo"])
    issues = await tracker.fetch_candidate_issues()
    assert [(i.identifier, i.state) for i in issues] == [("GL-1", "Todo"), ("GL-3", "In Progress")]
    first = issues[0]
    assert first.id == "1" and first.title == "Fix the login" and first.description == "Steps"
    assert first.labels == ("todo", "backend") and first.assignees == ("ana",)
    assert first.url == f"https://gitlab.example/{PROJECT}/-/issues/1"
    assert first.created_at == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    listing = fake.seen("GET", "/issues")[0]
    assert listing.path == "/projects/group%2Fapp/issues"
    assert listing.query["state"] == ["opened"] and listing.query["sort"] == ["asc"]
    assert listing.headers["private-token"] == TOKEN


async def test_priority_labels_rank_issues(fake, settings, tracker) -> None:
    settings.value = gitlab_settings(fake, priority_labels={"P1": 1, "P2": 2})
    fake.add_issue("low", labels=["Todo", "P2"])
    fake.add_issue("high", labels=["Todo", "P1", "P2"])
    fake.add_issue("none", labels=["Todo"])
    assert [i.priority for i in await tracker.fetch_candidate_issues()] == [2, 1, None]


async def test_lists_page_by_x_next_page_and_by_full_pages_without_it(fake, tracker) -> None:
    fake.add_issues(230, labels=["Todo"])
    issues = await tracker.fetch_issues_by_states(["Todo"])
    assert [i.id for i in issues] == [str(n) for n in range(1, 231)]
    assert [r.query["page"] for r in fake.seen("GET", "/issues")] == [["1"], ["2"], ["3"]]
    fake.next_page_headers = False  # GitLab leaves them out past 10,000 issues
    again = await tracker.fetch_issues_by_states(["Todo"])
    assert len(again) == 230 and len(fake.seen("GET", "/issues")) == 6


async def test_is_blocked_by_links_are_blockers_and_todo_issues_wait(
    fake, settings, tracker
) -> None:
    blocker = fake.add_issue("schema", labels=["In Progress"])
    waiting = fake.add_issue("use the schema", labels=["Todo"], blocked_by=[blocker.iid])
    going = fake.add_issue("started anyway", labels=["In Progress"], blocked_by=[blocker.iid])
    issues = {i.identifier: i for i in await tracker.fetch_candidate_issues()}
    # listed, but only GL-2 (Todo, blocker open) is not dispatchable
    assert [k for k, i in sorted(issues.items()) if not i.dispatchable] == ["GL-2"]
    assert issues["GL-2"].native_ref == {"project_path": PROJECT, "iid": 2}
    # an id refresh (a due retry) reads a Todo issue's links and says the same
    (again,) = await tracker.fetch_issues_by_ids([str(waiting.iid)])
    assert not again.dispatchable and again.blocked_by
    assert fake.seen("GET", "/links")[-1].path.endswith(f"/issues/{waiting.iid}/links")
    assert issues["GL-3"].blocked_by == (
        BlockerRef(id="1", identifier="GL-1", state="In Progress"),
    )
    assert issues["GL-1"].blocked_by == ()  # it blocks others; nothing blocks it
    fake.update(blocker.iid, state="closed")
    issues = {i.identifier: i for i in await tracker.fetch_candidate_issues()}
    assert issues["GL-2"].blocked_by == (BlockerRef(id="1", identifier="GL-1", state="closed"),)
    assert issues["GL-2"].dispatchable
    assert f"/issues/{waiting.iid}/links" in fake.seen("GET", "/links")[-2].path
    # assigned to someone else than the configured username: not dispatchable
    settings.value = gitlab_settings(fake, assignee="someone-else")
    (moved_on,) = await tracker.fetch_issues_by_ids([str(going.iid)])
    assert not moved_on.dispatchable


async def test_refresh_by_iid_batches_100_and_omits_missing_ones(fake, tracker) -> None:
    fake.add_issues(150, labels=["In Progress"])
    fake.update(3, state="closed")
    ids = [str(n) for n in range(1, 151)] + ["999"]
    found = await tracker.fetch_issues_by_ids(ids)
    assert [i.id for i in found] == [str(n) for n in range(1, 151)]
    assert found[2].state == "closed"
    refresh = fake.seen("GET", "/issues")
    assert [len(r.query["iids[]"]) for r in refresh] == [100, 51]
    assert all(r.query["state"] == ["all"] for r in refresh)


async def test_empty_reads_send_nothing(fake, tracker) -> None:
    assert await tracker.fetch_issues_by_states([]) == []
    assert await tracker.fetch_issues_by_ids([]) == []
    assert fake.requests == []


async def test_a_malformed_record_is_skipped_in_lists_and_fails_a_read_by_id(
    fake, tracker, caplog
) -> None:
    fake.add_issue("good", labels=["Todo"])
    fake.add_issue("bad", raw={"iid": 2, "title": "", "state": "opened", "labels": ["Todo"]})
    assert [i.id for i in await tracker.fetch_candidate_issues()] == ["1"]
    assert "issue 2 lacks title" in caplog.text
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_issues_by_ids(["2"])
    assert str(err.value) == "tracker_response: issue 2 lacks title"


async def test_moves_swap_state_labels_close_and_reopen(fake, tracker) -> None:
    issue = fake.add_issue("go", labels=["Todo", "backend"])
    moved = await tracker.move_issue("1", "in progress")
    assert moved.state == "In Progress" and fake.issues[1].labels == ["backend", "In Progress"]
    assert fake.seen("PUT")[-1].body == {"add_labels": ["In Progress"], "remove_labels": ["Todo"]}
    moved = await tracker.move_issue("GL-1", "closed")
    assert moved.state == "closed" and fake.issues[1].state == "closed"
    moved = await tracker.move_issue("1", "Todo")
    assert moved.state == "Todo" and fake.seen("PUT")[-1].body["state_event"] == "reopen"
    with pytest.raises(TrackerError) as err:
        await tracker.move_issue("1", "Shipped")
    assert err.value.category == "tracker_response"
    assert issue.title == "go"


async def test_429_pauses_until_retry_after_and_5xx_is_one_line(fake, tracker, clock) -> None:
    fake.add_issue("one", labels=["Todo"])
    fake.rate_limit(30)
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    until = clock.now + timedelta(seconds=30)
    assert err.value.category == "tracker_rate_limited" and err.value.retry_at == until
    assert "GitLab rate limit (HTTP 429): paused until" in err.value.message
    sent = len(fake.requests)
    with pytest.raises(TrackerError, match="paused until"):
        await tracker.fetch_issues_by_ids(["1"])
    assert len(fake.requests) == sent
    clock.advance(31)
    fake.fail_next(500, {"message": "500 Internal Server Error"})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert str(err.value) == (
        "tracker_status: HTTP 500 from GitLab for /projects/group%2Fapp/issues: "
        "500 Internal Server Error"
    )
    assert [i.title for i in await tracker.fetch_candidate_issues()] == ["one"]


async def test_an_exhausted_budget_pauses_before_gitlab_refuses(fake, tracker, clock) -> None:
    reset = int((clock.now + timedelta(seconds=40)).timestamp())
    fake.fail_next(200, [], {"RateLimit-Remaining": "0", "RateLimit-Reset": str(reset)})
    assert await tracker.fetch_candidate_issues() == []
    assert tracker.paused_until == clock.now + timedelta(seconds=40)
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.category == "tracker_rate_limited"


async def test_a_refused_token_is_credentials_refused(fake, tracker) -> None:
    fake.token = "another"
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.credentials_refused and TOKEN not in str(err.value)


async def test_gitlab_api_tool_reads_the_project_and_writes_its_own_issue_only(
    fake, tracker
) -> None:
    fake.add_issue("mine", labels=["Todo"])
    fake.add_issue("not mine", labels=["Todo"])
    (issue,) = await tracker.fetch_issues_by_ids(["1"])
    base = "/projects/group%2Fapp/issues"
    result = await tracker.call_agent_tool(issue, {"method": "GET", "path": f"{base}/2"})
    assert result.success and json.loads(result.text)["body"]["title"] == "not mine"
    result = await tracker.call_agent_tool(
        issue,
        {"method": "PUT", "path": f"{base}/1", "body": {"add_labels": ["Human Review"]}},
    )
    assert result.success and "Human Review" in fake.issues[1].labels
    for bad in (
        {"method": "PUT", "path": f"{base}/2", "body": {"state_event": "close"}},
        {"method": "GET", "path": "/projects/other%2Frepo/issues"},
        {"method": "DELETE", "path": f"{base}/1/"},
        {"method": "GET", "path": f"{base}/1/../../../../users"},
    ):
        result = await tracker.call_agent_tool(issue, bad)
        assert not result.success and "error" in json.loads(result.text)
    assert fake.issues[2].state == "opened"
    assert TOKEN not in result.text


async def test_settings_default_to_opened_and_closed_and_are_validated(tmp_path) -> None:
    from symphony_tui.config.settings import resolve_settings
    from symphony_tui.config.validate import validate_dispatch
    from symphony_tui.trackers.gitlab import GitLabTracker

    raw = {"tracker": {"kind": "gitlab", "project_path": "group/app"}}
    s = resolve_settings(raw, workflow_dir=tmp_path, env={"GITLAB_PAT": "pat"})
    assert s.tracker.api_url == "https://gitlab.com/api/v4" and s.tracker.api_key == "pat"
    assert (s.tracker.active_states, s.tracker.terminal_states) == (("opened",), ("closed",))
    assert validate_dispatch(s) == []
    bad = {"tracker": {"kind": "gitlab", "active_states": ["Todo"], "api_url": "http://x"}}
    s = resolve_settings(bad, workflow_dir=tmp_path, env={})
    assert [p.split(":")[0] for p in validate_dispatch(s)] == [
        "invalid_gitlab_api_url",
        "missing_gitlab_api_key",
        "missing_gitlab_project_path",
        "invalid_gitlab_states",
    ]
    raw = {"tracker": {"kind": "gitlab", "api_key": "$MY_GITLAB", "project_path": "g/a"}}
    s = resolve_settings(raw, workflow_dir=tmp_path, env={})
    names = GitLabTracker(lambda: s).secret_environment_names()
    assert {"GITLAB_PAT", "GITLAB_ACCESS_TOKEN", "MY_GITLAB"} <= names
