"""The issue a run's prompt is rendered for: the run's issue plus the tracker data the
prompt uses that a tracker lists apart from the issue (``issue.comments`` on GitHub and
Linear: trackers with :class:`CommentSource`'s method)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from symphony_tui.config.prompt_inputs import uses_issue_comments
from symphony_tui.domain import Issue, IssueComment
from symphony_tui.trackers.base import Tracker


@runtime_checkable
class CommentSource(Protocol):
    """A tracker that lists an issue's comments (GitHub, Linear); the local tracker reads
    them with the issue instead. Raises ``TrackerError`` like the tracker's other calls."""

    async def fetch_issue_comments(self, issue: Issue) -> tuple[IssueComment, ...]:
        """The issue's comments, oldest first (at most the tracker's newest few dozen)."""
        ...


async def issue_for_prompt(tracker: Tracker, issue: Issue, template: str, first_line: int) -> Issue:
    """``issue`` with its comments when ``template`` uses them and ``tracker`` lists them;
    ``issue`` itself otherwise (no request). Raises ``TrackerError`` from the tracker and
    ``WorkflowError`` for a template that does not compile."""
    if isinstance(tracker, CommentSource) and uses_issue_comments(template, first_line):
        return issue.model_copy(update={"comments": await tracker.fetch_issue_comments(issue)})
    return issue
