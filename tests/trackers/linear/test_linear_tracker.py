"""LinearTracker against FakeLinear (real HTTP, real schema execution): spec §11.1-11.3."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from symphony_tui.trackers.base import Tracker, TrackerError
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui_testing.fake_linear import FakeLinear
from tests.helpers import SettingsBox

from .conftest import API_KEY


def test_implements_tracker_protocol(tracker: LinearTracker) -> None:
    assert isinstance(tracker, Tracker)
    assert tracker.kind == "linear"


async def test_candidates_paginate_120_over_three_pages_in_order(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    todo = fake.add_issues(70, state="Todo")
    in_progress = fake.add_issues(50, state="In Progress")
    fake.add_issues(10, state="Done")
    fake.add_issues(5, state="Backlog")
    fake.add_issue("Other project", state="Todo", project_slug="another-0a1b")

    issues = await tracker.fetch_candidate_issues()

    expected = [fake.issue(i)["identifier"] for i in todo + in_progress]
    assert [i.identifier for i in issues] == expected  # Linear's order, kept across pages
    assert {i.state for i in issues} == {"Todo", "In Progress"}
    pages = fake.graphql_requests("SymphonyLinearIssuesByStates")
    assert len(pages) == 3
    assert [p.variables["first"] for p in pages] == [50, 50, 50]
    assert pages[0].variables["after"] is None
    assert pages[1].variables["after"] == issues[49].id
    assert pages[2].variables["after"] == issues[99].id
    assert all(p.variables["projectSlug"] == fake.project_slug for p in pages)
    assert all(p.variables["stateNames"] == ["Todo", "In Progress"] for p in pages)


async def test_auth_header_is_the_raw_key(fake: FakeLinear, tracker: LinearTracker) -> None:
    await tracker.fetch_candidate_issues()
    assert fake.requests[0].headers["authorization"] == API_KEY


async def test_wrong_key_is_a_status_error_without_the_key(
    fake: FakeLinear, settings: SettingsBox, tracker: LinearTracker
) -> None:
    settings.update(api_key="lin_api_WRONG_0000")
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "linear_api_status"
    assert "401" in str(info.value)
    assert "lin_api_WRONG_0000" not in str(info.value)
    assert info.value.credentials_refused  # the scheduler backs off instead of replaying it


async def test_refresh_60_ids_in_pages_of_50_typed_id(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    ids = fake.add_issues(60, state="In Progress")
    fake.move_issue(ids[3], "Done")
    fake.move_issue(ids[55], "In Review")
    fake.delete_issue(ids[10])
    wanted = [*reversed(ids), ids[0]]  # order and duplicates from the caller

    issues = await tracker.fetch_issues_by_ids(wanted)

    expected_ids = [i for i in reversed(ids) if i != ids[10]]
    assert [i.id for i in issues] == expected_ids  # caller's order, deleted one absent
    states = {i.id: i.state for i in issues}
    assert states[ids[3]] == "Done" and states[ids[55]] == "In Review"
    reqs = fake.graphql_requests("SymphonyLinearIssuesByIds")
    assert [len(r.variables["ids"]) for r in reqs] == [50, 10]
    assert all("$ids: [ID!]!" in r.query for r in reqs)
    assert all(r.status == 200 for r in reqs)


async def test_refresh_of_no_ids_sends_nothing(fake: FakeLinear, tracker: LinearTracker) -> None:
    assert await tracker.fetch_issues_by_ids([]) == []
    assert fake.requests == []


async def test_issues_by_states_empty_list_sends_nothing(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    assert await tracker.fetch_issues_by_states([]) == []
    assert fake.requests == []


async def test_issues_by_terminal_states(fake: FakeLinear, tracker: LinearTracker) -> None:
    fake.add_issues(3, state="Todo")
    done = fake.add_issues(2, state="Done")
    canceled = fake.add_issue("dropped", state="Canceled")
    issues = await tracker.fetch_issues_by_states(["Done", "Canceled", "Closed"])
    assert [i.id for i in issues] == [*done, canceled]
    assert fake.requests[0].variables["stateNames"] == ["Done", "Canceled", "Closed"]


async def test_normalization_from_linear_payload(fake: FakeLinear, tracker: LinearTracker) -> None:
    blocked = fake.add_issue(
        "Blocked one",
        priority=2,
        labels=["Backend", "NEEDS-Review"],
        description="Body",
        created_at=datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC),
    )
    blocker = fake.add_issue("Blocker", state="In Progress")
    related = fake.add_issue("Related", state="Backlog")
    duplicate = fake.add_issue("Dup", state="Done")
    fake.add_relation(blocker, blocked, "blocks")
    fake.add_relation(related, blocked, "related")
    fake.add_relation(duplicate, blocked, "duplicate")
    fake.add_relation(blocked, related, "blocks")  # blocked blocks related: not a blocker of it

    issues = {i.id: i for i in await tracker.fetch_candidate_issues()}
    issue = issues[blocked]

    assert issue.labels == ("backend", "needs-review")
    assert issue.priority == 2 and isinstance(issue.priority, int)
    assert issue.description == "Body"
    assert issue.created_at == datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert issue.updated_at is not None and issue.updated_at.tzinfo is not None
    assert issue.url == fake.issue(blocked)["url"] and issue.url.startswith("https://")
    assert issue.branch_name == fake.issue(blocked)["branchName"]
    assert [(b.id, b.identifier, b.state) for b in issue.blocked_by] == [
        (blocker, fake.issue(blocker)["identifier"], "In Progress")
    ]
    assert issues[blocker].blocked_by == ()


async def test_candidates_need_project_slug(settings: SettingsBox, tracker: LinearTracker) -> None:
    settings.update(project_slug=None)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "missing_tracker_project_slug"


@pytest.mark.parametrize("key", [None, ""])
async def test_missing_or_empty_key(
    fake: FakeLinear, settings: SettingsBox, tracker: LinearTracker, key: str | None
) -> None:
    settings.update(api_key=key)
    with pytest.raises(TrackerError) as info:
        await tracker.fetch_candidate_issues()
    assert info.value.category == "missing_tracker_api_key"
    assert fake.requests == []


async def test_settings_are_reread_on_every_call(
    fake: FakeLinear, settings: SettingsBox, tracker: LinearTracker
) -> None:
    fake.add_issues(2, state="Todo")
    review = fake.add_issue("In review", state="In Review")
    assert len(await tracker.fetch_candidate_issues()) == 2
    settings.update(active_states=("In Review",))
    assert [i.id for i in await tracker.fetch_candidate_issues()] == [review]


async def test_assignee_me_decides_dispatchable(
    fake: FakeLinear, settings: SettingsBox, tracker: LinearTracker
) -> None:
    mine = fake.add_issue("Mine", assignee_id=fake.viewer_id)
    other = fake.add_issue("Theirs", assignee_id=fake.add_user("someone"))
    nobody = fake.add_issue("Nobody's")
    settings.update(assignee="me")
    listed = await tracker.fetch_candidate_issues()
    # Candidates list every active issue in scope; the adapter's routing is dispatchable.
    assert {i.id for i in listed} == {mine, other, nobody}
    assert [i.id for i in listed if i.dispatchable] == [mine]
    assert [i.id for i in await tracker.fetch_candidate_issues() if i.dispatchable] == [mine]
    assert len(fake.graphql_requests("SymphonyLinearViewer")) == 1  # cached
    by_id = {i.id: i for i in listed}
    assert by_id[mine].assignee_id == fake.viewer_id and by_id[nobody].assignee_id is None
    # A refresh is a full snapshot: a reassigned running issue comes back, unroutable.
    (refreshed,) = await tracker.fetch_issues_by_ids([other])
    assert refreshed.id == other and refreshed.dispatchable is False


async def test_move_issue_by_state_name(fake: FakeLinear, tracker: LinearTracker) -> None:
    issue_id = fake.add_issue("Move me", state="Todo")
    moved = await tracker.move_issue(issue_id, "  in review ")
    assert moved.state == "In Review"
    assert fake.issue(issue_id)["state"] == "In Review"
    update = fake.graphql_requests("SymphonyLinearMoveIssue")[0]
    assert update.variables["stateId"] != "In Review"  # an id, looked up from the team


async def test_move_issue_to_unknown_state(fake: FakeLinear, tracker: LinearTracker) -> None:
    issue_id = fake.add_issue("Stay", state="Todo")
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue(issue_id, "Shipped")
    assert info.value.category == "linear_unknown_state"
    assert "Shipped" in info.value.message and "In Progress" in info.value.message
    assert fake.issue(issue_id)["state"] == "Todo"
    assert fake.graphql_requests("SymphonyLinearMoveIssue") == []


async def test_move_unknown_issue_is_a_graphql_error(tracker: LinearTracker) -> None:
    with pytest.raises(TrackerError) as info:
        await tracker.move_issue("no-such-issue", "Done")
    assert info.value.category == "linear_graphql_errors"
    assert "Entity not found" in info.value.message
