"""What keeps the event stream small (docs/http-api.md, "Event stream"): a gzip member per
connection flushed at every frame, negotiated by ``Accept-Encoding``; token accounting
published at most once every ``usage_s``, while everything else is never held back."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

import httpx
import pytest

from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import FrameGzip, SnapshotVersions, StreamHub, accepts_gzip
from symphony_tui.domain import RunningRow, Snapshot, TokenUsage
from symphony_tui.scheduler.port import SchedulerPort
from tests.api.test_stream import emit, event_seqs, read_frames
from tests.scheduler.conftest import make_issue


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip, deflate", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("identity", False),
        ("", False),
        ("deflate, *;q=0", False),
        ("gzip;q=zero, x-gzip", True),  # the bad item is ignored, x-gzip is gzip
    ],
)
def test_accept_encoding_decides_gzip(header, expected):
    assert accepts_gzip(header) is expected


def test_every_gzip_frame_decodes_on_arrival_and_repeats_cost_little():
    gz = FrameGzip()
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
    frame = b'event: change\nid: 1:7\ndata: {"events":[{"kind":"message"}]}\n\n'
    sizes = []
    for _ in range(20):
        wire = gz.frame(frame)
        assert reader.decompress(wire) == frame  # whole, without waiting for the next one
        sizes.append(len(wire))
    assert sizes[-1] < len(frame) / 4  # the window remembers the previous frames


@pytest.fixture
async def served(make_harness):
    h = make_harness([make_issue(1)])
    await h.start()
    await h.settle()
    hub = StreamHub(h.orch, interval_s=0.05, keepalive_s=0.3, write_timeout_s=5.0)
    api = ApiServer(h.orch, stream=hub)
    await api.start()
    yield h, api
    await api.stop()


async def test_the_stream_is_gzipped_only_for_clients_that_ask(served):
    h, api = served
    last = emit(h, 3, "hello")[-1].seq
    for encoding, coded in (("gzip", "gzip"), ("identity", None)):
        async with httpx.AsyncClient(
            base_url=api.url, timeout=10.0, headers={"Accept-Encoding": encoding}
        ) as client:
            head = await client.send(client.build_request("GET", "/api/v1/stream"), stream=True)
            assert head.headers.get("content-encoding") == coded
            assert "Accept-Encoding" in head.headers["vary"]
            await head.aclose()
            frames = await read_frames(client, until=lambda fs: event_seqs(fs)[-1:] == [last])
            assert frames[0][0] == "snapshot" and event_seqs(frames)[-1] == last


class FakePort(SchedulerPort):
    def __init__(self, snapshot: Snapshot) -> None:
        self.current = snapshot

    def snapshot(self) -> Snapshot:
        return self.current


def snap(tokens: int, *, status_message: str = "working", rows: int = 1) -> Snapshot:
    return Snapshot(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        running=tuple(
            RunningRow(
                issue_id=f"id-{n}",
                issue_identifier=f"ABC-{n}",
                state="Todo",
                last_message=status_message,
                tokens=TokenUsage(input_tokens=tokens, total_tokens=tokens),
            )
            for n in range(rows)
        ),
        totals=TokenUsage(input_tokens=tokens * rows, total_tokens=tokens * rows),
    )


def row_tokens(doc) -> int:
    return doc["running"][0]["tokens"]["input_tokens"]


def test_token_counts_are_published_at_most_once_per_usage_interval():
    now = [100.0]
    port = FakePort(snap(10))
    versions = SnapshotVersions(port, usage_s=1.0, clock=lambda: now[0])
    version, doc, _ = versions.current()
    assert row_tokens(doc) == 10 and doc["totals"]["input_tokens"] == 10
    # a token update 0.4 s later is held back: no new version for accounting alone
    now[0] += 0.4
    port.current = snap(20)
    assert versions.current()[0] == version
    # ... and stays held while other fields change, which are published at once
    now[0] += 0.2
    port.current = snap(30, status_message="editing files")
    version2, doc, _ = versions.current()
    assert version2 == version + 1
    assert doc["running"][0]["last_message"] == "editing files"
    assert row_tokens(doc) == 10 and doc["totals"]["input_tokens"] == 10
    # once usage_s has passed, the held counts go out even though nothing else changed
    now[0] += 0.5
    version3, doc, _ = versions.current()
    assert version3 == version2 + 1
    assert row_tokens(doc) == 30 and doc["totals"]["input_tokens"] == 30
    ops = versions.patch_from(version2, {})  # the shared patch of the last step
    assert ops and all("/tokens/" in op["path"] or "/totals/" in op["path"] for op in ops)


def test_a_new_running_row_shows_its_own_counts_at_once():
    now = [0.0]
    port = FakePort(snap(10))
    versions = SnapshotVersions(port, usage_s=1.0, clock=lambda: now[0])
    versions.current()
    now[0] += 0.1
    port.current = snap(10, rows=2).model_copy(
        update={"running": (snap(10).running[0], snap(77, rows=2).running[1])}
    )
    _v, doc, _ = versions.current()
    assert [r["tokens"]["input_tokens"] for r in doc["running"]] == [10, 77]


def test_usage_s_zero_publishes_every_update():
    now = [0.0]
    port = FakePort(snap(10))
    versions = SnapshotVersions(port, usage_s=0.0, clock=lambda: now[0])
    versions.current()
    port.current = snap(11)
    assert row_tokens(versions.current()[1]) == 11
