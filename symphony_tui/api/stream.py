"""``GET /api/v1/stream``: the scheduler's state pushed as Server-Sent Events (WHATWG HTML
"Server-sent events"; wire format in docs/http-api.md, "Event stream").

Frames (``data`` is one JSON object; ``id`` is ``<epoch>:<seq>``, where ``epoch`` names the
scheduler process and ``seq`` is the last event sequence number delivered so far):

* ``event: snapshot`` — always the first frame: ``{"snapshot": <Snapshot JSON>, "version",
  "reset", "gap"}``. ``reset``: the ``Last-Event-ID`` came from another scheduler process
  (a restart), so the client must forget its events; ``gap``: events between the client's
  position and the oldest one still held were pushed out of the bounded ring.
* ``event: change`` — ``{"version", "patch": <RFC 6902 JSON Patch from the previous version
  or null>, "events": [AgentEvent...]}``, at most one every ``interval_s`` unless events
  are still being caught up (frames are cut at :data:`FRAME_EVENTS` events or
  :data:`FRAME_BYTES`).
* ``event: keepalive`` — ``{}`` after ``keepalive_s`` without a frame, so a silent link is
  told from a quiet scheduler.
* ``event: stopping`` — ``{"at": <ISO time>, "reason": "..."}``, the last frame when the
  scheduler is shutting down (:meth:`StreamHub.stopping`): the stream ends and the server
  will not answer again, so a client stops reconnecting. A stream that ends without it is a
  lost link (reconnect).

Resuming with ``Last-Event-ID: <epoch>:<seq>`` delivers every held event with a larger
``seq``, once. The connection computes each frame from the newest state when it gets to
write it, so a slow client skips snapshot versions instead of queueing them: memory per
client is one document and the socket's write buffer (``resp.write`` waits for it to
drain). A client that takes nothing for ``write_timeout_s`` is dropped.

Caps: at most ``max_streams`` connections at once (default :data:`MAX_STREAMS`) and
``max_streams_per_client`` from one client address (:data:`MAX_STREAMS_PER_CLIENT`); one
more is 503 ``too_many_streams`` with ``Retry-After``. When a crowd of streams has
left (all but a quarter of it), the freed memory is handed back to the system
(:func:`return_memory`).

Bandwidth: a client whose ``Accept-Encoding`` allows gzip gets the response as one gzip
member flushed at every frame (:class:`FrameGzip`), and token accounting is published at
most once every ``usage_s`` (:class:`SnapshotVersions`); figures in tests/bench/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from aiohttp import web

from symphony_tui.domain import Snapshot
from symphony_tui.scheduler.port import SchedulerPort

log = logging.getLogger(__name__)

FRAME_EVENTS = 500
MAX_STREAMS = 256
MAX_STREAMS_PER_CLIENT = 64
#: After this many streams were open at once, memory is returned when they have all gone.
RETURN_AFTER_STREAMS = 32
#: How long a page of events read for one connection serves the others at that position.
PAGE_SHARE_S = 0.05
FRAME_BYTES = 256_000
HISTORY_EVENTS = 1_000
_LAST_ID = re.compile(r"^([0-9a-z]+):([0-9]+)$")
_CODING = re.compile(r"^\s*([a-z0-9*-]+)\s*(?:;\s*q\s*=\s*([0-9.]+))?\s*$", re.IGNORECASE)


def return_memory() -> None:
    """Hand freed heap memory back to the system: a full collection, then glibc's
    ``malloc_trim(0)`` (each stream's gzip state and documents are malloc'd in pieces of a
    few hundred KiB that the allocator otherwise keeps). Elsewhere only the collection."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value (RFC 9110 section 12.5.3) allows ``gzip``: named, or
    ``*``, with a quality above 0. Unparseable items are ignored."""
    allowed: dict[str, float] = {}
    for item in accept_encoding.split(","):
        found = _CODING.match(item)
        if found is None:
            continue
        try:
            quality = float(found.group(2)) if found.group(2) is not None else 1.0
        except ValueError:
            continue
        allowed[found.group(1).lower()] = quality
    return allowed.get("gzip", allowed.get("x-gzip", allowed.get("*", 0.0))) > 0.0


class FrameGzip:
    """One gzip member (RFC 1952) for a whole connection, flushed at each frame's end
    (``Z_SYNC_FLUSH``), so every frame decodes as soon as it arrives while the compressor
    keeps its 32 KiB window across frames: the field names, paths and texts that repeat
    from frame to frame cost a few bytes each. Memory: zlib's state, about 256 KiB."""

    def __init__(self, level: int = 6) -> None:
        self._zlib = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def frame(self, data: bytes) -> bytes:
        return self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH)


def epoch_of(snapshot: Snapshot) -> str:
    """A name for the scheduler process behind a snapshot: its start time in ms, base 16."""
    started = snapshot.started_at
    return f"{int(started.timestamp() * 1000):x}" if started is not None else "0"


def parse_last_event_id(text: str) -> tuple[str, int]:
    """``"<epoch>:<seq>"`` -> ``(epoch, seq)``; raises ``ValueError`` on anything else."""
    found = _LAST_ID.match(text.strip())
    if found is None:
        raise ValueError(f"Last-Event-ID {text[:40]!r} is not <epoch>:<seq>")
    return found.group(1), int(found.group(2))


#: Accounting fields (:class:`~symphony_tui.domain.Snapshot` top level, and each running
#: row's ``tokens`` with the issue's total and whether they are reported at all) that change
#: with every token update of every busy worker: published at most once every ``usage_s``
#: (docs/http-api.md, "Event stream"), together, so held zeros never read as measured.
USAGE_FIELDS = (
    "totals",
    "runs_not_reported",
    "runs_unpriced",
    "seconds_running",
    "token_rate_per_min",
    "token_history",
    "rate_limits",
)
ROW_USAGE_FIELDS = (
    "tokens",
    "usage_reported",
    "issue_total_tokens",
    "spend_usd",
    "spend",
    "turn_spend_usd",
    "issue_spend_usd",
)


def hold_usage(previous: dict[str, Any], doc: dict[str, Any]) -> bool:
    """Put ``previous``'s accounting fields (:data:`USAGE_FIELDS`, and
    :data:`ROW_USAGE_FIELDS` of the running rows present in both, matched by ``issue_id``)
    into ``doc`` in place; True if any of them differed (an update is being held back)."""
    held = False
    for name in USAGE_FIELDS:
        if name in previous and previous[name] != doc.get(name):
            doc[name] = previous[name]
            held = True
    before = {row.get("issue_id"): row for row in previous.get("running") or ()}
    for row in doc.get("running") or ():
        old = before.get(row.get("issue_id"))
        if old is None:
            continue  # a new row shows its own counts
        for name in ROW_USAGE_FIELDS:
            if name in old and old[name] != row.get(name):
                row[name] = old[name]
                held = True
    return held


class SnapshotVersions:
    """Snapshots as JSON documents numbered 1, 2, ...; the patch between two consecutive
    versions is computed once and shared by every connection that is up to date.

    Accounting (:func:`hold_usage`) is coalesced: a version made less than ``usage_s``
    after the last one that published it carries the previous counts, and the held update
    is published by the first version made after ``usage_s`` (with nothing else changed,
    it makes one). So token counts lag the scheduler by at most ``usage_s`` plus a frame
    interval, and everything else (status, last activity, approvals) is never held."""

    def __init__(
        self,
        port: SchedulerPort,
        *,
        usage_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._port = port
        self.usage_s = usage_s
        self._clock = clock
        self._snapshot: Snapshot | None = None
        self.version = 0
        self.doc: dict[str, Any] = {}
        self._patch: list[dict[str, Any]] | None = None
        self._usage_at = float("-inf")
        self._held = False

    def current(self) -> tuple[int, dict[str, Any], Snapshot]:
        snapshot = self._port.snapshot()
        now = self._clock()
        due = now - self._usage_at >= self.usage_s
        if snapshot is not self._snapshot or (self._held and due):
            doc = json.loads(snapshot.model_dump_json())
            self._held = bool(self.version) and not due and hold_usage(self.doc, doc)
            if not self._held:
                self._usage_at = now
            self._snapshot = snapshot
            if not self.version or doc != self.doc:
                self._patch = jsonpatch.make_patch(self.doc, doc).patch if self.version else None
                self.doc = doc
                self.version += 1
        assert self._snapshot is not None
        return self.version, self.doc, self._snapshot

    def patch_from(self, version: int, doc: dict[str, Any]) -> list[dict[str, Any]]:
        """Operations turning ``doc`` (at ``version``) into the current document."""
        if version == self.version - 1 and self._patch is not None:
            return self._patch
        return jsonpatch.make_patch(doc, self.doc).patch


@dataclass
class StreamStats:
    """What one connection did (for tests and the log): frames written and the largest
    socket write buffer seen (bytes)."""

    peer: str
    frames: int = 0
    buffered_max: int = 0
    closed: bool = False
    transport: asyncio.Transport | None = field(default=None, repr=False)


@dataclass
class StreamHub:
    port: SchedulerPort
    interval_s: float = 0.5
    keepalive_s: float = 5.0
    write_timeout_s: float = 30.0
    retry_ms: int = 2_000
    compress: bool = True
    usage_s: float = 1.0
    max_streams: int = MAX_STREAMS
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    connections: list[StreamStats] = field(default_factory=list)
    #: The ``stopping`` frame's JSON once the scheduler is shutting down (:meth:`stopping`).
    final: str | None = None
    #: ``time.monotonic()`` of the last poll (``/api/v1/snapshot``, ``/events``, ``/state``).
    last_poll: float | None = None
    #: Set once a poll has been answered ``scheduler_stopping`` (:meth:`linger_for_pollers`).
    poller_told: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.versions = SnapshotVersions(self.port, usage_s=self.usage_s)
        # Shared by every connection: the patch text between two versions, and the page of
        # events after a position for a moment (many clients stand at the same place).
        self._patch_text: dict[tuple[int, int], str] = {}
        self._pages: dict[int, tuple[float, tuple[list[str], int, bool]]] = {}
        self._doc_text: tuple[int, str] = (-1, "")
        self.open_streams = 0
        self._per_client: dict[str, int] = {}
        self._crowd = 0  # the most streams open at once since memory was last returned

    def stopping(self, reason: str) -> None:
        """The scheduler is shutting down: every open stream (and one opened meanwhile) ends
        with an ``event: stopping`` frame saying when and ``reason`` (one line)."""
        from datetime import UTC, datetime

        self.final = json.dumps({"at": datetime.now(UTC).isoformat(), "reason": reason})
        self.closing.set()

    async def linger_for_pollers(self, *, seen_within_s: float = 3.0, grace_s: float = 1.0) -> None:
        """After :meth:`stopping`: a console that polls instead of streaming gets no frame,
        so when one polled in the last ``seen_within_s`` seconds, keep answering (503
        ``scheduler_stopping``) until it has been told or ``grace_s`` seconds pass."""
        if self.final is None or self.last_poll is None:
            return
        if time.monotonic() - self.last_poll > seen_within_s:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.poller_told.wait(), timeout=grace_s)

    def _refusal(self, client: str) -> str | None:
        if self.open_streams >= self.max_streams:
            return f"{self.open_streams} streams are open, the most this server serves"
        if self._per_client.get(client, 0) >= self.max_streams_per_client:
            return (
                f"{client} has {self._per_client[client]} streams open, the most one client "
                "may have"
            )
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        client = str(request.remote)
        refusal = self._refusal(client)
        if refusal is not None:
            log.warning("HTTP API: stream refused to %s: %s", client, refusal)
            return web.json_response(
                {"error": {"code": "too_many_streams", "message": refusal}},
                status=503,
                headers={"Retry-After": "10"},
            )
        self.open_streams += 1
        self._per_client[client] = self._per_client.get(client, 0) + 1
        self._crowd = max(self._crowd, self.open_streams)
        try:
            return await self._handle(request)
        finally:
            self.open_streams -= 1
            left = self._per_client.pop(client, 1) - 1
            if left:
                self._per_client[client] = left
            if self._crowd >= RETURN_AFTER_STREAMS and self.open_streams <= self._crowd // 4:
                # most of a crowd has left (stragglers may stay): hand its memory back
                log.info(
                    "HTTP API: %d of %d streams left: returning memory",
                    self._crowd - self.open_streams, self._crowd,
                )  # fmt: skip
                self._crowd = self.open_streams
                return_memory()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw_id = request.headers.get("Last-Event-ID") or request.query.get("last_event_id")
        resume: tuple[str, int] | None = None
        if raw_id:
            try:
                resume = parse_last_event_id(raw_id)
            except ValueError as exc:
                return web.json_response(
                    {"error": {"code": "invalid_last_event_id", "message": str(exc)}}, status=400
                )
        headers = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "Vary": "Accept-Encoding",
        }
        gzip = self.compress and accepts_gzip(request.headers.get("Accept-Encoding", ""))
        if gzip:
            headers["Content-Encoding"] = "gzip"
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        stats = StreamStats(peer=str(request.remote), transport=request.transport)
        self.connections.append(stats)
        del self.connections[:-64]  # the newest connections' stats only
        try:
            await self._serve(request, response, resume, stats, FrameGzip() if gzip else None)
        except (ConnectionError, TimeoutError) as exc:
            log.info("HTTP API: stream to %s ended: %s", stats.peer, type(exc).__name__)
        finally:
            stats.closed = True
            stats.transport = None
        return response

    async def _serve(
        self,
        request: web.Request,
        response: web.StreamResponse,
        resume: tuple[str, int] | None,
        stats: StreamStats,
        gzip: FrameGzip | None,
    ) -> None:
        version, doc, snapshot = self.versions.current()
        epoch = epoch_of(snapshot)
        reset = resume is not None and resume[0] != epoch
        gap = False
        if resume is not None and not reset:
            seq = resume[1]
            oldest = self.port.events_since(0, limit=1)
            gap = bool(oldest) and seq < oldest[0].seq - 1 and seq > 0
        else:
            history = self.port.events_since(0, limit=10_000)[-HISTORY_EVENTS:]
            seq = history[0].seq - 1 if history else 0

        async def send(data: bytes) -> None:
            if gzip is not None:
                data = gzip.frame(data)
            await asyncio.wait_for(response.write(data), self.write_timeout_s)

        async def write(
            kind: str, payload: str, event_id: str | None = None, before: str = ""
        ) -> None:
            head = before + f"event: {kind}\n" + (f"id: {event_id}\n" if event_id else "")
            await send(f"{head}data: {payload}\n\n".encode())
            stats.frames += 1
            transport = request.transport
            if transport is not None:
                stats.buffered_max = max(stats.buffered_max, transport.get_write_buffer_size())

        first = json.dumps({"version": version, "reset": reset, "gap": gap})
        if self._doc_text[0] != version:  # one serialization per version for every client
            self._doc_text = (version, json.dumps(doc, separators=(",", ":")))
        body = '{"snapshot":' + self._doc_text[1] + "," + first[1:]
        # the reconnect advice and the state in one write: one gzip flush, one TCP segment
        await write("snapshot", body, f"{epoch}:{seq}", before=f"retry: {self.retry_ms}\n\n")
        last_write = time.monotonic()

        async def change(page: tuple[list[str], int, bool]) -> bool | None:
            """Send what changed (``page``: events after ``seq``, and the document): True
            when more events wait, None when nothing changed."""
            nonlocal version, doc, seq, last_write
            events, seq, more = page
            now_version, now_doc, _ = self.versions.current()
            if not events and now_version == version:
                return None
            patch_text = "null"
            if now_version != version:
                patch_text = self._patch_between(version, doc, now_version)
                version, doc = now_version, now_doc
            body = f'{{"version":{version},"patch":{patch_text},"events":[{",".join(events)}]}}'
            await write("change", body, f"{epoch}:{seq}")
            last_write = time.monotonic()
            return more

        while not self.closing.is_set():
            more = await change(self._events_after(seq))
            if more:
                continue  # catching up: the next page now, paced by the socket
            if more is None and time.monotonic() - last_write >= self.keepalive_s:
                await write("keepalive", "{}")
                last_write = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), timeout=self.interval_s)
        if self.final is not None:
            # The runs' ends and the state the scheduler stops in go out before the last
            # frame (read afresh, not from the page shared for a moment).
            while await change(self._read_events(seq)):
                pass
            await write("stopping", self.final)

    def _patch_between(self, version: int, doc: dict[str, Any], now_version: int) -> str:
        """The JSON text of the patch from ``doc`` (at ``version``) to the current document,
        computed and serialized once per pair of versions."""
        key = (version, now_version)
        text = self._patch_text.get(key)
        if text is None:
            if len(self._patch_text) > 256:
                self._patch_text.clear()
            patch = self.versions.patch_from(version, doc)
            text = self._patch_text[key] = json.dumps(patch, separators=(",", ":"))
        return text

    def _events_after(self, seq: int) -> tuple[list[str], int, bool]:
        """:meth:`_read_events`, shared for :data:`PAGE_SHARE_S` by every connection at
        ``seq`` (an event that arrives meanwhile goes out in the next frame)."""
        now = time.monotonic()
        held = self._pages.get(seq)
        if held is not None and now - held[0] < PAGE_SHARE_S:
            return held[1]
        if len(self._pages) > 256:
            self._pages = {k: v for k, v in self._pages.items() if now - v[0] < PAGE_SHARE_S}
        page = self._read_events(seq)
        self._pages[seq] = (now, page)
        return page

    def _read_events(self, seq: int) -> tuple[list[str], int, bool]:
        """JSON of the held events after ``seq`` (a page bounded in count and bytes), the
        new position, and whether more are waiting."""
        found = self.port.events_since(seq, limit=FRAME_EVENTS)
        out: list[str] = []
        size = 0
        for event in found:
            text = event.model_dump_json(exclude_none=True)  # keeps v and the payload type tag
            if out and size + len(text) > FRAME_BYTES:
                return out, seq, True
            out.append(text)
            size += len(text)
            seq = event.seq
        return out, seq, len(found) == FRAME_EVENTS
