"""``tracker.kind: linear``: Linear's GraphQL API (spec §11) and the ``linear_graphql`` tool
(spec §10.5). Documents live in :mod:`.queries`; normalization in :mod:`.normalize`."""

from symphony_tui.trackers.linear.client import GraphQLResponse, LinearClient
from symphony_tui.trackers.linear.tool import LINEAR_GRAPHQL_TOOL, call_linear_graphql
from symphony_tui.trackers.linear.tracker import LinearTracker

__all__ = [
    "LINEAR_GRAPHQL_TOOL",
    "GraphQLResponse",
    "LinearClient",
    "LinearTracker",
    "call_linear_graphql",
]
