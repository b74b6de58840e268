"""The issue a run's prompt is rendered for: the run's issue plus the tracker data the
prompt uses that a tracker lists apart from the issue (``issue.comments`` on GitHub and
Linear, :class:`~symphony_tui.trackers.base.CommentSource`)."""

from __future__ import annotations

from symphony_tui.config.prompt_inputs import uses_issue_comments
from symphony_tui.domain import Issue
from symphony_tui.trackers.base import CommentSource, Tracker


async def issue_for_prompt(tracker: Tracker, issue: Issue, template: str, first_line: int) -> Issue:
    """``issue`` with its comments when ``template`` uses them and ``tracker`` lists them;
    ``issue`` itself otherwise (no request). Raises ``TrackerError`` from the tracker and
    ``WorkflowError`` for a template that does not compile."""
    if isinstance(tracker, CommentSource) and uses_issue_comments(template, first_line):
        return issue.model_copy(update={"comments": await tracker.fetch_issue_comments(issue)})
    return issue
