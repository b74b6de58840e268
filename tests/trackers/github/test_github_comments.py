"""Prompt inputs the GitHub tracker provides: the repository, assignees, and an issue's
comments (listed apart from the issue, read for a prompt that uses them)."""

from __future__ import annotations

from symphony_tui.trackers.github import tracker as github_tracker

from .conftest import REPO


async def test_issues_carry_their_repository_and_assignees(fake, tracker) -> None:
    fake.add_issue("With people", assignees=["octo", "cat"])
    (issue,) = await tracker.fetch_candidate_issues()
    assert issue.repository == REPO
    view = issue.template_view()
    assert (view["repository"], view["assignee"], view["assignees"]) == (
        REPO,
        "octo",
        ["octo", "cat"],
    )


async def test_comments_oldest_first_with_author_login(fake, tracker, clock) -> None:
    number = fake.add_issue("Discussed")
    fake.add_comment(number, "First thought.", user="ana")
    clock.advance(60)
    fake.add_comment(number, "Second thought.")
    (issue,) = await tracker.fetch_candidate_issues()
    comments = await tracker.fetch_issue_comments(issue)
    assert [(c.author, c.body) for c in comments] == [
        ("ana", "First thought."),
        (fake.viewer_login, "Second thought."),
    ]
    assert comments[0].url.endswith(f"/issues/{number}#issuecomment-{comments[0].id}")
    assert comments[0].created_at < comments[1].created_at


async def test_comments_keep_the_newest_when_there_are_many(fake, tracker, monkeypatch) -> None:
    monkeypatch.setattr(github_tracker, "COMMENT_LIMIT", 2)
    number = fake.add_issue("Long thread")
    for n in range(5):
        fake.add_comment(number, f"comment {n}")
    (issue,) = await tracker.fetch_candidate_issues()
    comments = await tracker.fetch_issue_comments(issue)
    assert [c.body for c in comments] == ["comment 3", "comment 4"]
