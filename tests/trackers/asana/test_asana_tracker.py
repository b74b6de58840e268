"""The Asana tracker against FakeAsana: sections as states, offset pages, dependencies as
blockers and the wait of not-started tasks, refresh by gid, moves between sections, 429 /
5xx, malformed records, the ``asana_api`` tool and its scope, settings. Every request and
answer is checked against Asana's published description (the ``fake`` fixture fails the
test on any violation)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from symphony_tui.domain import BlockerRef
from symphony_tui.trackers.base import TrackerError

from .conftest import PROJECT, TOKEN, asana_settings


async def test_candidates_are_incomplete_tasks_of_active_sections(fake, tracker) -> None:
    first = fake.add_task(
        "Fix the login", section="To do", notes="Steps\n", tags=["Backend", "backend "],
        assignee="1200000000000007",
    )  # fmt: skip
    fake.add_task("Later", section="Backlog")
    fake.add_task("Going", section="Doing")
    fake.add_task("Finished but left in To do", section="To do", completed=True)
    issues = await tracker.fetch_candidate_issues()
    assert [(i.title, i.state) for i in issues] == [("Fix the login", "To do"), ("Going", "Doing")]
    issue = issues[0]
    assert issue.id == first.gid and issue.identifier == f"ASANA-{first.gid}"
    assert issue.description == "Steps" and issue.labels == ("backend",)
    assert issue.assignees == ("1200000000000007",)
    assert issue.url and issue.url.endswith(f"/task/{first.gid}")
    assert issue.created_at == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    listing = fake.seen("GET", "/tasks")[0]
    assert listing.query["completed_since"] == ["now"] and listing.query["limit"] == ["100"]
    assert listing.headers["authorization"] == f"Bearer {TOKEN}"


async def test_pages_follow_next_page_offsets(fake, tracker) -> None:
    fake.add_tasks(230, section="Doing")
    issues = await tracker.fetch_issues_by_states(["doing"])
    assert len(issues) == 230 and len({i.id for i in issues}) == 230
    offsets = [r.query.get("offset") for r in fake.seen("GET", "/tasks")]
    assert offsets == [None, ["eyJ100"], ["eyJ200"]]


async def test_a_next_page_without_an_offset_is_an_error(fake, tracker) -> None:
    fake.fail_next(200, {"data": [], "next_page": {"path": "/x"}})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.category == "tracker_pagination"


async def test_dependencies_are_blockers_and_to_do_tasks_wait_for_them(
    fake, tracker, clock
) -> None:
    blocker = fake.add_task("schema", section="Doing")
    waiting = fake.add_task("use it", section="To do", dependencies=[blocker.gid])
    going = fake.add_task("started", section="Doing", dependencies=[blocker.gid])
    elsewhere = fake.add_task("in another project", section="Doing", project="1200000000000999")
    also = fake.add_task("needs the other one", section="Doing", dependencies=[elsewhere.gid])
    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    # listed, but only the To do task with an open dependency is not dispatchable
    assert {blocker.gid, going.gid, also.gid, waiting.gid} <= set(issues)
    assert [g for g, i in issues.items() if not i.dispatchable] == [waiting.gid]
    assert issues[waiting.gid].native_ref == {"project_gid": PROJECT, "gid": waiting.gid}
    assert issues[going.gid].blocked_by == (
        BlockerRef(id=blocker.gid, identifier=f"ASANA-{blocker.gid}", state="Doing"),
    )
    # a dependency outside the listing is read on its own; it is in no section here
    assert issues[also.gid].blocked_by[0].state is None
    assert fake.seen("GET", f"/tasks/{elsewhere.gid}")
    fake.update(blocker.gid, completed=True)
    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    assert issues[waiting.gid].blocked_by[0].state == "Done"  # completed: the terminal state
    assert issues[waiting.gid].dispatchable
    # dependencies read on their own are read again only once their state has aged
    reads = len(fake.seen("GET", f"/tasks/{blocker.gid}"))
    await tracker.fetch_candidate_issues()
    assert len(fake.seen("GET", f"/tasks/{blocker.gid}")) == reads == 1
    fake.update(blocker.gid, completed=False, section="Review")
    clock.advance(301)
    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    assert not issues[waiting.gid].dispatchable  # reopened into Review: listed, it blocks
    fake.update(blocker.gid, completed=True)
    clock.advance(301)
    await tracker.fetch_candidate_issues()
    assert len(fake.seen("GET", f"/tasks/{blocker.gid}")) == 2
    (refreshed,) = await tracker.fetch_issues_by_ids([going.gid])
    assert refreshed.blocked_by[0].state == "Done"  # a refresh carries its blockers' states


async def test_refresh_by_gid_omits_deleted_and_moved_out_tasks(fake, tracker) -> None:
    kept = fake.add_task("kept", section="Doing")
    gone = fake.add_task("gone")
    moved = fake.add_task("moved", project="1200000000000999")
    del fake.tasks[gone.gid]
    found = await tracker.fetch_issues_by_ids([kept.gid, gone.gid, moved.gid])
    assert [i.id for i in found] == [kept.gid]


async def test_a_malformed_record_is_skipped_in_lists_and_fails_a_read_by_id(
    fake, tracker, caplog
) -> None:
    fake.add_task("good")
    bad = fake.add_task("bad")
    bad.raw = {"gid": bad.gid, "name": "", "memberships": []}
    assert [i.title for i in await tracker.fetch_issues_by_states(["To do"])] == ["good"]
    assert await tracker.fetch_issues_by_ids([bad.gid]) == []  # not in the project
    bad.raw = {
        "gid": bad.gid,
        "name": " ",
        "memberships": [{"project": {"gid": PROJECT}, "section": {"gid": "1", "name": "To do"}}],
    }
    await tracker.fetch_candidate_issues()
    assert f"task {bad.gid} lacks name" in caplog.text
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_issues_by_ids([bad.gid])
    assert str(err.value) == f"tracker_response: task {bad.gid} lacks name"


async def test_moves_go_to_the_section_of_that_name(fake, tracker) -> None:
    task = fake.add_task("go", section="To do")
    moved = await tracker.move_issue(task.gid, "review")
    assert moved.state == "Review" and fake.tasks[task.gid].section == "Review"
    assert fake.seen("POST", "/addTask")[-1].body == {"data": {"task": task.gid}}
    with pytest.raises(TrackerError) as err:
        await tracker.move_issue(task.gid, "Shipped")
    assert err.value.category == "tracker_response"
    assert "project has: Backlog, To do, Doing, Review, Done" in err.value.message


async def test_a_refresh_by_id_folds_the_dependencies_into_dispatchable(
    fake, tracker, clock
) -> None:
    blocker = fake.add_task("schema", section="Doing")
    waiting = fake.add_task("use it", section="To do", dependencies=[blocker.gid])
    (again,) = await tracker.fetch_issues_by_ids([waiting.gid])  # a due retry's refresh
    assert not again.dispatchable and again.blocked_by[0].state == "Doing"
    fake.update(blocker.gid, completed=True)
    clock.advance(301)
    (again,) = await tracker.fetch_issues_by_ids([waiting.gid])
    assert again.dispatchable and again.blocked_by[0].state == "Done"


async def test_an_empty_refresh_by_id_sends_nothing(fake, tracker) -> None:
    assert await tracker.fetch_issues_by_ids([]) == []
    assert fake.requests == []


async def test_assignee_me_is_asked_once(fake, settings, tracker) -> None:
    fake.add_task("mine", assignee=fake.user)
    fake.add_task("theirs", assignee="1200000000000008")
    settings.value = asana_settings(fake, assignee="me")
    for _ in range(2):
        issues = await tracker.fetch_candidate_issues()
        assert [(i.title, i.dispatchable) for i in issues] == [("mine", True), ("theirs", False)]
    assert len(fake.seen("GET", "/users/me")) == 1
    # a completed task in an active section is never dispatchable
    (done,) = [t for t in fake.tasks.values() if t.name == "mine"]
    fake.update(done.gid, completed=True)
    assert not (await tracker.fetch_issues_by_ids([done.gid]))[0].dispatchable


async def test_429_pauses_until_retry_after_and_5xx_is_one_line(fake, tracker, clock) -> None:
    fake.add_task("one")
    fake.rate_limit(12)
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert err.value.retry_at == clock.now + timedelta(seconds=12)
    assert "Asana rate limit (HTTP 429): paused until" in err.value.message
    sent = len(fake.requests)
    with pytest.raises(TrackerError, match="paused until"):
        await tracker.move_issue(fake.add_task("x").gid, "Done")
    assert len(fake.requests) == sent
    clock.advance(13)
    fake.fail_next(503, {"errors": [{"message": "Server Error", "phrase": "6 sad squid"}]})
    with pytest.raises(TrackerError) as err:
        await tracker.fetch_candidate_issues()
    assert str(err.value) == (
        f"tracker_status: HTTP 503 from Asana for /projects/{PROJECT}/tasks: Server Error"
    )


async def test_asana_api_tool_comments_on_and_moves_its_own_task_only(fake, tracker) -> None:
    own = fake.add_task("mine")
    other = fake.add_task("not mine")
    (issue,) = await tracker.fetch_issues_by_ids([own.gid])
    result = await tracker.call_agent_tool(
        issue,
        {"method": "POST", "path": f"/tasks/{own.gid}/stories", "body": {"data": {"text": "done"}}},
    )
    assert result.success and fake.tasks[own.gid].stories[0]["text"] == "done"
    result = await tracker.call_agent_tool(issue, {"method": "GET", "path": f"/tasks/{other.gid}"})
    assert result.success and json.loads(result.text)["body"]["data"]["name"] == "not mine"
    review = next(g for g, n in fake.sections.items() if n == "Review")
    move = {"method": "POST", "path": f"/sections/{review}/addTask"}
    result = await tracker.call_agent_tool(issue, {**move, "body": {"data": {"task": own.gid}}})
    assert result.success and fake.tasks[own.gid].section == "Review"
    for bad in (
        {**move, "body": {"data": {"task": other.gid}}},
        {"method": "POST", "path": f"/tasks/{other.gid}/stories", "body": {"data": {"text": "x"}}},
        {"method": "GET", "path": "/workspaces"},
        {"method": "DELETE", "path": f"/tasks/{own.gid}"},
        {"method": "PUT", "path": f"/tasks/{own.gid}/../{other.gid}", "body": {}},
    ):
        result = await tracker.call_agent_tool(issue, bad)
        assert not result.success
    assert not fake.tasks[other.gid].stories and fake.tasks[other.gid].section == "To do"


async def test_settings_are_validated_and_secret_names_declared(tmp_path) -> None:
    from symphony_tui.config.settings import resolve_settings
    from symphony_tui.config.validate import validate_dispatch
    from symphony_tui.trackers.asana import AsanaTracker

    s = resolve_settings({"tracker": {"kind": "asana"}}, workflow_dir=tmp_path, env={})
    assert s.tracker.endpoint == "https://app.asana.com/api/1.0"
    assert validate_dispatch(s) == [
        "missing_asana_api_key: no Asana token (set tracker.api_key: $VAR, or $ASANA_PAT)",
        "missing_asana_project_gid: tracker.project_gid is not set",
    ]
    raw = {"tracker": {"kind": "asana", "project_gid": PROJECT}}
    s = resolve_settings(raw, workflow_dir=tmp_path, env={"ASANA_PAT": "pat"})
    assert s.tracker.api_key == "pat" and validate_dispatch(s) == []
    raw = {"tracker": {"kind": "asana", "provider": {"api_key": "$MINE"}}}
    s = resolve_settings(raw, workflow_dir=tmp_path, env={})
    assert {"ASANA_PAT", "MINE"} <= AsanaTracker(lambda: s).secret_environment_names()
