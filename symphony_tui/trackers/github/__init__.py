"""``tracker.kind: github``: GitHub issues, optionally a Projects (v2) board as the state, and
the ``github_api`` tool. REST in :mod:`.client`, GraphQL documents in :mod:`.queries`."""

from symphony_tui.trackers.github.client import GitHubClient, RestResponse
from symphony_tui.trackers.github.tool import GITHUB_API_TOOL, call_github_api
from symphony_tui.trackers.github.tracker import GitHubTracker

__all__ = ["GITHUB_API_TOOL", "GitHubClient", "GitHubTracker", "RestResponse", "call_github_api"]
