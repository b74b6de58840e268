"""GitHubPulls against FakeGitHub (every request and answer checked against GitHub's
contracts): an issue's pull request found by the run's branch and by a closing reference,
its checks, reviews and mergeability; a job's log read without the token; a merge refused
when the head moved."""

from __future__ import annotations

import pytest

from symphony_tui.trackers.github import GitHubTracker, client
from symphony_tui.trackers.github.pulls import ALL_DOCUMENTS
from symphony_tui_testing.github_contracts import validate_graphql

from .conftest import TOKEN


@pytest.fixture(autouse=True)
def _no_write_pacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "WRITE_INTERVAL_S", 0.0)


def test_every_pull_request_document_is_valid_against_the_schema(fake) -> None:
    assert [validate_graphql(d) for d in ALL_DOCUMENTS] == [[] for _ in ALL_DOCUMENTS]


async def test_links_by_branch_and_by_closing_reference(fake, settings, clock) -> None:
    tracker = GitHubTracker(settings, clock=clock)
    by_branch, by_keyword, none = fake.add_issues(3)
    fake.update(by_keyword, labels=["Symphony:Retry"])
    pr_branch = fake.add_pull("symphony/GH-1")
    pr_keyword = fake.add_pull("feature-x", closes=[by_keyword])
    fake.set_checks(
        pr_keyword,
        {"name": "test", "conclusion": "FAILURE", "job_id": 77, "workflow": "CI", "log": "x"},
        {"name": "lint", "conclusion": "SUCCESS", "job_id": 78, "workflow": "CI"},
        {"name": "ci/legacy", "conclusion": None},
    )
    fake.review(pr_keyword, "CHANGES_REQUESTED", "Please split this function.")
    fake.comment_on_line(pr_keyword, "src/app.py", 12, "Off by one here.")
    fake.set_pull(pr_keyword, mergeable="CONFLICTING")
    try:
        got = await tracker.pulls.read({by_branch: "symphony/GH-1", by_keyword: None, none: None})
    finally:
        await tracker.aclose()
    assert got[by_branch].pull_request is not None
    assert got[by_branch].pull_request.number == pr_branch
    assert got[by_branch].pull_request.found_by == "branch"
    assert got[none].pull_request is None
    link = got[by_keyword].pull_request
    assert link is not None and link.number == pr_keyword
    assert got[by_keyword].labels == ("Symphony:Retry",)
    assert link.found_by == "closing_reference"
    assert [c.label for c in link.failed_checks] == ["CI / test"]
    assert link.failed_checks[0].job_id == 77
    assert link.checks_summary == "1 passed, 1 failed, 1 pending"
    assert link.review_decision == "CHANGES_REQUESTED"
    assert link.mergeable == "CONFLICTING"
    assert [n.render() for n in link.review_notes] == [
        "src/app.py:12 (reviewer): Off by one here.",
        "review (reviewer): Please split this function.",
    ]
    assert link.summary() == (
        f"#{pr_keyword} open · checks 1 passed, 1 failed, 1 pending · changes requested · conflicts"
    )


async def test_job_log_is_read_from_the_signed_url_without_the_token(fake, settings, clock) -> None:
    tracker = GitHubTracker(settings, clock=clock)
    fake.add_issue("one")
    pr = fake.add_pull("b")
    fake.set_checks(pr, {"name": "t", "conclusion": "FAILURE", "job_id": 5, "log": "a\nb\n"})
    try:
        assert await tracker.pulls.job_log_tail(5) == "a\nb\n"
    finally:
        await tracker.aclose()
    blob = [r for r in fake.requests if "/_blobs/" in r.path]
    assert blob == []  # downloads are not GitHub API requests: not recorded as such
    assert TOKEN not in str([v for v in fake.violations])


async def test_merge_refused_when_the_head_moved_then_merged_on_the_head(
    fake, settings, clock
) -> None:
    tracker = GitHubTracker(settings, clock=clock)
    issue = fake.add_issue("one")
    pr = fake.add_pull("b", closes=[issue])
    fake.set_checks(pr, {"name": "test", "conclusion": "SUCCESS", "job_id": 9})
    fake.review(pr, "APPROVED")
    try:
        check = await tracker.pulls.required_checks(pr)
        assert check.ready, check.why
        fake.push(pr)  # someone pushed after the checks passed
        merged, why = await tracker.pulls.merge(pr, check.head, "squash")
        assert not merged and "head moved" in why
        assert fake.pull(pr).state == "OPEN"
        again = await tracker.pulls.required_checks(pr)
        assert not again.ready  # no check has run on the new head yet
        fake.set_checks(pr, {"name": "test", "conclusion": "SUCCESS", "job_id": 10})
        again = await tracker.pulls.required_checks(pr)
        assert again.ready
        assert await tracker.pulls.merge(pr, again.head, "squash") == (
            True,
            "Pull Request successfully merged",
        )
    finally:
        await tracker.aclose()
    assert fake.pull(pr).merged_sha == again.head
    assert fake.issue(issue).state == "closed"
    merges = fake.rest_requests("PUT", f"/pulls/{pr}/merge")
    assert [r.body["sha"] for r in merges] == [check.head, again.head]
