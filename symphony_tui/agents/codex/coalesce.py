"""How a codex session's events reach its host: stamped, and streamed deltas held back
while the scheduler is busy, so control is not starved.

:class:`EventOutlet` is the one way out of a session for its events: it stamps each with
the session id and the server's time (spec §10.4; docs/protocols.md) and hands it to
``SessionHost.emit``.

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

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from symphony_tui.agents.base import SessionHost
from symphony_tui.agents.codex.rpc import RpcConnection
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


class EventOutlet:
    """Hands one session's events to ``host`` (``SessionHost.emit``), in order.

    ``session_id`` (``<thread>-<turn>``, set by the turn tracker once a turn id is known) and
    the server's time of the notification being read (``clock``, the session's
    :class:`RpcConnection`, whose ``emitted_at`` is set while a notification is handled) are
    stamped on every event that has none. The host's flow control (``SessionHost.flow``:
    ``pace`` / ``congested`` / ``hurry``) paces the reader (:meth:`pace`, :attr:`hurry`) and
    decides when deltas are held (:meth:`stream`).
    """

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self.session_id: str | None = None
        self.clock: RpcConnection | None = None
        self._flow = host.flow
        #: The host's ``hurry``: for ``RpcConnection(hurry=...)``.
        self.hurry: Callable[[], None] = host.flow.hurry
        self._held: HeldDeltas | None = None
        self._held_timer: asyncio.TimerHandle | None = None

    def emit(self, event: AgentEvent) -> None:
        """Stamp the session id and the server's time on ``event`` and hand it to the host.

        Every event passed here was built by the session for this call and nobody else
        holds it yet, so the stamps are written into it before it is published instead of
        copying it (a copy per agent line is a large share of the scheduler's CPU under a
        flood): the event is still built once and immutable once emitted.

        Deltas held back (:meth:`stream`) are handed over first, so a session's events
        keep their order."""
        if self._held is not None:
            self.flush()
        update: dict[str, Any] = {}
        if self.session_id and event.session_id is None:
            update["session_id"] = self.session_id
        emitted = self.clock.emitted_at if self.clock is not None else None
        if event.at is None and emitted is not None:
            update["at"] = emitted  # the server's clock for what it notified
        if update:
            _stamp_unpublished(event, update)
        with contextlib.suppress(Exception):
            self._host.emit(event)

    def emit_opt(self, event: AgentEvent | None) -> None:
        """:meth:`emit`, nothing for None."""
        if event is not None:
            self.emit(event)

    def stream(
        self,
        kind: EventKind,
        text: str,
        item_id: str | None,
        reasoning: bool = False,
        summary: bool = False,
    ) -> None:
        """A streamed delta: one event at once, or held with the deltas of its item while
        the host is congested (the rules above)."""
        held = self._held
        if held is not None:
            if held.takes(kind, item_id, reasoning, summary) and held.chars + len(text) <= (
                HOLD_CHARS
            ):
                held.add(text)
                return
            self.flush()
        if len(text) < HOLD_CHARS and self._flow.congested():
            at = self.clock.emitted_at if self.clock is not None else None
            self._held = HeldDeltas(kind, item_id, reasoning, summary, text, at)
            self._held_timer = asyncio.get_running_loop().call_later(HOLD_S, self.flush)
            return
        self.emit(delta_event(kind, text, item_id, reasoning, summary))

    def flush(self) -> None:
        """Hand the held deltas over as one event (nothing when none are held)."""
        held, self._held = self._held, None
        if self._held_timer is not None:
            self._held_timer.cancel()
            self._held_timer = None
        if held is not None:
            self.emit(held.event())

    async def pace(self) -> None:
        """Between batches of lines (``RpcConnection`` ``pace``): held deltas go once the
        host is no longer congested, then the host's own pacing (``FlowControl.pace``)."""
        if self._held is not None and not self._flow.congested():
            self.flush()
        await self._flow.pace()


def _stamp_unpublished(event: AgentEvent, update: dict[str, Any]) -> None:
    """Set fields of a frozen event that no one else references yet (see ``emit``)."""
    event.__dict__.update(update)
    event.__pydantic_fields_set__.update(update)
