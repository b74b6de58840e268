"""The conversation's event log: parse frames, deduplicate by id, order by timestamp then id.

OpenHands events reach us twice over: live on the WebSocket and, after a reconnect, again
from ``GET /api/conversations/{id}/events/search`` (docs/protocols.md "OpenHands agent-server").
:class:`SeenEvents` decides which of them are new. A frame that is not a JSON object with a
string ``id`` and ``kind`` is malformed: it is counted and skipped, never fatal.

Event shape (wire): ``{"kind": str, "id": str, "timestamp": "2026-11-30T07:02:57.212970",
"source": "agent" | "user" | "environment", ...}``. Timestamps are ISO 8601, usually naive
(server local UTC); events without a parsable timestamp sort first within a batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

WireEvent = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def event_time(event: WireEvent) -> datetime:
    """The event's timestamp as an aware UTC datetime (naive values are taken as UTC)."""
    raw = event.get("timestamp")
    if not isinstance(raw, str):
        return _EPOCH
    try:
        ts = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return _EPOCH
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def order_key(event: WireEvent) -> tuple[datetime, str]:
    """Sort key: timestamp, then id (docs/protocols.md "Event stream": dedupe by id, order by
    timestamp then id)."""
    return event_time(event), str(event.get("id", ""))


def is_event(value: Any) -> bool:
    """True when ``value`` has the minimum shape of an OpenHands event."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and bool(value["id"])
        and isinstance(value.get("kind"), str)
    )


class SeenEvents:
    """Seen-event bookkeeping for one conversation.

    ``malformed`` counts frames and search items that were skipped. ``last_malformed`` is a
    one-line description of the latest one (for a diagnostic event). Ids are kept for the
    life of the session; event bodies are not (the session keeps what it needs).
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self.malformed = 0
        self.last_malformed = ""
        self.high_water: datetime | None = None

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._ids)

    def parse(self, frame: str | bytes) -> WireEvent | None:
        """Decode one WebSocket frame; ``None`` (and counted) when it is not an event."""
        try:
            value = json.loads(frame)
        except (ValueError, UnicodeDecodeError) as e:
            self._bad(f"not JSON ({e.__class__.__name__}): {_snippet(frame)}")
            return None
        if not is_event(value):
            self._bad(f"not an event object: {_snippet(frame)}")
            return None
        return value

    def accept(self, event: WireEvent) -> bool:
        """Record a live event; True when its id was not seen before."""
        if not is_event(event):
            self._bad(f"not an event object: {_snippet(json.dumps(event, default=str))}")
            return False
        if event["id"] in self._ids:
            return False
        self._ids.add(event["id"])
        ts = event_time(event)
        if ts != _EPOCH and (self.high_water is None or ts > self.high_water):
            self.high_water = ts
        return True

    def merge(self, events: Iterable[Any]) -> list[WireEvent]:
        """Record a batch (e.g. reconciled search pages); return the new ones, ordered.

        Items that are not events are counted as malformed; duplicates inside the batch
        and ids already seen are dropped.
        """
        fresh: dict[str, WireEvent] = {}
        for item in events:
            if not is_event(item):
                self._bad(f"not an event object: {_snippet(json.dumps(item, default=str))}")
                continue
            if item["id"] in self._ids or item["id"] in fresh:
                continue
            fresh[item["id"]] = item
        out = sorted(fresh.values(), key=order_key)
        for e in out:
            self.accept(e)
        return out

    def _bad(self, why: str) -> None:
        self.malformed += 1
        self.last_malformed = why


def _snippet(frame: str | bytes, limit: int = 120) -> str:
    text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
