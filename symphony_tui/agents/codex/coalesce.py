"""Streamed deltas held back while the scheduler is busy, so control is not starved.

A flooding agent writes thousands of ``item/agentMessage/delta`` lines a second. Were each
one its own :class:`~symphony_tui.domain.AgentEvent`, posted to the scheduler's inbox, the
reader would wait for room there under a flood: whatever the agent wrote next, an approval
request or a question included, would wait behind it in the pipe.

Instead, while the host says it is congested (``SessionHost.congested()``; the scheduler's
says so when its inbox's main lane is long), the session keeps reading and joins
consecutive deltas of the same item, kind and flags into one :class:`HeldDeltas` (its text
parts in order). The held text becomes **one** event, the parts joined whole and in order,
when any of these comes first:

* the session emits anything else (an item event, the turn's end, a warning...) or is
  asked something by the server (approval, question, tool call): the held text is handed
  over first, so the order of a session's events never changes;
* a delta of another item, kind or flags arrives;
* the held text reaches :data:`HOLD_CHARS` (below the transcript's per-item limit, so a
  held piece is never cut there);
* the reader reaches a batch boundary while the host is no longer congested;
* :data:`HOLD_S` passed since the first held delta (an agent that went quiet);
* the session reaches the end of its output or is closed.

While the host is not congested nothing is held: every delta is one event.
"""

from __future__ import annotations

from datetime import datetime

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import ItemNote

#: Characters of held text that are handed over at once (the scheduler's transcript keeps
#: items up to 16,384 characters: a held piece always fits one).
HOLD_CHARS = 8_192
#: Seconds held text waits at most for more of its item.
HOLD_S = 0.05


class HeldDeltas:
    """Consecutive deltas of one item: ``kind`` (``MESSAGE_DELTA`` / ``COMMAND_OUTPUT``),
    ``item_id``, the reasoning flags of :class:`ItemNote`, the text ``parts`` in arrival
    order (``chars`` in all) and ``at``, the server's time of the first one (None when it
    gave none)."""

    __slots__ = ("at", "chars", "item_id", "kind", "parts", "reasoning", "summary")

    def __init__(
        self,
        kind: EventKind,
        item_id: str | None,
        reasoning: bool,
        summary: bool,
        text: str,
        at: datetime | None,
    ) -> None:
        self.kind = kind
        self.item_id = item_id
        self.reasoning = reasoning
        self.summary = summary
        self.parts = [text]
        self.chars = len(text)
        self.at = at

    def takes(self, kind: EventKind, item_id: str | None, reasoning: bool, summary: bool) -> bool:
        """True when a delta of that kind, item and flags continues this one."""
        return (
            kind is self.kind
            and item_id == self.item_id
            and reasoning is self.reasoning
            and summary is self.summary
        )

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.chars += len(text)

    def event(self) -> AgentEvent:
        """The one event the held deltas become: their text joined, in order."""
        return delta_event(
            self.kind, "".join(self.parts), self.item_id, self.reasoning, self.summary, self.at
        )


def delta_event(
    kind: EventKind,
    text: str,
    item_id: str | None,
    reasoning: bool = False,
    summary: bool = False,
    at: datetime | None = None,
) -> AgentEvent:
    """A streamed fragment's event (``MESSAGE_DELTA`` or ``COMMAND_OUTPUT``; ``reasoning``:
    a delta of the model's reasoning, ``summary`` of its summary), held or not."""
    payload = (
        ItemNote(item_id=item_id, reasoning=True, summary=summary)
        if reasoning
        else ItemNote(item_id=item_id)
    )
    return AgentEvent(kind=kind, message=text, at=at, payload=payload)
