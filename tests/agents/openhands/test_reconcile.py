"""Event reconciliation: dedupe by id, order by timestamp then id, malformed counted,
``events/search`` paging, and the socket's readiness, reconnect and final close codes."""

from __future__ import annotations

import asyncio
import json

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.openhands.client import OpenHandsClient
from symphony_tui.agents.openhands.reconcile import SeenEvents
from symphony_tui.agents.openhands.stream import EventStream
from symphony_tui.agents.reconnect import StreamOptions

from .fake_server import CID, FakeEventServer, ev, status_ev

FAST = StreamOptions(readiness_timeout_s=5, backoff_initial_s=0.01, backoff_max_s=0.05)


# ---------------------------------------------------------------- SeenEvents


def test_merge_dedupes_and_orders_by_timestamp_then_id() -> None:
    log = SeenEvents()
    a, b, c = ev(1), ev(2), ev(3)
    tie_late_id = ev(9, at_ms=20)  # same timestamp as e002, larger id
    assert log.accept(b)
    new = log.merge([c, tie_late_id, a, b, c])
    assert [e["id"] for e in new] == ["e001", "e009", "e003"]
    assert log.merge([a, b, c]) == []
    assert len(log) == 4


def test_malformed_items_are_counted_not_fatal() -> None:
    log = SeenEvents()
    assert log.parse("{not json") is None
    assert log.parse(b"\xff\xfe") is None
    assert log.parse(json.dumps([1, 2])) is None
    assert log.parse(json.dumps({"id": "x"})) is None  # no kind
    assert log.parse(json.dumps({"id": "", "kind": "MessageEvent"})) is None
    assert log.merge([{"kind": "MessageEvent"}, "junk", ev(1)]) == [ev(1)]
    assert log.malformed == 7
    assert "not an event object" in log.last_malformed
    assert log.parse(json.dumps(ev(2))) == ev(2)


def test_unparsable_timestamps_sort_first_and_are_kept() -> None:
    log = SeenEvents()
    odd = {**ev(5), "timestamp": "yesterday"}
    assert [e["id"] for e in log.merge([ev(1), odd])] == ["e005", "e001"]


# ---------------------------------------------------------------- paging


async def test_search_all_follows_next_page_id() -> None:
    async with FakeEventServer(page_size=2) as srv:
        srv.events = [ev(i) for i in range(1, 6)]
        client = OpenHandsClient(srv.base_url)
        try:
            pages = [p async for p in client.search_all(CID)]
        finally:
            await client.aclose()
    assert [[e["id"] for e in p] for p in pages] == [["e001", "e002"], ["e003", "e004"], ["e005"]]
    assert [c.get("page_id") for c in srv.search_calls] == [None, ["e003"], ["e005"]]


# ---------------------------------------------------------------- stream


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, bool]] = []
        self.notices: list[tuple[str, str]] = []
        self.failed: list[AgentError] = []
        self.changed = asyncio.Event()

    def on_event(self, event: dict, replay: bool) -> None:
        self.events.append((event["id"], replay))
        self.changed.set()

    def on_notice(self, kind: str, message: str) -> None:
        self.notices.append((kind, message))
        self.changed.set()

    def on_failed(self, error: AgentError) -> None:
        self.failed.append(error)
        self.changed.set()

    async def until(self, pred, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not pred():
                self.changed.clear()
                await self.changed.wait()

    def ids(self, *, replay: bool | None = None) -> list[str]:
        return [i for i, r in self.events if replay is None or r == replay]


def make_stream(srv: FakeEventServer, rec: Recorder, **kw) -> tuple[EventStream, OpenHandsClient]:
    client = OpenHandsClient(srv.base_url, api_key=kw.pop("api_key", None))
    stream = EventStream(
        client,
        CID,
        ws_auth=kw.pop("ws_auth", "first_frame"),
        on_event=rec.on_event,
        on_notice=rec.on_notice,
        on_failed=rec.on_failed,
        options=kw.pop("options", FAST),
    )
    return stream, client


async def test_attach_waits_for_readiness_and_replays_history_in_order() -> None:
    rec = Recorder()
    async with FakeEventServer(page_size=2) as srv:
        srv.events = [ev(3), ev(1), status_ev(2, "running"), ev(4)]
        # A live event and a malformed frame before the state event: neither is fatal.
        srv.pre_ready_frames = [json.dumps(ev(5)), "garbage"]
        stream, client = make_stream(srv, rec)
        try:
            await stream.attach()
            assert rec.ids(replay=True) == ["e001", "e002", "e003", "e004", "e005", "state-1"]
            await srv.push(ev(6))
            await rec.until(lambda: "e006" in rec.ids())
            assert rec.ids(replay=False) == ["e006"]
            assert stream.log.malformed == 1
            assert [k for k, _ in rec.notices] == ["malformed"]
        finally:
            await stream.aclose()
            await client.aclose()


async def test_drop_reconnects_and_reconciles_without_loss_or_duplicates() -> None:
    rec = Recorder()
    async with FakeEventServer(page_size=2) as srv:
        srv.events = [ev(1), ev(2)]
        stream, client = make_stream(srv, rec)
        try:
            await stream.attach()
            await srv.push(ev(3))
            await rec.until(lambda: "e003" in rec.ids())
            # Persisted but never sent live (the socket is about to drop), listed out of
            # order on purpose; e006 shares e004's timestamp and sorts by id after it.
            srv.events += [ev(5), ev(4), ev(6, at_ms=40)]
            srv.drop()
            await srv.connected.wait()
            await rec.until(lambda: "reconnected" in [k for k, _ in rec.notices])
            await srv.push(ev(7))
            await srv.push("{broken")
            await rec.until(lambda: "e007" in rec.ids())
            live = [i for i in rec.ids(replay=False) if i.startswith("e")]
            assert live == ["e003", "e004", "e006", "e005", "e007"]
            assert len(rec.ids()) == len(set(rec.ids()))
            assert stream.reconnects == 1
            assert stream.log.malformed == 1
            assert rec.failed == []
        finally:
            await stream.aclose()
            await client.aclose()


async def test_final_close_code_stops_without_retry() -> None:
    rec = Recorder()
    async with FakeEventServer() as srv:
        stream, client = make_stream(srv, rec)
        try:
            await stream.attach()
            srv.close_code = 4004
            srv.drop()
            await rec.until(lambda: bool(rec.failed))
            assert "4004" in str(rec.failed[0])
            assert srv.auth_seen == ["none", "none"]  # one retry met the final code, no more
        finally:
            await stream.aclose()
            await client.aclose()


async def test_retries_are_capped() -> None:
    rec = Recorder()
    opts = StreamOptions(
        readiness_timeout_s=2, backoff_initial_s=0.01, backoff_max_s=0.02, max_attempts=3
    )
    async with FakeEventServer() as srv:
        stream, client = make_stream(srv, rec, options=opts)
        try:
            await stream.attach()
            srv.close_code = 1011  # not final: retried, and each retry is closed again
            srv.drop()
            await rec.until(lambda: bool(rec.failed))
        finally:
            await stream.aclose()
            await client.aclose()
    assert "3 reconnect attempts failed" in str(rec.failed[0])
    assert [k for k, _ in rec.notices].count("reconnecting") == 3


@pytest.mark.parametrize("mode", ["first_frame", "query", "header"])
async def test_websocket_auth_modes(mode: str) -> None:
    rec = Recorder()
    async with FakeEventServer(api_key="k-123") as srv:
        stream, client = make_stream(srv, rec, api_key="k-123", ws_auth=mode)
        try:
            await stream.attach()
        finally:
            await stream.aclose()
            await client.aclose()
    assert srv.auth_seen == [mode]


async def test_wrong_key_is_a_final_error_on_attach() -> None:
    rec = Recorder()
    async with FakeEventServer(api_key="right") as srv:
        stream, client = make_stream(srv, rec, api_key="wrong", ws_auth="first_frame")
        try:
            with pytest.raises(AgentError, match="4001"):
                await stream.attach()
        finally:
            await stream.aclose()
            await client.aclose()


async def test_retries_wait_the_shared_jittered_backoff() -> None:
    # One reconnect helper for both HTTP-server backends, with jitter: the
    # delays come from the injected random source (never above the capped nominal delay).
    from symphony_tui.agents.reconnect import Reconnector

    rec = Recorder()
    opts = StreamOptions(
        readiness_timeout_s=2, backoff_initial_s=0.02, backoff_max_s=0.04, max_attempts=3
    )
    draws = iter([0.0, 0.5, 1.0])
    async with FakeEventServer() as srv:
        stream, client = make_stream(srv, rec, options=opts)
        stream.reconnector = Reconnector(
            opts.backoff,
            "event socket",
            notice=lambda message: rec.notices.append(("reconnecting", message)),
            draw=lambda: next(draws),
        )
        try:
            await stream.attach()
            srv.close_code = 1011
            srv.drop()
            await rec.until(lambda: bool(rec.failed))
        finally:
            await stream.aclose()
            await client.aclose()
    assert stream.reconnector.delays == [0.02, 0.03, 0.02]  # 0.02, 0.04*(1-.25), 0.04*(1-.5)
    said = [m for k, m in rec.notices if k == "reconnecting"]
    assert [m.rsplit(" in ", 1)[1] for m in said] == ["0.02s", "0.03s", "0.02s"]
