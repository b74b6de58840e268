"""A prompt that uses ``issue.comments`` gets them from a tracker that lists them apart
from the issue (GitHub, Linear); a prompt that does not costs no such request."""

from __future__ import annotations

from datetime import UTC, datetime

from symphony_tui.domain import Issue, IssueComment
from symphony_tui.trackers.base import TrackerError
from tests.helpers import until

from .conftest import make_issue

COMMENTS_PROMPT = (
    "Work on {{ issue.identifier }}"
    "{% for c in issue.comments %} | {{ c.author }}: {{ c.body }}{% endfor %}"
)


def _lister(h, calls: list[str], fail: bool = False):
    async def fetch_issue_comments(issue: Issue) -> tuple[IssueComment, ...]:
        calls.append(issue.id)
        if fail:
            raise TrackerError("rate_limited", "comments later")
        return (
            IssueComment(
                id="c1",
                author="ana",
                body="Keep the flag.",
                created_at=datetime(2026, 1, 2, tzinfo=UTC),
            ),
        )

    h.tracker.fetch_issue_comments = fetch_issue_comments


async def test_prompt_using_comments_gets_them_from_the_tracker(make_harness):
    h = make_harness([make_issue(1)], prompt=COMMENTS_PROMPT)
    calls: list[str] = []
    _lister(h, calls)
    await h.start()
    await h.settle()
    # the session's first turn may start after the loop settled (a loaded machine)
    await until(lambda: bool(h.backend.sessions) and bool(h.backend.sessions[0].prompts))
    assert calls == ["id-1"]
    assert h.backend.sessions[0].prompts[0] == "Work on ABC-1 | ana: Keep the flag."


async def test_prompt_without_comments_asks_no_comments(make_harness):
    h = make_harness([make_issue(1)])
    calls: list[str] = []
    _lister(h, calls)
    await h.start()
    await h.settle()
    assert calls == []
    assert h.backend.sessions[0].prompts[0] == "Work on ABC-1"


async def test_comments_that_cannot_be_read_fail_the_attempt_not_the_prompt(make_harness):
    h = make_harness([make_issue(1)], prompt=COMMENTS_PROMPT)
    calls: list[str] = []
    _lister(h, calls, fail=True)
    await h.start()
    await h.settle()
    assert calls == ["id-1"]
    assert h.backend.sessions == []  # no agent ran on a prompt missing its comments
    error = h.orch.retrying["id-1"].entry.error
    assert error.startswith("issue comments for the prompt: rate_limited")


def test_github_and_linear_list_comments_the_local_tracker_reads_them_with_the_issue() -> None:
    from symphony_tui.scheduler.prompt_inputs import CommentSource
    from symphony_tui.trackers.github import GitHubTracker
    from symphony_tui.trackers.linear import LinearTracker
    from symphony_tui.trackers.local import LocalTracker

    assert issubclass(GitHubTracker, CommentSource)
    assert issubclass(LinearTracker, CommentSource)
    assert not issubclass(LocalTracker, CommentSource)
