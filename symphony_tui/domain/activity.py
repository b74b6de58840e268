"""What a worker is doing now, and what it did recently: one definition for the console's
worker row, its worker detail screen and the HTTP API's ``/api/v1/<identifier>``.

*Last activity* is a running row's ``last_event`` (the kind of its newest event that is not
accounting: token usage and rate limits are not activity), ``last_event_at`` and
``last_message``: the newest agent text, at most ``LAST_MESSAGE_CHARS`` characters ending
at the newest character (streamed deltas roll through that window, a completed item
replaces it). Every surface that cuts it keeps its **end**, the newest words
(:func:`symphony_tui.text.one_line_tail`), never its head, which trails the agent by
the time it takes to stream the window.

*Recent events* are the newest :data:`RECENT_EVENTS` events of an issue that are not
streamed fragments (``message_delta``, ``command_output``: the completed item carries
their text), newest first (:func:`recent_events`).
"""

from __future__ import annotations

from collections.abc import Iterable

from symphony_tui.domain.events import AgentEvent
from symphony_tui.domain.kinds import EventKind

RECENT_EVENTS = 50

#: Pieces of an item still streaming; the completed item carries their text.
STREAMED_KINDS = frozenset({EventKind.MESSAGE_DELTA, EventKind.COMMAND_OUTPUT})


def recent_events(events: Iterable[AgentEvent], limit: int = RECENT_EVENTS) -> list[AgentEvent]:
    """The newest ``limit`` events of ``events`` (given oldest first, in ``seq`` order) that
    are not streamed fragments, newest first."""
    kept = [e for e in events if e.kind not in STREAMED_KINDS]
    return kept[: -limit - 1 : -1] if limit > 0 else []
