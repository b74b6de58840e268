"""Prompt inputs the Linear tracker provides: the assignee's display name, and an issue's
comments (read for a prompt that uses them, with a query checked against Linear's schema)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear import LinearTracker, queries
from symphony_tui_testing.fake_linear import FakeLinear


async def test_assignee_display_name_is_the_prompts_assignee(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    who = fake.add_user("mira")
    fake.add_issue("Owned", assignee_id=who)
    fake.add_issue("Nobody's")
    owned, nobody = await tracker.fetch_candidate_issues()
    assert owned.assignees == ("mira",)
    assert owned.template_view()["assignee"] == "mira"
    assert nobody.assignees == ()
    assert nobody.template_view()["assignee"] is None


async def test_comments_oldest_first_with_author(fake: FakeLinear, tracker: LinearTracker, clock):
    issue_id = fake.add_issue("Discussed")
    ana = fake.add_user("ana")
    fake.add_comment(issue_id, "Later.", user_id=ana, created_at=clock.now + timedelta(hours=1))
    fake.add_comment(issue_id, "Earlier.", created_at=clock.now)
    (issue,) = await tracker.fetch_candidate_issues()
    comments = await tracker.fetch_issue_comments(issue)
    assert [(c.author, c.body) for c in comments] == [
        ("symphony-bot", "Earlier."),
        ("ana", "Later."),
    ]
    (request,) = fake.graphql_requests("SymphonyLinearIssueComments")
    assert request.variables == {"id": issue.id, "commentLast": queries.COMMENT_PAGE_SIZE}


async def test_comments_are_the_newest_page(fake: FakeLinear, tracker: LinearTracker, clock):
    issue_id = fake.add_issue("Long thread")
    for n in range(queries.COMMENT_PAGE_SIZE + 3):
        fake.add_comment(issue_id, f"comment {n}", created_at=clock.now + timedelta(minutes=n))
    (issue,) = await tracker.fetch_candidate_issues()
    comments = await tracker.fetch_issue_comments(issue)
    assert len(comments) == queries.COMMENT_PAGE_SIZE
    assert (comments[0].body, comments[-1].body) == (
        "comment 3",
        f"comment {queries.COMMENT_PAGE_SIZE + 2}",
    )


async def test_comments_of_an_issue_linear_no_longer_has_fail(
    fake: FakeLinear, tracker: LinearTracker
) -> None:
    fake.add_issue("Soon gone")
    (issue,) = await tracker.fetch_candidate_issues()
    fake.delete_issue(issue.id)
    with pytest.raises(TrackerError):
        await tracker.fetch_issue_comments(issue)
