"""The scheduler's event history: a bounded ring for the console, per-issue transcripts for
worker detail, and an optional JSONL file with the full history (the console's log stays
bounded; the full history and its filtering live here, in the core).

The JSONL file holds one event per line in its wire form (``AgentEvent`` JSON with its
format version ``v``); :func:`read_history` reads it back, lines of every format so far
included."""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from symphony_tui.domain import AgentEvent, EventKind, RunOutcome
from symphony_tui.domain.kinds import FRAGMENT_KINDS, QUIET_KINDS
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler.history.event_file import RotatingJsonl
from symphony_tui.scheduler.history.transcripts import (
    Kept,
    LiveItem,
    Transcripts,
    pack,
    payload_texts,
    unpack,
    wire_json,
)

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 16_384


class EventHistory:
    """Stamps ``seq`` on events and keeps them. Memory is bounded by bytes: the ring by
    ``ring_size`` events and ``ring_bytes``, the transcripts by ``transcript_size`` entries
    each and ``transcript_bytes`` over all issues (:mod:`scheduler.history.transcripts`: oldest
    dropped first, counted; streamed fragments coalesced into one entry per item and read).
    Both hold each event once, packed (:func:`transcripts.pack`: its JSON bytes, out of the
    garbage collector's reach), and hand out decoded copies. Transcripts of issues no
    longer known are dropped by :meth:`forget`."""

    def __init__(
        self,
        *,
        ring_size: int = 5_000,
        ring_bytes: int = 8 * 1024 * 1024,
        transcript_size: int = 2_000,
        transcript_bytes: int = 32 * 1024 * 1024,
        jsonl_path: Path | None = None,
    ) -> None:
        self._seq = 0
        self._ring: deque[Kept] = deque()
        self._ring_size = ring_size
        self.ring_bytes_budget = ring_bytes
        self.ring_bytes = 0
        #: Events dropped from the ring to keep its budget (count, bytes).
        self.ring_dropped = (0, 0)
        self.transcripts = Transcripts(
            max_entries=transcript_size,
            budget_bytes=transcript_bytes,
            max_chars=MAX_MESSAGE_CHARS,
            seal=self._seal,
        )
        self._jsonl: RotatingJsonl | None = None
        self.jsonl_path = jsonl_path
        #: Identifiers whose runs ended normally in an earlier life of this project (its
        #: history file), oldest first: the scheduler counts them done again.
        self.completed_before: list[str] = []
        if jsonl_path is not None:  # rotated by size; seq goes on from the file's last
            self._jsonl = RotatingJsonl(jsonl_path)
            self._seq = self._jsonl.last_seq
            self._reload(jsonl_path)

    def _reload(self, path: Path) -> None:
        """Take the newest events of the history file (and its first backup when the file
        alone holds fewer) back into the ring, within its count and byte budget, so a
        restarted console shows what happened before; and read which runs ended normally
        (:attr:`completed_before`). Unreadable files and lines are skipped."""
        files = [path, path.with_name(f"{path.name}.1")]
        kept: list[Kept] = []
        done: dict[str, None] = {}  # newest first, each once
        budget = self.ring_bytes_budget
        for file in files:
            try:
                data = file.read_bytes()
            except OSError:
                continue
            lines = data.splitlines()
            for line in reversed(lines):
                if b'"run_ended"' in line and b'"normal"' in line:
                    ident = _normal_end(line)
                    if ident is not None:
                        done.setdefault(ident)
                if len(kept) >= self._ring_size or budget <= 0 or not line.strip():
                    continue
                try:
                    event = AgentEvent.model_validate_json(line)
                except ValueError:
                    continue
                if event.kind in QUIET_KINDS or event.kind in FRAGMENT_KINDS:
                    continue
                entry = pack(event, line)
                budget -= entry[2]
                kept.append(entry)
        for entry in reversed(kept):
            self._keep_in_ring(entry)
        self.completed_before = list(done)[::-1]

    @property
    def last_seq(self) -> int:
        return self._seq

    def append(self, event: AgentEvent, **updates: Any) -> AgentEvent:
        """Stamp ``seq`` (plus any ``updates``, in the same copy) and keep the event.

        Secrets are masked here, the one door every event passes (spec §15.3): an agent
        that prints its environment must not put an API key on the operator's screen or
        in the JSONL file. A streamed fragment of an issue goes to :meth:`append_fragment`
        instead (no copy; the event is returned as given)."""
        if event.kind in FRAGMENT_KINDS:
            issue_id = updates.get("issue_id", event.issue_id)
            if isinstance(issue_id, str):
                self.append_fragment(
                    issue_id,
                    event,
                    issue_identifier=updates.get("issue_identifier", event.issue_identifier),
                    session_id=updates.get("session_id", event.session_id),
                    at=updates.get("at", event.at),
                )
                return event
        self._seq += 1
        updates["seq"] = self._seq
        message = updates.get("message", event.message)
        if isinstance(message, str) and message:
            message = updates["message"] = redact(message)
        if event.payload is not None:
            payload = _redacted(event.payload)
            if payload is not event.payload:
                updates["payload"] = payload
        if isinstance(message, str) and len(message) > MAX_MESSAGE_CHARS:
            cut = len(message) - MAX_MESSAGE_CHARS
            updates["message"] = message[:MAX_MESSAGE_CHARS] + f"… [{cut} more chars]"
        event = event.model_copy(update=updates)
        data = wire_json(event)
        entry = pack(event, data)
        if event.issue_id is not None:
            self.transcripts.add(event.issue_id, event, entry)
        if event.kind not in FRAGMENT_KINDS:
            if event.kind not in QUIET_KINDS:
                self._keep_in_ring(entry)
            if self._jsonl is not None:
                self._jsonl.write(data.decode())
        return event

    def append_fragment(
        self,
        issue_id: str,
        event: AgentEvent,
        *,
        issue_identifier: str | None,
        session_id: str | None,
        at: datetime | None,
    ) -> int:
        """Take a streamed fragment's text into ``issue_id``'s transcript (its live item);
        no event is copied or kept per fragment. Fragments stay out of the ring and the
        JSONL file. ``at`` is read only for an item's first fragment (None is allowed: the
        item is then stamped when it is sealed). Returns the fragment's ``seq``."""
        self._seq += 1
        self.transcripts.add_fragment(
            issue_id,
            event.kind,
            event.message,
            self._seq,
            issue_identifier=issue_identifier,
            session=session_id,
            at=at,
            payload=event.payload,
        )
        return self._seq

    def _seal(self, issue_id: str, live: LiveItem) -> AgentEvent:
        """The event a live item becomes: its parts joined and masked once (a secret split
        across fragments is masked too), capped at MAX_MESSAGE_CHARS."""
        text = redact("".join(live.parts))
        payload = _redacted(live.payload) if live.payload is not None else None
        return AgentEvent(
            kind=live.kind,
            message=text[:MAX_MESSAGE_CHARS],
            issue_id=issue_id,
            issue_identifier=live.issue_identifier,
            session_id=live.session,
            at=live.at or datetime.now(UTC),
            seq=live.seq,
            payload=payload,
        )

    def _keep_in_ring(self, entry: Kept) -> None:
        ring = self._ring
        ring.append(entry)
        self.ring_bytes += entry[2]
        while len(ring) > 1 and (
            len(ring) > self._ring_size or self.ring_bytes > self.ring_bytes_budget
        ):
            cost = ring.popleft()[2]
            self.ring_bytes -= cost
            count, size = self.ring_dropped
            self.ring_dropped = (count + 1, size + cost)

    def since(
        self, seq: int, *, limit: int = 2_000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        """The oldest ``limit`` events with ``seq`` above ``seq``, oldest first, so a reader
        that pages with the last seq it saw misses nothing the buffer still holds."""
        if issue_id is not None:
            return self.transcripts.since(issue_id, seq, limit)
        newer: list[Kept] = []
        for entry in reversed(self._ring):  # newest first: stop at the first one already seen
            if entry[0] <= seq:
                break
            newer.append(entry)
        newer.reverse()
        return [unpack(e) for e in newer[:limit]]

    def stats(self) -> dict[str, int]:
        """Held and dropped bytes and events (ring and transcripts), for figures and tests."""
        t = self.transcripts
        return {
            "ring_events": len(self._ring),
            "ring_bytes": self.ring_bytes,
            "ring_dropped_events": self.ring_dropped[0],
            "ring_dropped_bytes": self.ring_dropped[1],
            "transcript_bytes": t.bytes,
            "transcript_dropped_events": t.dropped_events,
            "transcript_dropped_bytes": t.dropped_bytes,
        }

    def forget(self, keep_issue_ids: set[str]) -> None:
        self.transcripts.forget(keep_issue_ids)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def event_json(event: AgentEvent) -> str:
    return json.dumps(event.model_dump(mode="json"))


def read_history(path: Path) -> Iterator[AgentEvent]:
    """The events of a JSONL history file, oldest first. A line that is not an event is
    skipped with a one-line warning naming the file and line; the rest still load."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield AgentEvent.model_validate_json(line)
            except ValueError as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                log.warning("%s:%d: not an event, skipped (%s)", path, number, first)


def _normal_end(line: bytes) -> str | None:
    """The issue identifier of a history line that is a run ending normally, else None."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    payload = data.get("payload") if isinstance(data, dict) else None
    if data.get("kind") != EventKind.RUN_ENDED.value or not isinstance(payload, dict):
        return None
    ident = data.get("issue_identifier")
    if payload.get("outcome") != RunOutcome.NORMAL.value or not isinstance(ident, str):
        return None
    return ident


def _redacted(model: BaseModel) -> BaseModel:
    """``model`` with secrets masked in its text fields (nested edits included); the same
    object when nothing needed masking. Most payloads hold no secret: one pass over all
    their text (joined by newlines, which no mask pattern spans without changing the
    text) tells, before any field is looked at alone."""
    joined = "\n".join(payload_texts(model))
    if not joined or redact(joined) == joined:
        return model
    updates: dict[str, object] = {}
    for name, value in model.__dict__.items():
        if isinstance(value, str):
            if value and (masked := redact(value)) != value:
                updates[name] = masked
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            items = tuple(_redacted(v) if isinstance(v, BaseModel) else v for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                updates[name] = items
    return model.model_copy(update=updates) if updates else model
