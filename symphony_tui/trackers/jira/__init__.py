"""``tracker.kind: jira``: Jira Cloud REST v3 issues and the ``jira_rest`` tool."""

from symphony_tui.trackers.jira.tracker import JIRA_REST_TOOL, JiraTracker

__all__ = ["JIRA_REST_TOOL", "JiraTracker"]
