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
from pathlib import Path

from pydantic import BaseModel

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler.event_file import RotatingJsonl

log = logging.getLogger(__name__)

# Streaming fragments go to transcripts only: the live log shows whole messages, and a flood
# of deltas must not push everything else out of the ring.
FRAGMENT_KINDS = frozenset({EventKind.MESSAGE_DELTA, EventKind.COMMAND_OUTPUT})
# Accounting updates: kept in transcripts and the JSONL file, but not in the live ring (the
# token pane shows them) and not as a worker's "last event".
QUIET_KINDS = frozenset({EventKind.TOKEN_USAGE, EventKind.RATE_LIMITS})
MAX_MESSAGE_CHARS = 16_384


class EventHistory:
    """Stamps ``seq`` on events and keeps them. Memory is bounded by ``ring_size`` plus
    ``transcript_size`` per issue (transcripts of issues no longer known are dropped by
    :meth:`forget`)."""

    def __init__(
        self,
        *,
        ring_size: int = 5_000,
        transcript_size: int = 2_000,
        jsonl_path: Path | None = None,
    ) -> None:
        self._seq = 0
        self._ring: deque[AgentEvent] = deque(maxlen=ring_size)
        self._transcripts: dict[str, deque[AgentEvent]] = {}
        self._transcript_size = transcript_size
        self._jsonl: RotatingJsonl | None = None
        self.jsonl_path = jsonl_path
        if jsonl_path is not None:  # rotated by size; seq goes on from the file's last
            self._jsonl = RotatingJsonl(jsonl_path)
            self._seq = self._jsonl.last_seq

    @property
    def last_seq(self) -> int:
        return self._seq

    def append(self, event: AgentEvent, **updates: object) -> AgentEvent:
        """Stamp ``seq`` (plus any ``updates``, in the same copy) and keep the event.

        Secrets are masked here, the one door every event passes (spec §15.3): an agent
        that prints its environment must not put an API key on the operator's screen or
        in the JSONL file."""
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
        if event.issue_id is not None:
            t = self._transcripts.get(event.issue_id)
            if t is None:
                t = self._transcripts[event.issue_id] = deque(maxlen=self._transcript_size)
            t.append(event)
        if event.kind not in FRAGMENT_KINDS:
            if event.kind not in QUIET_KINDS:
                self._ring.append(event)
            if self._jsonl is not None:
                self._jsonl.write(event.model_dump_json())
        return event

    def since(
        self, seq: int, *, limit: int = 2_000, issue_id: str | None = None
    ) -> list[AgentEvent]:
        """The oldest ``limit`` events with ``seq`` above ``seq``, oldest first, so a reader
        that pages with the last seq it saw misses nothing the buffer still holds."""
        source = self._transcripts.get(issue_id, ()) if issue_id is not None else self._ring
        newer: list[AgentEvent] = []
        for event in reversed(source):  # newest first: stop at the first one already seen
            if event.seq <= seq:
                break
            newer.append(event)
        newer.reverse()
        return newer[:limit]

    def forget(self, keep_issue_ids: set[str]) -> None:
        for issue_id in list(self._transcripts):
            if issue_id not in keep_issue_ids:
                del self._transcripts[issue_id]

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


def _texts(model: BaseModel) -> Iterator[str]:
    for value in model.__dict__.values():
        if isinstance(value, str):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, BaseModel):
                    yield from _texts(item)


def _redacted(model: BaseModel) -> BaseModel:
    """``model`` with secrets masked in its text fields (nested edits included); the same
    object when nothing needed masking. Most payloads hold no secret: one pass over all
    their text (joined by newlines, which no mask pattern spans without changing the
    text) tells, before any field is looked at alone."""
    joined = "\n".join(_texts(model))
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
