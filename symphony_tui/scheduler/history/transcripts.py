"""Per-issue transcripts of the event history, bounded by bytes (memory bounded by bytes, not
event counts; streamed fragments coalesced, not one object per delta).

A transcript holds an issue's events oldest first for worker detail and the API's
``recent_events`` (``EventHistory.since(..., issue_id=)``). Two things keep it small:

* **Coalesced fragments.** Consecutive streamed fragments (``MESSAGE_DELTA``,
  ``COMMAND_OUTPUT``) of the same item and session are one *live item*: the text of each is
  appended to a list of parts, no event object is built per fragment. The live item becomes
  one :class:`AgentEvent` (its parts joined, masked once, capped at ``max_chars``) when
  anything else joins the transcript, when it reaches ``max_chars``, or when a reader is
  handed it: a reader never sees an item grow after it read it, so paging by ``seq`` stays
  exact. The event carries the ``seq`` of its newest fragment and the ``at`` of its first.
* **A byte budget.** Every entry is costed by what it holds (:func:`event_cost`: its text
  plus a measured per-object overhead; a compressed entry its compressed size; a live item
  ``LiveItem.cost``), each transcript ``TRANSCRIPT_OVERHEAD`` (:meth:`Transcripts.held`);
  past ``budget_bytes`` over all transcripts the oldest entries are dropped first,
  whichever issue they belong to, so memory stays flat however many issues run
  (sub-linear in workers). ``max_entries`` still caps one transcript. What is dropped
  is counted (``dropped_events``, ``dropped_bytes``; per issue in :meth:`dropped_of`).

Kept events are held as :data:`Kept` entries, ``(seq, wire JSON bytes, cost)`` tuples
(:func:`pack`), not as model objects: a tuple of an int and bytes is not tracked by the
garbage collector, so however full the history is, a full collection does not traverse it
(no full GC pause over 50 ms; one ``AgentEvent`` with its payload is six tracked
objects). Readers get events decoded again (:func:`unpack`, the event's own JSON form,
``docs/architecture.md``), which round-trips exactly.

The budget counts what an entry really holds (memory bounded by bytes). An
event whose JSON is longer than ``COMPRESS_OVER`` bytes (a completed agent message, a
command's output) is kept zlib-compressed (level 1; RFC 1950), and costs its compressed
size plus ``ENTRY_OVERHEAD``: agent prose and code shrink 2-3 times (this project's own
source and docs, 12,000-character pieces: 2.7x and 2.1x), so the same bytes keep two to
three times the text; compressing a 12,000-character message takes 0.2-0.5 ms and a
reader pays one ``zlib.decompress`` per entry (0.07-0.15 ms; 2-core machine under load). A live item's fragments are joined every ``JOIN_PARTS`` parts, so it
holds a few strings, not one object per delta (a 45-character delta as its own ``str``
and list slot takes 2.3 times its text).
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime

from pydantic import BaseModel

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import Payload

#: Bytes an event costs beyond its text: its JSON's field names, ids, time and payload
#: fields, the bytes object, the entry tuple and the deque slot (CPython 3.11,
#: ``tracemalloc`` over 10,000 kept events with an ``ItemNote``: 490 bytes each).
ENTRY_OVERHEAD = 500

#: Wire JSON longer than this (bytes) is kept compressed (see the module docstring).
COMPRESS_OVER = 1024

#: Fragments a live item holds apart before they are joined into one string.
JOIN_PARTS = 16

#: Bytes a fragment held apart costs beyond its text: its ``str`` header and list slot.
PART_OVERHEAD = 57

#: Bytes a live item costs beyond its text: the item, its list of parts, the payload of
#: its first fragment and its slots in the transcript and the age order (``tracemalloc``
#: over 200 live items: 1,650 bytes each with their transcript).
LIVE_OVERHEAD = 800

#: Bytes an issue's transcript costs empty: the object and its deque's first block.
TRANSCRIPT_OVERHEAD = 1024

#: A kept event: ``(seq, the event's wire JSON, plain or zlib-compressed, its cost in
#: bytes)``; untracked by the GC. Plain JSON starts with ``{``, a zlib stream never does.
Kept = tuple[int, bytes, int]


def wire_json(event: AgentEvent) -> bytes:
    """``event``'s wire JSON (``AgentEvent.model_dump_json`` as UTF-8 bytes)."""
    return event.__pydantic_serializer__.to_json(event)


def pack(event: AgentEvent, data: bytes | None = None) -> Kept:
    """``event`` as a kept entry; ``data`` is its :func:`wire_json` when the caller has it.
    Over ``COMPRESS_OVER`` bytes the JSON is compressed and the entry costs
    ``ENTRY_OVERHEAD`` plus the compressed size, else :func:`event_cost`."""
    if data is None:
        data = wire_json(event)
    if len(data) > COMPRESS_OVER:
        blob = zlib.compress(data, 1)
        return (event.seq, blob, ENTRY_OVERHEAD + len(blob))
    return (event.seq, data, event_cost(event))


def entry_json(entry: Kept) -> bytes:
    """The wire JSON a kept entry holds (decompressed if it was compressed)."""
    data = entry[1]
    return data if data[:1] == b"{" else zlib.decompress(data)


def unpack(entry: Kept) -> AgentEvent:
    """The event a kept entry holds (equal to the one packed)."""
    return AgentEvent.model_validate_json(entry_json(entry))


def payload_texts(model: BaseModel) -> Iterator[str]:
    """Every string field of ``model`` and of the models in its tuple fields."""
    for value in model.__dict__.values():
        if isinstance(value, str):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, BaseModel):
                    yield from payload_texts(item)


def event_cost(event: AgentEvent) -> int:
    """Approximate bytes ``event`` holds: message and payload text plus ENTRY_OVERHEAD."""
    cost = ENTRY_OVERHEAD + len(event.message)
    if event.payload is not None:
        cost += sum(len(t) for t in payload_texts(event.payload))
    return cost


class LiveItem:
    """The fragments of one item still arriving (see the module docstring)."""

    __slots__ = ("at", "chars", "issue_identifier", "kind", "parts", "payload", "seq", "session")

    def __init__(
        self,
        kind: EventKind,
        text: str,
        seq: int,
        *,
        issue_identifier: str | None,
        session: str | None,
        at: datetime | None,
        payload: Payload | None,
    ) -> None:
        self.kind = kind
        self.parts = [text]
        self.chars = len(text)
        self.seq = seq
        self.issue_identifier = issue_identifier
        self.session = session
        self.at = at
        self.payload = payload

    def cost(self) -> int:
        """Bytes the item holds: ``LIVE_OVERHEAD``, its text and ``PART_OVERHEAD`` for
        each part beyond the first (not joined yet)."""
        return LIVE_OVERHEAD + self.chars + PART_OVERHEAD * (len(self.parts) - 1)

    def same_item(self, kind: EventKind, session: str | None, payload: Payload | None) -> bool:
        return (
            kind is self.kind
            and session == self.session
            and (payload is self.payload or _same_fields(payload, self.payload))
        )


def _same_fields(a: Payload | None, b: Payload | None) -> bool:
    """Field-wise equality of two payloads (cheaper than pydantic's ``==``; fragments'
    payloads are flat)."""
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and a.__dict__ == b.__dict__


class Transcript:
    """One issue's entries, oldest first (kept events, and at most one live item, last)."""

    __slots__ = ("bytes", "dead", "dropped_bytes", "dropped_events", "entries", "live", "skip")

    def __init__(self) -> None:
        self.entries: deque[Kept | LiveItem] = deque()
        self.live: LiveItem | None = None
        self.bytes = 0
        self.skip = 0  # references in the book's age order to entries already dropped here
        self.dead = False
        self.dropped_events = 0
        self.dropped_bytes = 0


class Transcripts:
    """Every issue's transcript, bounded by ``budget_bytes`` in all and ``max_entries`` each.

    ``seal`` turns a live item into its event (``EventHistory`` masks the joined text there,
    the one door every event passes)."""

    def __init__(
        self,
        *,
        max_entries: int,
        budget_bytes: int,
        max_chars: int,
        seal: Callable[[str, LiveItem], AgentEvent],
    ) -> None:
        self._by_issue: dict[str, Transcript] = {}
        self._age: deque[Transcript] = deque()  # one reference per entry, oldest first
        self._max_entries = max_entries
        self.budget_bytes = budget_bytes
        self._max_chars = max_chars
        self._seal = seal
        self.bytes = 0
        self.dropped_events = 0
        self.dropped_bytes = 0

    def held(self) -> int:
        """Bytes counted against the budget: the entries' (:attr:`bytes`) and
        ``TRANSCRIPT_OVERHEAD`` for each issue's transcript."""
        return self.bytes + TRANSCRIPT_OVERHEAD * len(self._by_issue)

    def _of(self, issue_id: str) -> Transcript:
        t = self._by_issue.get(issue_id)
        if t is None:
            t = self._by_issue[issue_id] = Transcript()
        return t

    def add(self, issue_id: str, event: AgentEvent, entry: Kept | None = None) -> None:
        """Keep a whole event (after sealing the issue's live item, if any); ``entry`` is
        its :func:`pack` when the caller has it already."""
        t = self._of(issue_id)
        if t.live is not None:
            self._close(issue_id, t)
        entry = entry or pack(event)
        self._push(t, entry, entry[2])

    def add_fragment(
        self,
        issue_id: str,
        kind: EventKind,
        text: str,
        seq: int,
        *,
        issue_identifier: str | None,
        session: str | None,
        at: datetime | None,
        payload: Payload | None,
    ) -> None:
        """Append a fragment's ``text`` to the issue's live item for that item and session,
        or start one. ``at`` is only read for the first fragment of an item."""
        t = self._of(issue_id)
        live = t.live
        if live is not None:
            if live.chars + len(text) <= self._max_chars and live.same_item(kind, session, payload):
                parts = live.parts
                parts.append(text)
                cost = len(text) + PART_OVERHEAD
                if len(parts) >= JOIN_PARTS:
                    parts[:] = ("".join(parts),)
                    cost -= PART_OVERHEAD * (JOIN_PARTS - 1)
                live.chars += len(text)
                live.seq = seq
                t.bytes += cost
                self.bytes += cost
                if self.held() > self.budget_bytes:
                    self._trim()
                return
            self._close(issue_id, t)
        live = t.live = LiveItem(
            kind,
            text,
            seq,
            issue_identifier=issue_identifier,
            session=session,
            at=at,
            payload=payload,
        )
        self._push(t, live, live.cost())

    def since(self, issue_id: str, seq: int, limit: int) -> list[AgentEvent]:
        """The oldest ``limit`` entries above ``seq``, as events; a live item handed out is
        sealed first (so it never grows after it was read)."""
        t = self._by_issue.get(issue_id)
        if t is None:
            return []
        if t.live is not None and t.live.seq > seq:
            self._close(issue_id, t)
        newer: list[Kept] = []
        for entry in reversed(t.entries):  # newest first: stop at the first one already seen
            # A live item still here is the last entry, with nothing newer than ``seq``.
            if isinstance(entry, LiveItem) or entry[0] <= seq:
                break
            newer.append(entry)
        newer.reverse()
        return [unpack(e) for e in newer[:limit]]

    def dropped_of(self, issue_id: str) -> tuple[int, int]:
        """(events, bytes) dropped from ``issue_id``'s transcript so far."""
        t = self._by_issue.get(issue_id)
        return (t.dropped_events, t.dropped_bytes) if t is not None else (0, 0)

    def forget(self, keep_issue_ids: set[str]) -> None:
        """Drop the transcripts of issues not in ``keep_issue_ids`` (not counted as dropped:
        nobody can ask for them any more)."""
        for issue_id in list(self._by_issue):
            if issue_id not in keep_issue_ids:
                t = self._by_issue.pop(issue_id)
                t.dead = True
                self.bytes -= t.bytes
                t.entries.clear()
                t.live = None
                t.bytes = 0

    # -- internals
    def _push(self, t: Transcript, entry: Kept | LiveItem, cost: int) -> None:
        if len(t.entries) >= self._max_entries:
            self._drop_oldest_of(t)
            t.skip += 1  # its reference in the age order is now stale
        t.entries.append(entry)
        t.bytes += cost
        self.bytes += cost
        self._age.append(t)
        if self.held() > self.budget_bytes:
            self._trim()

    def _close(self, issue_id: str, t: Transcript) -> None:
        live = t.live
        assert live is not None
        t.live = None
        entry = pack(self._seal(issue_id, live))
        was = live.cost()
        now = entry[2]
        t.bytes += now - was
        self.bytes += now - was
        t.entries[-1] = entry  # a live item is always its transcript's last entry

    def _cost_of(self, entry: Kept | LiveItem) -> int:
        if isinstance(entry, LiveItem):
            return entry.cost()
        return entry[2]

    def _drop_oldest_of(self, t: Transcript) -> None:
        entry = t.entries.popleft()
        if entry is t.live:
            t.live = None
        cost = self._cost_of(entry)
        t.bytes -= cost
        self.bytes -= cost
        t.dropped_events += 1
        t.dropped_bytes += cost
        self.dropped_events += 1
        self.dropped_bytes += cost

    def _trim(self) -> None:
        """Drop the oldest entries of all transcripts until the budget holds (the newest
        entry is kept even when it alone is over budget)."""
        age = self._age
        while self.held() > self.budget_bytes and len(age) > 1:
            t = age.popleft()
            if t.dead:
                continue
            if t.skip:
                t.skip -= 1
                continue
            if t.entries:
                self._drop_oldest_of(t)
