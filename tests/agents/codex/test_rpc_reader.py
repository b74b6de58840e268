"""The codex JSON-RPC reader on an in-memory stream: framing, fairness, timestamps."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from symphony_tui.agents.codex.rpc import BATCH_LINES, CONTROL_RUN_LINES, RpcConnection


def _line(i: int, **extra: object) -> bytes:
    msg = {"method": "item/agentMessage/delta", "params": {"delta": f"d{i}"}, **extra}
    return json.dumps(msg).encode() + b"\n"


class Sink:
    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.bad: list[str] = []
        self.stamps: list[datetime | None] = []
        self.conn: RpcConnection | None = None

    def note(self, method: str, params: dict) -> None:
        self.deltas.append(params.get("delta", method))
        assert self.conn is not None
        self.stamps.append(self.conn.emitted_at)


def _connect(reader: asyncio.StreamReader, sink: Sink, **kw) -> RpcConnection:
    conn = RpcConnection(
        reader,
        None,  # type: ignore[arg-type]  (reading only)
        on_notification=sink.note,
        on_request=lambda *a: None,
        on_malformed=sink.bad.append,
        **kw,
    )
    sink.conn = conn
    return conn


async def test_a_flooding_peer_yields_to_the_loop_between_batches():
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(b"".join(_line(i) for i in range(1_000)))
    reader.feed_eof()
    sink = Sink()
    conn = _connect(reader, sink)
    seen_by_other: list[int] = []
    conn.start()
    # queued right behind the reader's first step: it must run before the reader is done
    asyncio.get_running_loop().call_soon(lambda: seen_by_other.append(len(sink.deltas)))
    await conn.closed
    assert sink.deltas == [f"d{i}" for i in range(1_000)]
    assert seen_by_other and seen_by_other[0] <= BATCH_LINES


async def test_lines_split_anywhere_across_reads_are_rebuilt():
    data = b"".join(_line(i) for i in range(50)) + b"\r\n\n  \n" + _line(50).rstrip(b"\n")
    reader = asyncio.StreamReader()
    sink = Sink()
    conn = _connect(reader, sink)
    conn.start()
    for i in range(0, len(data), 7):  # 7-byte pieces: every boundary falls mid-line
        reader.feed_data(data[i : i + 7])
        await asyncio.sleep(0)
    reader.feed_eof()
    await conn.closed
    assert sink.deltas == [f"d{i}" for i in range(51)]  # the last one had no newline
    assert sink.bad == []


async def test_over_long_lines_are_skipped_once_whether_split_or_whole():
    long_line = b'{"method":"x","params":{"t":"' + b"z" * 300 + b'"}}\n'
    data = _line(0) + long_line + _line(1) + long_line + long_line + _line(2)
    for piece in (len(data), 64, 5):
        reader = asyncio.StreamReader()
        sink = Sink()
        conn = _connect(reader, sink, line_limit=200)
        conn.start()
        for i in range(0, len(data), piece):
            reader.feed_data(data[i : i + piece])
            await asyncio.sleep(0)
        reader.feed_eof()
        await conn.closed
        assert sink.deltas == ["d0", "d1", "d2"], piece
        assert len(sink.bad) == 3, (piece, sink.bad)
        assert all(
            "longer than 200 bytes" in b and 'starts b\'{"method":"x"' in b for b in sink.bad
        )


async def test_bad_lines_are_reported_and_what_the_stdlib_reads_still_counts():
    reader = asyncio.StreamReader()
    reader.feed_data(b"not json\n[1, 2]\n\xff\xfe\n")
    # NaN is not JSON, but the standard library reads it: such a line is not lost
    reader.feed_data(b'{"method": "m", "params": {"delta": "nan", "v": NaN}}\n')
    reader.feed_data(_line(1))
    reader.feed_eof()
    sink = Sink()
    conn = _connect(reader, sink)
    conn.start()
    await conn.closed
    assert sink.deltas == ["nan", "d1"]
    assert "invalid JSON" in sink.bad[0] and "not a JSON object" in sink.bad[1]
    assert "invalid JSON" in sink.bad[2] and len(sink.bad) == 3


async def test_emitted_at_is_the_notifications_own_time_and_only_inside_the_callback():
    ms = 1_764_000_000_123
    reader = asyncio.StreamReader()
    reader.feed_data(_line(0, emittedAtMs=ms) + _line(1, emittedAtMs=ms) + _line(2))
    reader.feed_data(_line(3, emittedAtMs=ms + 1) + _line(4, emittedAtMs="soon"))
    reader.feed_eof()
    sink = Sink()
    conn = _connect(reader, sink)
    conn.start()
    await conn.closed
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    later = datetime.fromtimestamp((ms + 1) / 1000, tz=UTC)
    assert sink.stamps == [at, at, None, later, None]
    assert conn.emitted_at is None


async def test_the_reader_waits_for_the_hosts_pace_between_batches():
    # Back-pressure: while the host says "no room", no further line is taken.
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(b"".join(_line(i) for i in range(3 * BATCH_LINES)))
    reader.feed_eof()
    sink = Sink()
    room = asyncio.Event()
    paced: list[int] = []

    async def pace() -> None:
        paced.append(len(sink.deltas))
        await room.wait()

    conn = _connect(reader, sink, pace=pace)
    conn.start()
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(sink.deltas) == BATCH_LINES and paced == [BATCH_LINES]
    room.set()
    await conn.closed
    assert sink.deltas == [f"d{i}" for i in range(3 * BATCH_LINES)]
    assert paced == [BATCH_LINES, 2 * BATCH_LINES, 3 * BATCH_LINES]


class ControlSink(Sink):
    """Records notifications and requests in one list, in the order they were handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    def note(self, method: str, params: dict) -> None:
        super().note(method, params)
        self.order.append(params.get("delta", method))

    def request(self, rid: object, method: str, params: dict) -> None:
        self.order.append(f"request {rid}")


def _control_connect(reader: asyncio.StreamReader, sink: ControlSink, pace) -> RpcConnection:
    conn = _connect(reader, sink, pace=pace)
    conn._on_request = sink.request
    return conn


def _request(rid: int) -> bytes:
    msg = {"id": rid, "method": "item/commandExecution/requestApproval", "params": {}}
    return json.dumps(msg).encode() + b"\n"


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_a_request_behind_a_backlog_is_handed_over_while_the_host_has_no_room():
    # Control first: the host's pace never returns (its inbox is full), yet a
    # request the reader holds behind 10 batches of deltas reaches the host, after every
    # one of them; what follows it waits for room.
    ahead = 10 * BATCH_LINES
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(
        b"".join(_line(i) for i in range(ahead))
        + _request(7)
        + b"".join(_line(ahead + i) for i in range(3 * BATCH_LINES))
    )
    reader.feed_eof()
    sink = ControlSink()
    room = asyncio.Event()
    paced: list[int] = []

    async def pace() -> None:
        paced.append(len(sink.order))
        await room.wait()

    conn = _control_connect(reader, sink, pace)
    conn.start()
    await _settle()
    assert sink.order == [*(f"d{i}" for i in range(ahead)), "request 7"]
    assert paced == [ahead + 1]  # the first pause comes right after the request
    room.set()
    await conn.closed
    assert sink.order == [
        *(f"d{i}" for i in range(ahead)),
        "request 7",
        *(f"d{ahead + i}" for i in range(3 * BATCH_LINES)),
    ]
    assert len(paced) > 3  # paced again once past the request


async def test_a_request_still_in_the_streams_buffer_is_read_without_pausing_for_room():
    # The reader takes 64 KB at a time: the request here is beyond the first chunk, in the
    # stream's buffer, when the reader reaches its first batch boundary.
    pad = "x" * 600
    line = lambda i: _line(i, params={"delta": f"d{i}", "pad": pad})  # noqa: E731
    ahead = 130  # about 85 KB of deltas: more than one chunk, fewer than CONTROL_RUN_LINES
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(b"".join(line(i) for i in range(ahead)) + _request(8) + line(ahead))
    reader.feed_eof()
    sink = ControlSink()
    room = asyncio.Event()
    conn = _control_connect(reader, sink, room.wait)  # each pause waits for room
    conn.start()
    await _settle()
    assert sink.order == [*(f"d{i}" for i in range(ahead)), "request 8"]
    room.set()
    await conn.closed
    assert sink.order[-1] == f"d{ahead}"


async def test_a_peer_whose_every_line_is_a_request_still_pauses_between_runs():
    # The early read is bounded: CONTROL_RUN_LINES lines at most between two pauses.
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(b"".join(_request(i) for i in range(3 * CONTROL_RUN_LINES)))
    reader.feed_eof()
    sink = ControlSink()
    room = asyncio.Event()
    conn = _control_connect(reader, sink, room.wait)  # each pause waits for room
    conn.start()
    await _settle()
    assert len(sink.order) == CONTROL_RUN_LINES
    room.set()
    await conn.closed
    assert sink.order == [f"request {i}" for i in range(3 * CONTROL_RUN_LINES)]


async def test_a_request_reaching_the_stream_while_the_reader_waits_hurries_it():
    # The reader waits for its pace (its share of the scheduler) when a request arrives in
    # the stream's buffer: it asks the host to hurry (SessionHost.hurry), and once let go it
    # reads on to the request without waiting for another share.
    reader = asyncio.StreamReader(limit=2**20)
    reader.feed_data(b"".join(_line(i) for i in range(2 * BATCH_LINES)))
    sink = ControlSink()
    room = asyncio.Event()
    paced: list[int] = []
    hurried: list[int] = []

    async def pace() -> None:
        paced.append(len(sink.order))
        await room.wait()
        room.clear()  # one share per wait

    def hurry() -> None:
        hurried.append(len(sink.order))
        room.set()

    conn = _connect(reader, sink, pace=pace, hurry=hurry)
    conn._on_request = sink.request
    conn.start()
    await _settle()
    assert paced == [BATCH_LINES] and hurried == []
    reader.feed_data(_line(2 * BATCH_LINES))  # no request in it: no hurry
    await _settle()
    assert hurried == []
    reader.feed_data(_request(9) + b"".join(_line(100 + i) for i in range(BATCH_LINES)))
    await _settle()
    assert hurried == [BATCH_LINES]
    # let go: the rest of the deltas ahead of the request, the request, then a pause
    assert sink.order == [*(f"d{i}" for i in range(2 * BATCH_LINES + 1)), "request 9"]
    assert paced == [BATCH_LINES, 2 * BATCH_LINES + 2]
    reader.feed_eof()
    room.set()
    await _settle()
    room.set()
    await conn.closed
    assert sink.order[-BATCH_LINES:] == [f"d{100 + i}" for i in range(BATCH_LINES)]
    await conn.aclose()
    assert "feed_data" not in vars(reader)  # the stream's own method again
