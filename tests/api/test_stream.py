"""Contract of ``GET /api/v1/stream`` (docs/http-api.md, "Event stream"): snapshot first,
then changes and events with ``<epoch>:<seq>`` ids; ``Last-Event-ID`` resume loses and
doubles nothing; keepalives; a slow client gets the newest state, not a queue."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import httpx
import jsonpatch
import pytest
from httpx_sse import aconnect_sse

from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import StreamHub
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.commands import PauseDispatch
from tests.api.test_http_api import asking
from tests.scheduler.conftest import make_issue


@pytest.fixture
async def streamed(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    hub = StreamHub(h.orch, interval_s=0.05, keepalive_s=0.3, write_timeout_s=5.0)
    api = ApiServer(h.orch, stream=hub)
    await api.start()
    async with httpx.AsyncClient(
        base_url=api.url, headers=api.control_headers(), timeout=10.0
    ) as client:
        yield h, api, hub, client
    await api.stop()


def emit(h, n: int, text: str = "note") -> list[AgentEvent]:
    out = [
        h.orch.events.append(AgentEvent(kind=EventKind.MESSAGE, message=f"{text} {i}"))
        for i in range(n)
    ]
    h.orch.state.changed()
    return out


async def read_frames(
    client, *, headers=None, until=None, limit=200, timeout=10.0, path="/api/v1/stream"
):
    """SSE frames ``(event, id, data)`` until ``until(frames)`` is true."""
    frames = []

    async def run():
        async with aconnect_sse(client, "GET", path, headers=headers or {}) as src:
            assert src.response.status_code == 200
            assert src.response.headers["content-type"].startswith("text/event-stream")
            async for sse in src.aiter_sse():
                if not sse.data:
                    continue  # the ``retry:`` advice
                frames.append((sse.event, sse.id, json.loads(sse.data)))
                if (until and until(frames)) or len(frames) >= limit:
                    return

    await asyncio.wait_for(run(), timeout)
    return frames


def event_seqs(frames) -> list[int]:
    return [e["seq"] for kind, _id, data in frames if kind == "change" for e in data["events"]]


async def test_first_frame_is_the_snapshot_then_changes_carry_patches_and_events(streamed):
    h, _api, _hub, client = streamed
    held = [e.seq for e in h.orch.events_since(0)]

    def saw_all(frames):
        return held and event_seqs(frames)[-1:] == held[-1:]

    frames = await read_frames(client, until=saw_all)
    kind, _first_id, data = frames[0]
    assert kind == "snapshot" and data["reset"] is False and data["gap"] is False
    assert data["snapshot"]["running"][0]["issue_identifier"] == "ABC-1"
    assert event_seqs(frames) == held  # the history, in order
    assert frames[-1][1].endswith(f":{held[-1]}")
    # a change of state arrives as a JSON Patch that turns the first document into the newest
    doc = data["snapshot"]
    await h.orch.send(PauseDispatch(paused=True))
    more = await read_frames(
        client,
        headers={"Last-Event-ID": frames[-1][1]},
        until=lambda fs: (
            any(d.get("snapshot", {}).get("dispatch_paused") for _k, _i, d in fs)
            or any(
                d.get("patch") and jsonpatch.apply_patch(doc, d["patch"]).get("dispatch_paused")
                for k, _i, d in fs
                if k == "change"
            )
        ),
    )
    assert more[0][0] == "snapshot"


async def test_resume_from_last_event_id_loses_and_doubles_nothing(streamed):
    h, _api, _hub, client = streamed
    emit(h, 5, "before")
    last = h.orch.events.last_seq
    frames = await read_frames(client, until=lambda fs: event_seqs(fs)[-1:] == [last])
    resume_id = frames[-1][1]
    assert resume_id.endswith(f":{last}")
    # the client is away while these happen
    missed = [e.seq for e in emit(h, 30, "while away")]
    frames = await read_frames(
        client,
        headers={"Last-Event-ID": resume_id},
        until=lambda fs: event_seqs(fs)[-1:] == missed[-1:],
    )
    assert frames[0][0] == "snapshot" and frames[0][2]["reset"] is False
    assert frames[0][1] == resume_id  # the position it resumed from
    assert event_seqs(frames) == missed
    # the same through a query parameter (a browser's EventSource cannot set the header)
    later = [e.seq for e in emit(h, 3, "later")]
    frames = await read_frames(
        client,
        path=f"/api/v1/stream?last_event_id={frames[-1][1]}",
        until=lambda fs: event_seqs(fs)[-1:] == later[-1:],
    )
    assert event_seqs(frames) == later


async def test_a_last_event_id_from_another_process_resets_and_a_bad_one_is_400(streamed):
    _h, _api, _hub, client = streamed
    frames = await read_frames(client, headers={"Last-Event-ID": "abc:99999"}, limit=1)
    assert frames[0][2]["reset"] is True
    bad = await client.get("/api/v1/stream", headers={"Last-Event-ID": "yesterday"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_last_event_id"


async def test_a_position_pushed_out_of_the_ring_is_reported_as_a_gap(streamed):
    h, _api, _hub, client = streamed
    frames = await read_frames(client, limit=1)
    epoch = frames[0][1].split(":")[0]
    emit(h, 6_000, "flood")  # more than the ring holds
    frames = await read_frames(client, headers={"Last-Event-ID": f"{epoch}:1"}, limit=1)
    assert frames[0][2]["gap"] is True and frames[0][2]["reset"] is False


async def test_a_quiet_stream_sends_keepalives(streamed):
    _h, _api, _hub, client = streamed
    frames = await read_frames(
        client, until=lambda fs: sum(k == "keepalive" for k, _i, _d in fs) >= 2
    )
    keepalives = [f for f in frames if f[0] == "keepalive"]
    assert keepalives and all(d == {} for _k, _i, d in keepalives)
    # a keepalive moves no position: the id a client resumes from stays the last change's
    before = [i for k, i, _d in frames[: frames.index(keepalives[0])] if k != "keepalive"]
    assert {i for _k, i, _d in keepalives} == {before[-1]}


async def test_a_slow_client_skips_to_the_newest_state_and_is_never_queued(streamed):
    """A client that stops reading: the server keeps at most the socket buffer for it, skips
    the snapshot versions it could not take, and still delivers every held event once."""
    h, api, hub, _client = streamed
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", api.port))
    sock.sendall(f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n\r\n".encode())
    sock.setblocking(False)
    for _ in range(100):
        if hub.connections and hub.connections[-1].transport is not None:
            break
        await asyncio.sleep(0.02)
    # small kernel buffers on both ends, so the backlog would have to live in the server
    server_sock = hub.connections[-1].transport.get_extra_info("socket")
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    emitted: list[int] = []
    for round_ in range(60):  # many versions and events while the client reads nothing
        await h.orch.send(PauseDispatch(paused=round_ % 2 == 0))
        emitted += [e.seq for e in emit(h, 40, "x" * 300)]
        await asyncio.sleep(0.02)
    stats = hub.connections[-1]
    assert not stats.closed
    produced = 60 * 40 * 300
    assert 0 < stats.buffered_max < 200_000 < produced  # a buffer and a frame, not the backlog
    final_paused = h.orch.dispatch_paused
    # now read it all
    raw = bytearray()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    want = f":{emitted[-1]}\n".encode()
    seen_at = None
    while loop.time() < deadline and (seen_at is None or loop.time() - seen_at < 1.0):
        with contextlib.suppress(TimeoutError):
            raw += await asyncio.wait_for(loop.sock_recv(sock, 65536), 0.2)
        if seen_at is None and want in raw[-300_000:]:
            seen_at = loop.time()  # then a little longer: the patch of that round may follow
    sock.close()
    frames = _parse_chunked_sse(bytes(raw))
    snapshot = frames[0][2]["snapshot"]
    versions = 1
    seqs = []
    for kind, _id, data in frames[1:]:
        if kind == "change":
            if data["patch"] is not None:
                snapshot = jsonpatch.apply_patch(snapshot, data["patch"])
                versions += 1
            seqs += [e["seq"] for e in data["events"]]
    assert [s for s in seqs if s in set(emitted)] == emitted  # all of them, once, in order
    assert snapshot["dispatch_paused"] is final_paused  # it ended on the newest state
    assert versions < 60  # it saw fewer states than there were: the ones between were skipped


def _parse_chunked_sse(raw: bytes) -> list[tuple[str, str | None, dict]]:
    _head, _, body = raw.partition(b"\r\n\r\n")
    data = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0 or len(rest) < size:
            data += rest[:size]
            break
        data += rest[:size]
        body = rest[size + 2 :]
    frames = []
    for block in data.decode().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != ":"
        )
        if "event" in fields and "data" in fields:
            try:
                frames.append((fields["event"], fields.get("id"), json.loads(fields["data"])))
            except ValueError:
                break  # the cut end of the read
    return frames


async def test_streams_end_when_the_server_stops(make_harness):
    h = make_harness([make_issue(1)])
    await h.start()
    api = ApiServer(h.orch)
    await api.start()
    async with httpx.AsyncClient(
        base_url=api.url, headers=api.control_headers(), timeout=10.0
    ) as client:
        first = asyncio.Event()

        async def follow():
            async with aconnect_sse(client, "GET", "/api/v1/stream") as src:
                async for _sse in src.aiter_sse():
                    first.set()

        task = asyncio.create_task(follow())
        await asyncio.wait_for(first.wait(), 5)
        await asyncio.wait_for(api.stop(), 5)  # not aiohttp's 60 s shutdown grace
        with contextlib.suppress(httpx.HTTPError):
            await asyncio.wait_for(task, 5)
        assert task.done()
