"""The Jira tracker against FakeJira: JQL search pages, normalization, blockers and the
``new``-category gate, refresh by id, transitions by name, 429 / 503 / 5xx, malformed records,
the ``jira_rest`` tool and its scope. Every request is checked against Atlassian's published
description (the ``fake`` fixture fails the test on any violation)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from symphony_tui.domain import BlockerRef
from symphony_tui.trackers.base import TrackerError

from .conftest import EMAIL, PROJECT, TOKEN, jira_settings


async def test_candidates_are_normalized_from_a_jql_search(fake, tracker) -> None:
    fake.add_issue(
        "Fix the login",
        status="To Do",
        description="First line\nSecond line",
        labels=["Backend", " backend", "UI"],
        assignee="acc-7",
        priority="High",
    )
    fake.add_issue("Finished", status="Done")
    fake.add_issue("Started", status="In Progress", priority="Unknown")
    issues = await tracker.fetch_candidate_issues()
    assert [i.identifier for i in issues] == ["SD-1", "SD-3"]
    first = issues[0]
    assert first.id == "10001" and first.title == "Fix the login" and first.state == "To Do"
    assert first.description == "First line\nSecond line"
    assert first.labels == ("backend", "ui")
    assert first.assignees == ("acc-7",)
    assert first.priority == 2 and issues[1].priority is None
    assert first.url == f"{fake.url}/browse/SD-1"
    assert first.created_at == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    search = fake.seen("POST", "/search/jql")[0]
    assert search.body["jql"] == (
        'project = "SD" AND status IN ("To Do", "In Progress") ORDER BY created ASC'
    )
    pair = base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
    assert search.headers["authorization"] == f"Basic {pair}"


async def test_search_follows_next_page_tokens_and_keeps_each_issue_once(fake, tracker) -> None:
    fake.add_issues(250, status="To Do")
    issues = await tracker.fetch_candidate_issues()
    assert [i.identifier for i in issues] == [f"SD-{n}" for n in range(1, 251)]
    pages = fake.seen("POST", "/search/jql")
    assert len(pages) == 3
    assert "nextPageToken" not in pages[0].body and pages[1].body["nextPageToken"]
    assert all(p.body["maxResults"] == 100 for p in pages)


async def test_a_page_that_is_not_last_without_a_token_is_an_error(fake, tracker) -> None:
    fake.fail_next(200, {"issues": [], "isLast": False})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.category == "tracker_pagination"


async def test_inward_blocks_links_are_blockers_and_new_issues_wait_for_them(
    fake, settings, tracker
) -> None:
    blocker = fake.add_issue("Schema first", status="In Progress")
    waiting = fake.add_issue("Use the schema", status="To Do", blocked_by=[blocker.key])
    started = fake.add_issue("Already going", status="In Progress", blocked_by=[blocker.key])
    done = fake.add_issue("Done blocker", status="Done")
    free = fake.add_issue("Unblocked", status="To Do", blocked_by=[done.key])
    candidates = await tracker.fetch_candidate_issues()
    by_key = {i.identifier: i for i in candidates}
    # listed, but not dispatchable: status category new, blocker still open
    assert not by_key[waiting.key].dispatchable
    assert by_key[started.key].dispatchable and by_key[free.key].dispatchable
    assert by_key[waiting.key].native_ref == {"key": waiting.key, "project": "SD"}
    assert by_key[started.key].blocked_by == (
        BlockerRef(id=blocker.id, identifier=blocker.key, state="In Progress"),
    )
    # the outward link on the blocker itself is not a blocker of the blocker
    assert by_key[blocker.key].blocked_by == ()
    # an id refresh (a due retry) says the same
    (again,) = await tracker.fetch_issues_by_ids([waiting.id])
    assert not again.dispatchable
    # once the blocker is done, the waiting issue may start
    fake.set_status(blocker.key, "Done")
    now = {i.identifier: i for i in await tracker.fetch_candidate_issues()}
    assert now[waiting.key].dispatchable
    # reads by state show it with the same verdict
    fake.set_status(blocker.key, "In Progress")
    states = {i.identifier: i for i in await tracker.fetch_issues_by_states(["To Do"])}
    assert not states[waiting.key].dispatchable
    # an issue assigned to another account than the configured one is not dispatchable
    settings.value = jira_settings(fake, assignee="acc-other")
    assert not (await tracker.fetch_issues_by_ids([started.id]))[0].dispatchable


async def test_assignee_me_narrows_candidates_with_current_user(fake, settings, tracker) -> None:
    fake.add_issue("mine", assignee=fake.account_id)
    fake.add_issue("theirs", assignee="acc-other")
    settings.value = jira_settings(fake, assignee="me")
    assert [i.title for i in await tracker.fetch_candidate_issues()] == ["mine"]
    assert "assignee = currentUser()" in fake.seen("POST", "/search/jql")[-1].body["jql"]
    settings.value = jira_settings(fake, assignee="acc-other")
    assert [i.title for i in await tracker.fetch_candidate_issues()] == ["theirs"]


async def test_an_empty_state_list_sends_nothing(fake, tracker) -> None:
    assert await tracker.fetch_issues_by_states([]) == []
    assert await tracker.fetch_issues_by_ids([]) == []
    assert fake.requests == []


async def test_refresh_by_id_uses_bulkfetch_in_batches_and_skips_other_projects(
    fake, tracker
) -> None:
    issues = fake.add_issues(120, status="In Progress")
    other = fake.add_issue("elsewhere", project="OPS")
    fake.delete(issues[5].key)
    ids = [i.id for i in issues] + [other.id]
    found = await tracker.fetch_issues_by_ids(ids)
    assert [i.id for i in found] == [i.id for n, i in enumerate(issues) if n != 5]
    bulk = fake.seen("POST", "/bulkfetch")
    assert [len(r.body["issueIdsOrKeys"]) for r in bulk] == [100, 21]
    by_key = await tracker.fetch_issues_by_ids(["SD-1"])
    assert [i.identifier for i in by_key] == ["SD-1"]


async def test_a_malformed_record_is_skipped_in_lists_and_fails_a_read_by_id(
    fake, tracker, caplog
) -> None:
    fake.add_issue("good")
    bad = fake.add_issue(
        "bad", raw={"id": "10002", "key": "SD-2", "fields": {"project": {"key": "SD"}}}
    )
    issues = await tracker.fetch_candidate_issues()
    assert [i.identifier for i in issues] == ["SD-1"]
    assert "SD-2 lacks summary, status" in caplog.text
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_issues_by_ids([bad.id])
    assert err.value.category == "tracker_response"
    assert str(err.value) == "tracker_response: issue SD-2 lacks summary, status"


async def test_move_uses_the_transition_into_the_named_status(fake, tracker) -> None:
    issue = fake.add_issue("go", status="To Do")
    moved = await tracker.move_issue(issue.id, "in progress")  # transition named "Start work"
    assert moved.state == "In Progress" and fake.issues[issue.key].status == "In Progress"
    posted = fake.seen("POST", "/transitions")[-1]
    assert posted.body == {"transition": {"id": "13"}}
    moved = await tracker.move_issue(issue.key, "Resolve")  # by the transition's own name
    assert moved.state == "Done"
    with pytest.raises(TrackerError) as err:
        await tracker.move_issue(issue.id, "Shipped")
    assert err.value.category == "tracker_response"
    assert "available: Backlog, To Do, In Progress, Human Review, Won't Do" in err.value.message


async def test_429_pauses_until_retry_after_and_sends_nothing_meanwhile(
    fake, tracker, clock
) -> None:
    fake.add_issue("one")
    fake.rate_limit(45)
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    until = clock.now + timedelta(seconds=45)
    assert err.value.category == "tracker_rate_limited" and err.value.retry_at == until
    assert str(err.value) == (
        "tracker_rate_limited: Jira rate limit (HTTP 429): paused until "
        f"{until.isoformat().replace('+00:00', 'Z')}"
    )
    sent = len(fake.requests)
    with pytest.raises(TrackerError, match="paused until"):
        await tracker.fetch_issues_by_states(["To Do"])
    assert len(fake.requests) == sent and tracker.paused_until == until
    clock.advance(46)
    assert [i.title for i in await tracker.fetch_candidate_issues()] == ["one"]


async def test_503_with_retry_after_pauses_and_other_5xx_is_one_line(fake, tracker, clock) -> None:
    fake.fail_next(503, {"message": "down"}, {"Retry-After": "20"})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.category == "tracker_rate_limited"
    assert "Jira unavailable (HTTP 503): paused until" in err.value.message
    clock.advance(21)
    fake.fail_next(502, {"errorMessages": ["Bad gateway\nupstream"]})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert str(err.value) == (
        "tracker_status: HTTP 502 from Jira for /rest/api/3/search/jql: Bad gateway upstream"
    )


async def test_a_refused_token_is_credentials_refused_and_never_echoed(fake, settings) -> None:
    from symphony_tui.trackers.jira import JiraTracker

    fake.token = "another"
    tracker = JiraTracker(settings)
    try:
        with pytest.raises(TrackerError) as err:
            await tracker.fetch_candidate_issues()
    finally:
        await tracker.aclose()
    assert err.value.credentials_refused and err.value.category == "tracker_status"
    assert "401" in err.value.message and TOKEN not in str(err.value)


async def test_jira_rest_tool_reads_comments_and_transitions_its_own_issue_only(
    fake, tracker
) -> None:
    own = fake.add_issue("mine")
    other = fake.add_issue("not mine")
    issue = (await tracker.fetch_issues_by_ids([own.id]))[0]
    result = await tracker.call_agent_tool(
        issue, {"method": "GET", "path": f"/rest/api/3/issue/{own.key}"}
    )
    assert result.success and json.loads(result.text)["body"]["key"] == own.key
    comment = {
        "type": "doc",
        "version": 1,
        "content": [{"type": "paragraph", "content": [{"type": "text", "text": "done"}]}],
    }
    result = await tracker.call_agent_tool(
        issue,
        {
            "method": "POST",
            "path": f"/rest/api/3/issue/{own.key}/comment",
            "body": {"body": comment},
        },
    )
    assert result.success and json.loads(result.text)["status"] == 201
    assert fake.issues[own.key].comments[0]["body"] == comment
    result = await tracker.call_agent_tool(
        issue,
        {"method": "POST", "path": f"/rest/api/3/issue/{own.id}/transitions",
         "body": {"transition": {"id": "13"}}},
    )  # fmt: skip
    assert result.success and fake.issues[own.key].status == "In Progress"
    refused = await tracker.call_agent_tool(
        issue,
        {
            "method": "POST",
            "path": f"/rest/api/3/issue/{other.key}/comment",
            "body": {"body": comment},
        },
    )
    assert not refused.success and json.loads(refused.text)["error"]["code"] == "forbidden"
    for bad in (
        {"method": "GET", "path": "/rest/api/2/issue/SD-1"},
        {"method": "GET", "path": "/rest/api/3/issue/../../admin"},
        {"method": "PATCH", "path": f"/rest/api/3/issue/{own.key}"},
        {"method": "DELETE", "path": f"/rest/api/3/issue/{own.key}"},
        "not an object",
    ):
        result = await tracker.call_agent_tool(issue, bad)
        assert not result.success
    assert not fake.issues[other.key].comments
    assert TOKEN not in "".join(str(r.body) for r in fake.requests)


async def test_settings_are_validated_with_one_line_each(tmp_path) -> None:
    from symphony_tui.config.settings import resolve_settings
    from symphony_tui.config.validate import validate_dispatch

    settings = resolve_settings({"tracker": {"kind": "jira"}}, workflow_dir=tmp_path, env={})
    assert validate_dispatch(settings) == [
        "invalid_jira_base_url: tracker.base_url is not set (or $JIRA_BASE_URL)",
        "missing_jira_email: tracker.email is not set (or $JIRA_EMAIL)",
        "missing_jira_api_token: no Jira API token (set tracker.api_token: $VAR, or "
        "$JIRA_API_TOKEN)",
        "missing_jira_project_key: tracker.project_key is not set",
    ]
    env = {"JIRA_BASE_URL": "http://site.example", "JIRA_EMAIL": "a@b", "JIRA_API_TOKEN": "t"}
    raw = {"tracker": {"kind": "jira", "project_key": PROJECT}}
    settings = resolve_settings(raw, workflow_dir=tmp_path, env=env)
    assert validate_dispatch(settings) == [
        "invalid_jira_base_url: tracker.base_url 'http://site.example' is not an https URL"
    ]
    assert settings.tracker.api_key == "t" and settings.tracker.active_states == (
        "To Do",
        "In Progress",
    )


def test_secret_names_cover_the_default_and_the_named_variable() -> None:
    from pathlib import Path

    from symphony_tui.config.settings import resolve_settings
    from symphony_tui.trackers.jira import JiraTracker

    raw = {"tracker": {"kind": "jira", "provider": {"api_token": "$MY_JIRA"}}}
    settings = resolve_settings(raw, workflow_dir=Path("."), env={})
    assert {"JIRA_API_TOKEN", "MY_JIRA"} <= JiraTracker(lambda: settings).secret_environment_names()
