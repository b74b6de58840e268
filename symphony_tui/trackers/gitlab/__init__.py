"""``tracker.kind: gitlab``: GitLab REST v4 project issues and the ``gitlab_api`` tool."""

from symphony_tui.trackers.gitlab.tracker import GITLAB_API_TOOL, GitLabTracker

__all__ = ["GITLAB_API_TOOL", "GitLabTracker"]
