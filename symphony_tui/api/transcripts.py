"""Each issue's transcript across its scheduler's restarts, for a front end that follows
one scheduler from process to process, one :class:`~symphony_tui.api.client.RemotePort`
each (an attached console's :mod:`~symphony_tui.api.follow`, each project of the fleet).

A restarted scheduler's transcripts start empty (its history file refills only its event
ring), so what the processes before held of an issue is kept here when their port is left
(the newest :data:`~symphony_tui.api.client.TRANSCRIPT` of it) and read before the current
port's. The current port's events are numbered after the highest ``seq`` the ports before
handed out (a new process's own numbers may start at 1 again), so a reader's position
(``seq``) carries on across a restart and nothing is read twice.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from symphony_tui.api.client import TRANSCRIPT

if TYPE_CHECKING:
    from symphony_tui.api.client import RemotePort
    from symphony_tui.domain import AgentEvent


class KeptTranscripts:
    """The transcripts of one scheduler's earlier processes (module doc)."""

    def __init__(self) -> None:
        #: Issue id -> its transcript as the processes before held it, numbered as handed.
        self._earlier: dict[str, deque[AgentEvent]] = {}
        #: Added to the current port's event numbers: the highest handed out before it.
        self.offset = 0

    def leave(self, port: RemotePort) -> None:
        """``port``'s process is left for another one: keep what it held of each issue,
        numbered as it was handed; the next port's numbers go on after its highest."""
        for issue_id, events in port.transcripts().items():
            earlier = self._earlier.setdefault(issue_id, deque(maxlen=TRANSCRIPT))
            earlier.extend(numbered(events, self.offset))
        self.offset += port.seen_seq()

    def since(
        self, port: RemotePort | None, issue_id: str, seq: int, *, limit: int = 2000
    ) -> list[AgentEvent]:
        """``issue_id``'s events numbered above ``seq``, the newest ``limit``, oldest
        first: the earlier processes', then the current ``port``'s (None: none now)."""
        offset = self.offset
        events: list[AgentEvent] = []
        if port is not None:
            current = port.events_since(max(0, seq - offset), limit=limit, issue_id=issue_id)
            events = numbered(current, offset)
        earlier = self._earlier.get(issue_id)
        if earlier and seq < offset:  # numbered up to the offset: some may be newer than seq
            events = [e for e in earlier if e.seq > seq] + events
        return events[-limit:]


def numbered(events: list[AgentEvent], offset: int) -> list[AgentEvent]:
    """``events`` with ``offset`` added to each ``seq`` (copies; as given when 0)."""
    if not offset:
        return events
    return [e.model_copy(update={"seq": e.seq + offset}) for e in events]
