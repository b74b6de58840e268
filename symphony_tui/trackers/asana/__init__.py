"""``tracker.kind: asana``: an Asana project's tasks, its sections as states, and the
``asana_api`` tool."""

from symphony_tui.trackers.asana.tracker import ASANA_API_TOOL, AsanaTracker

__all__ = ["ASANA_API_TOOL", "AsanaTracker"]
