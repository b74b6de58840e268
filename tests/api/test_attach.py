"""Attached consoles (RemotePort on the stream): link states and backoff, several consoles
on one scheduler, an approval answered once."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json
import os
import signal
import socket
import ssl
import sys
from datetime import datetime

import httpx
import pytest

from symphony_tui.api import announce
from symphony_tui.api.client import (
    BACKOFF_CAP_S,
    RemoteError,
    RemotePort,
    backoff_s,
    link_reason,
)
from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import StreamHub
from symphony_tui.domain.commands import Approve
from tests.api.test_http_api import asking
from tests.helpers import until
from tests.scheduler.conftest import make_issue


@pytest.fixture
async def served(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, stream=StreamHub(h.orch, interval_s=0.05, keepalive_s=0.2))
    await api.start()
    yield h, api
    await api.stop()


def test_backoff_is_jittered_and_capped():
    assert backoff_s(0, rng=lambda lo, hi: hi) == 0.5
    assert backoff_s(3, rng=lambda lo, hi: hi) == 4.0
    assert backoff_s(30, rng=lambda lo, hi: hi) == BACKOFF_CAP_S
    assert backoff_s(5, rng=lambda lo, hi: lo) == 0.0
    draws = {round(backoff_s(4), 6) for _ in range(50)}
    assert len(draws) > 10 and all(0 <= d <= 8.0 for d in draws)


# A wall-clock bound on a shared 2-core machine: rerun (twice at most) rather than
# mistake a loaded host for a regression; a real regression fails all three.
def test_a_link_lost_to_a_timeout_says_so_in_words():
    """httpx's timeouts carry no message: the link's error (the projects table's "Last
    error", the header) says what happened, not ``ReadTimeout``."""
    remote = RemotePort("http://127.0.0.1:9")
    remote._lost(httpx.ReadTimeout(""))
    assert remote.link().error == (
        "no answer in time (the scheduler is busy, stopped or unreachable)"
    )
    remote._lost(httpx.ConnectError("All connection attempts failed"))
    assert remote.link().error == "All connection attempts failed"  # no cause: as it came


def test_a_link_s_reason_is_plain_words_with_the_address_not_errno_text():
    def failed(url: str, cause: OSError, kind: type[httpx.TransportError] = httpx.ConnectError):
        exc = kind(str(cause), request=httpx.Request("GET", url))
        exc.__cause__ = cause
        return link_reason(exc)

    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('127.0.0.1', 9)")
    assert failed("http://127.0.0.1:9/api/v1/stream", refused) == (
        "connection refused at 127.0.0.1:9 "
        "(nothing listens there: the scheduler stopped, or a wrong port)"
    )
    unreachable = OSError(errno.EHOSTUNREACH, "No route to host")
    assert failed("http://10.0.0.7:8080/", unreachable).startswith("no route to 10.0.0.7:8080 (")
    unresolved = socket.gaierror(-2, "Name or service not known")
    assert failed("https://build.invalid:8443/", unresolved) == (
        "name not resolved: build.invalid (Name or service not known)"
    )
    timed_out = TimeoutError(errno.ETIMEDOUT, "Connection timed out")
    assert failed("http://[::1]:9/", timed_out).startswith("timed out connecting to [::1]:9 (")
    reset = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    assert failed("http://127.0.0.1:9/", reset, httpx.ReadError).startswith(
        "connection reset by 127.0.0.1:9 ("
    )
    silent = httpx.ConnectTimeout("", request=httpx.Request("GET", "http://10.0.0.7:80/"))
    assert link_reason(silent).startswith("timed out connecting to 10.0.0.7:80 (")
    for said in (refused, unreachable, unresolved, timed_out, reset):
        assert "Errno" not in failed("http://127.0.0.1:9/", said)


async def test_https_to_a_plain_http_server_says_the_tls_handshake_failed():
    """An ``https://`` address whose server speaks plain http: OpenSSL's error carries
    errno 1, which read "Operation not permitted"; the reason says what failed."""

    async def plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(plain_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError) as caught:
                await client.get(f"https://127.0.0.1:{port}/api/v1/stream")
    finally:
        server.close()
    assert link_reason(caught.value) == (
        f"TLS handshake with 127.0.0.1:{port} failed "
        "(the server may speak plain http: try http:// instead of https://)"
    )
    refused = ssl.SSLCertVerificationError(1, "certificate verify failed")
    refused.verify_message = "self-signed certificate"
    exc = httpx.ConnectError("", request=httpx.Request("GET", "https://ci.example:8443/"))
    exc.__cause__ = refused
    assert link_reason(exc) == (
        "TLS handshake with ci.example:8443 failed: its certificate is refused "
        "(self-signed certificate; a self-signed certificate, or one for another name)"
    )


async def test_a_connection_closed_without_an_answer_says_so_in_words():
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.RemoteProtocolError) as caught:
                await client.get(f"http://127.0.0.1:{port}/api/v1/stream")
    finally:
        server.close()
    assert link_reason(caught.value) == "the scheduler closed the connection without answering"
    cut = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
    assert link_reason(cut) == "the connection closed mid-answer"


async def test_a_refused_connection_says_nothing_listens_there():
    """httpx says "All connection attempts failed" whatever the system said: the link's
    error names the system's reason."""
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        remote = RemotePort(f"http://127.0.0.1:{port}")
        with pytest.raises(RemoteError) as refused:
            await remote.refresh_once()
        await remote.close()
    assert f"connection refused at 127.0.0.1:{port} (nothing listens there" in str(refused.value)


async def test_link_goes_connecting_live_reconnecting_stale_and_back(served):
    _h, api = served
    now = [1000.0]
    remote = RemotePort(api.url, control=api.control_token, stale_after_s=5.0, clock=lambda: now[0])
    assert remote.link().state == "connecting" and remote.link().age_s is None
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: remote.link().state == "live")
        assert remote.snapshot().approvals[0].id == "ap-1"
        assert remote.link().via == "stream"
        await api.stop()  # the scheduler's API goes away
        await until(lambda: remote.link().state == "reconnecting")
        await until(lambda: remote.link().error is not None)
        assert remote.link().state == "reconnecting"
        assert remote.snapshot().tracker_error is None  # the link's trouble, not the tracker's
        now[0] += 6.0  # nothing heard for longer than stale_after_s
        link = remote.link()
        assert link.state == "stale" and link.age_s == pytest.approx(6.0)
        await api.start()  # back (another port: point the client there)
        remote._client.base_url = api.url
        await until(lambda: remote.link().state == "live", timeout=20)
        assert remote.link().age_s < 1.0
    finally:
        await remote.close()
        task.cancel()


async def test_a_server_without_the_stream_is_polled(served):
    _h, api = served

    async def no_stream(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/stream":
            return httpx.Response(404, json={"error": {"code": "not_found", "message": "-"}})
        async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as real:
            got = await real.request(request.method, request.url.path, params=request.url.params)
            return httpx.Response(got.status_code, content=got.content, headers=got.headers)

    client = httpx.AsyncClient(
        base_url=api.url, headers=api.control_headers(), transport=httpx.MockTransport(no_stream)
    )
    remote = RemotePort(api.url, control=api.control_token, client=client)
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: remote.link().state == "live")
        assert remote.mode == "poll" and remote.snapshot().approvals
    finally:
        await remote.close()
        task.cancel()


async def test_many_consoles_see_one_state_and_an_approval_is_answered_once(served):
    h, api = served
    consoles = [RemotePort(api.url, control=api.control_token) for _ in range(3)]
    tasks = [asyncio.create_task(c.run()) for c in consoles]
    try:
        await until(lambda: all(c.snapshot().approvals and c.events_since(0) for c in consoles))
        assert {c.snapshot().approvals[0].id for c in consoles} == {"ap-1"}
        assert len({c.events_since(0)[-1].seq for c in consoles}) == 1
        first = await consoles[0].send(Approve(approval_id="ap-1"))
        assert first.ok
        await until(lambda: not any(c.snapshot().approvals for c in consoles))
        second = await consoles[1].send(Approve(approval_id="ap-1"))
        assert not second.ok and "no pending approval" in second.message
        async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as raw:
            r = await raw.post("/api/v1/commands", json={"type": "approve", "approval_id": "ap-1"})
        assert r.status_code == 409
        await h.settle()
        await until(
            lambda: all(c.events_since(0)[-1].seq == h.orch.events.last_seq for c in consoles)
        )
    finally:
        for c in consoles:
            await c.close()
        for t in tasks:
            t.cancel()


def test_the_header_never_shows_stale_data_as_live():
    from datetime import UTC, datetime

    from symphony_tui.api.client import LinkStatus
    from symphony_tui.console.tones import Tones
    from symphony_tui.console.widgets.status import status_text
    from symphony_tui.domain import Snapshot

    snap = Snapshot(generated_at=datetime.now(UTC))
    now = datetime.now(UTC)

    def header(link):
        return status_text(snap, now, Tones(), link).plain

    assert header(LinkStatus("connecting", None, "stream")).startswith("◌ connecting │")
    assert header(LinkStatus("live", 0.4, "stream")).startswith("● live │")
    assert header(LinkStatus("reconnecting", 4.0, "stream")).startswith(
        "◌ scheduler link lost · reconnecting · 4s old"
    )
    stale = header(LinkStatus("stale", 75.0, "stream"))
    assert stale.startswith("✗ scheduler link lost · STALE · 1m15s old") and "live" not in stale
    assert "live" not in header(None) and "STALE" not in header(None)  # a local scheduler


async def _stream_server(stream):
    """An aiohttp server on 127.0.0.1 answering ``/api/v1/stream`` with ``stream``:
    ``(runner, port)``; the caller cleans the runner up."""
    from aiohttp import web

    app = web.Application()
    app.router.add_get("/api/v1/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


async def test_the_link_is_not_live_before_the_first_snapshot_arrives():
    """A connection that has only sent its ``retry:`` advice has shown no state yet: the
    console says connecting, not live with an empty snapshot."""
    from aiohttp import web

    release, finished = asyncio.Event(), asyncio.Event()

    async def stream(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"retry: 2000\n\n")
        await release.wait()
        frame = '{"snapshot":{"generated_at":"2026-01-01T00:00:00Z"},"version":1}'
        await response.write(f"event: snapshot\nid: 0:0\ndata: {frame}\n\n".encode())
        await finished.wait()
        return response

    runner, port = await _stream_server(stream)
    remote = RemotePort(f"http://127.0.0.1:{port}")
    task = asyncio.create_task(remote.run())
    try:
        await asyncio.sleep(0.5)  # the advice has long arrived
        assert remote.link().state == "connecting"
        release.set()
        await until(lambda: remote.link().state == "live")
        assert remote.last_event_id == "0:0"
    finally:
        await remote.close()
        task.cancel()
        finished.set()
        await runner.cleanup()


async def test_frames_read_together_are_taken_one_loop_turn_each():
    """Frames that reach the console in one read are applied one per turn of the event
    loop: the console's keys and frames wait for one frame's patch, not a whole burst's."""
    from aiohttp import web

    finished = asyncio.Event()

    async def stream(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        frames = [
            'event: snapshot\nid: 0:0\ndata: {"snapshot":{"generated_at":"2026-01-01T00:00:00Z"}}\n\n'
        ]
        for seq in range(1, 6):
            event = {"kind": "notification", "message": f"n{seq}", "seq": seq}
            frames.append(
                f"event: change\nid: 0:{seq}\ndata: {json.dumps({'events': [event]})}\n\n"
            )
        await response.write("".join(frames).encode())  # one write, one read
        await finished.wait()
        return response

    runner, port = await _stream_server(stream)
    order: list[str] = []
    remote = RemotePort(
        f"http://127.0.0.1:{port}", on_events=lambda events: order.extend(e.message for e in events)
    )

    async def other_work() -> None:
        while True:
            order.append("loop")
            await asyncio.sleep(0)

    task, other = asyncio.create_task(remote.run()), asyncio.create_task(other_work())
    try:
        await until(lambda: "n5" in order)
        frames = [i for i, what in enumerate(order) if what.startswith("n")]
        between = order[frames[0] : frames[-1]]
        assert between.count("loop") >= 4, between  # other work ran between every two
    finally:
        other.cancel()
        finished.set()  # the response ends while its client still reads it: no write fails
        await asyncio.sleep(0.1)
        await remote.close()
        task.cancel()
        await runner.cleanup()


async def test_a_scheduler_that_stops_says_so_and_the_console_link_ends(served):
    """The stream's last frame says the scheduler stops: the link reads ``stopped`` (with
    when and why), nothing live is left in the snapshot, commands are refused, and the
    client stops reconnecting (``run`` returns)."""
    _h, api = served
    remote = RemotePort(api.url, control=api.control_token)
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: remote.link().state == "live" and remote.snapshot().running)
        assert remote.snapshot().approvals and not remote.stopped
        await api.stop(ending="stopped by bob@laptop")
        await until(lambda: remote.link().state == "stopped")
        link = remote.link()
        assert link.error == "stopped by bob@laptop" and link.stopped_at is not None
        snap = remote.snapshot()
        assert snap.running == () and snap.approvals == () and snap.retrying == ()
        # nothing holds them now: idle, which the next start dispatches
        assert snap.issues and {row.claim for row in snap.issues} == {"unclaimed"}
        await asyncio.wait_for(task, timeout=5)  # no reconnecting
        refused = await remote.send(Approve(approval_id="ap-1"))
        assert not refused.ok and "stopped" in refused.message
    finally:
        await remote.close()
        task.cancel()


async def test_a_polling_console_is_told_the_scheduler_stopped_not_left_stale(served):
    """``--poll`` gets no stream frame: a poll during shutdown is answered 503
    ``scheduler_stopping`` and the server waits for that poll, so the link reads stopped
    with the reason, and polling ends."""
    _h, api = served
    remote = RemotePort(api.url, control=api.control_token, mode="poll")
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: remote.link().state == "live" and remote.snapshot().running)
        await api.stop(ending="stopped by bob@laptop")
        await until(lambda: remote.link().state == "stopped")
        link = remote.link()
        assert link.error == "stopped by bob@laptop" and link.stopped_at is not None
        assert remote.snapshot().running == ()
        await asyncio.wait_for(task, timeout=5)  # polling ended
    finally:
        await remote.close()
        task.cancel()


async def test_the_stopping_frame_is_the_streams_last(served):
    _h, api = served
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
    async with (
        httpx.AsyncClient(base_url=api.url, timeout=10) as client,
        client.stream("GET", "/api/v1/stream", headers=headers) as response,
    ):
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("retry:")
        stopper = asyncio.create_task(api.stop(ending="shutting down"))
        rest = [line async for line in lines]
        await stopper
    kinds = [line.split(": ", 1)[1] for line in rest if line.startswith("event: ")]
    assert kinds[-1] == "stopping" and kinds.count("stopping") == 1
    data = json.loads(rest[rest.index("event: stopping") + 1].removeprefix("data: "))
    assert data["reason"] == "shutting down" and datetime.fromisoformat(data["at"])


class _Owner:
    """``announce.Owner`` of a real child process."""

    def __init__(self, proc) -> None:
        self.proc = proc

    def serving(self) -> bool:
        return self.proc.returncode is None and not announce.ended(self.proc.pid)

    def ended(self) -> bool:
        return not self.serving()


async def test_on_this_machine_a_gone_process_is_stopped_and_a_sigstopped_one_is_stale(
    served, monkeypatch
):
    """A scheduler that vanished without a word (its API stopped with no last frame, its
    process gone) reads ``stopped``; one that is only frozen (SIGSTOP) stays ``stale``."""
    _h, api = served
    monkeypatch.setattr("symphony_tui.api.client.backoff_s", lambda attempt: 0.05)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    now = [1000.0]
    remote = RemotePort(
        api.url, control=api.control_token, stale_after_s=5.0, clock=lambda: now[0],
        owner=_Owner(proc),
    )  # fmt: skip
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: remote.link().state == "live")
        os.kill(proc.pid, signal.SIGSTOP)
        await api.stop()  # the link is lost, no last frame
        await until(lambda: remote.link().error is not None)
        now[0] += 6.0
        await asyncio.sleep(0.3)  # a few more failed attempts, each asking the process
        assert remote.link().state == "stale" and not remote.stopped
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
        await until(lambda: remote.link().state == "stopped")
        assert remote.link().error == "its process no longer serves"
        assert await asyncio.wait_for(remote.wait_stopped(), 5) is True
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await remote.close()
        task.cancel()


def test_an_owner_note_removed_means_its_api_no_longer_serves(tmp_path):
    me = os.getpid()
    owner = announce.Owner.of(tmp_path, me)
    assert not owner.serving() and not owner.ended()  # alive, but no note: not serving
    (tmp_path / f"{me}.json").write_text("{}")
    assert owner.serving()
    assert announce.ended(2**22 + 12345)  # no such process


async def _token_api(make_harness, notes, token: str) -> ApiServer:
    """A started harness (one issue, asking) served on loopback with bearer ``token``, kept
    beside its API note in ``notes`` as a console's own API keeps it."""
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    api = ApiServer(
        h.orch,
        token=token,
        announce_dir=notes,
        announce_extra={"token_file": str(announce.write_token(notes, token))},
    )
    await api.start()
    return api


async def test_attach_by_the_printed_address_finds_the_token_this_user_keeps(
    make_harness, tmp_path, monkeypatch
):
    """A console's own API has a generated token kept beside its note: ``attach
    http://127.0.0.1:PORT`` (what ``ps`` and the detach line print) works without it."""
    from symphony_tui.api.attach import open_attach

    notes = tmp_path / "api"
    monkeypatch.setattr(announce, "default_dir", lambda: notes)
    api = await _token_api(make_harness, notes, "t0ken-" + "x" * 30)
    try:
        attachment = await asyncio.to_thread(open_attach, api.url)
        try:
            assert attachment.port().snapshot() is not None
        finally:
            attachment.close()
        # the token it generated is the only one it accepts: sent whatever else is given
        # (``--token-env``'s variable may hold another scheduler's)
        attachment = await asyncio.to_thread(open_attach, api.url, token="wrong")
        try:
            assert attachment.token != "wrong"
            assert attachment.port().snapshot() is not None
        finally:
            attachment.close()
    finally:
        await api.stop()


async def test_attach_over_ssh_sends_the_bearer_token_the_discovery_read(
    make_harness, tmp_path, monkeypatch
):
    """``attach ssh://host`` to a console's scheduler: its generated bearer token, kept
    beside its note on that host, is read by the ssh discovery and sent on every request.
    A stand-in ``ssh`` runs the discovery script here, as sshd would; the forward is
    replaced by a direct loopback client (tests/api/test_remote_attach.py has real sshd)."""
    from symphony_tui.api.attach import open_attach

    fake = tmp_path / "fake-ssh"
    fake.write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')  # as sshd: one command line
    fake.chmod(0o755)
    monkeypatch.setenv("SYMPHONY_SSH", str(fake))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    class Forward:  # the tunnel's interface, straight to the API's loopback port
        def __init__(self, target, api_port):
            self.base_url = f"http://127.0.0.1:{api_port}"

        def open(self):
            return self

        def client(self, *, timeout_s=10.0):
            return httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)

        def close(self):
            pass

    monkeypatch.setattr("symphony_tui.api.attach.SshTunnel", Forward)
    notes = announce.default_dir()
    token = "t0ken-" + "y" * 30
    api = await _token_api(make_harness, notes, token)
    try:
        attachment = await asyncio.to_thread(open_attach, "ssh://me@box")
        try:
            assert attachment.token == token
            assert attachment.port().snapshot() is not None
        finally:
            attachment.close()
    finally:
        await api.stop()


async def test_what_happens_while_the_scheduler_stops_reaches_the_console_before_the_last_frame(
    make_harness,
):
    """The runs' ends (written while the scheduler stops) and the state it stops in are sent
    before the ``stopping`` frame, even when the stream would not have looked again yet."""
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, stream=StreamHub(h.orch, interval_s=30, keepalive_s=30))
    await api.start()
    remote = RemotePort(api.url, control=api.control_token)
    task = asyncio.create_task(remote.run())
    try:
        await until(
            lambda: (
                remote.link().state == "live"
                and remote.snapshot().running
                and remote.events_since(0)
            )
        )
        last_seen = remote.events_since(0)[-1].seq
        await h.orch.shutdown()
        held = [e.seq for e in h.orch.events_since(0, limit=10_000)]
        assert held[-1] > last_seen  # the stop wrote events the console has not seen
        await api.stop(ending="stopped by bob@laptop")
        await until(lambda: remote.link().state == "stopped")
        assert [e.seq for e in remote.events_since(0)][-1] == held[-1]
    finally:
        await remote.close()
        task.cancel()
        await api.stop()


def test_a_new_note_clears_what_killed_schedulers_left(tmp_path):
    """``kill -9`` leaves a scheduler's note, token and control files behind: the next
    scheduler that writes its note removes them; a live one's stay."""
    import subprocess

    notes = tmp_path / "api"
    notes.mkdir()
    gone = 2**22 + 12345  # no such process
    left = [notes / f"{gone}{suffix}" for suffix in (".json", ".token", ".control", ".tmp")]
    for path in left:
        path.write_text("{}")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        kept = [notes / f"{live.pid}.json", notes / f"{live.pid}.token"]
        for path in kept:
            path.write_text("{}")
        (notes / "README").write_text("not a note")
        mine = announce.write(notes, host="127.0.0.1", port=1, token=False)
        assert not [p for p in left if p.exists()]
        assert all(p.exists() for p in kept) and mine.exists() and (notes / "README").exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("path", ["stream_once", "refresh_once"])
@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("wrong", "401: the scheduler refused the API token sent"),
        (None, "needs its API token ($SYMPHONY_API_TOKEN, or --token-env VAR)"),
    ],
)
async def test_a_refused_link_says_whether_the_token_sent_was_wrong_or_none_was_sent(
    token, said, path
):
    """The stream and the polling (``attach --poll``, attach's first read) alike."""

    def refuse(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "unauthorized", "message": "send the API token"}}
        return httpx.Response(401, json=body)

    client = httpx.AsyncClient(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(refuse))
    remote = RemotePort("http://127.0.0.1:9", token=token, client=client)
    with pytest.raises(RemoteError) as refused:
        await getattr(remote, path)()
    line = str(refused.value)
    assert line.startswith("http://127.0.0.1:9: 401: ") and said in line and "\n" not in line
    remote._lost(refused.value)
    assert remote.link().refused
    await remote.close()


async def test_a_fixed_address_still_answering_that_it_stops_is_not_a_new_scheduler(
    make_harness, tmp_path, monkeypatch
):
    """A console attached by a fixed address watches it once its scheduler stopped; that
    scheduler's API answering 503 ``scheduler_stopping`` while it shuts down is the
    stopped one, not a new one to move to."""
    from symphony_tui.api.attach import address_finder, open_attach
    from symphony_tui.api.follow import FollowingPort

    monkeypatch.setattr(announce, "default_dir", lambda: tmp_path / "api")
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    hub = StreamHub(h.orch, interval_s=0.05, keepalive_s=0.2)
    api = ApiServer(h.orch, stream=hub)
    await api.start()
    attachment = await asyncio.to_thread(open_attach, api.url)
    assert attachment.started_at is not None
    find = address_finder(api.url)
    answers: list = []

    def look(current):
        answers.append(find(current))
        return answers[-1]

    follow = FollowingPort(attachment, look, watching=api.url, every_s=0.05)
    task = asyncio.create_task(follow.run())
    try:
        await until(lambda: follow.link().state == "live")
        hub.stopping("stopped by SIGTERM")  # its API still serves, answering 503
        await until(lambda: follow.stopped)
        await until(lambda: len(answers) >= 3, what="three looks at the address")
        assert answers[:3] == [None, None, None]
        assert follow.stopped and follow.moves == 0 and follow.port.base_url == api.url
        async with httpx.AsyncClient(base_url=api.url) as client:
            polled = await client.get("/api/v1/snapshot")
        assert polled.status_code == 503  # it was asked while it said it stops
        hint = follow.link().hint or ""
        assert hint.startswith(f"watching {api.url} for it to start there again")
    finally:
        await follow.close()
        task.cancel()
        await api.stop()


def test_a_generated_token_goes_before_one_given_and_the_variable_fills_in(monkeypatch):
    """A console's scheduler accepts only the token it generated (kept beside its note):
    that one is sent, whatever ``--token-env`` holds; a scheduler whose note offers none
    (its token is in its operator's variable) gets ``$SYMPHONY_API_TOKEN``."""
    from symphony_tui.api import announce, attach, discovery

    note = {"pid": 4242, "port": 9, "workflow": "/p/WORKFLOW.md"}
    monkeypatch.setattr(attach, "_local_note", lambda url: note)
    monkeypatch.setattr(announce, "read_token", lambda n: "generated")
    assert attach._url_attachment("http://127.0.0.1:9", "meant-for-another", "stream").token == (
        "generated"
    )
    monkeypatch.setattr(announce, "read_token", lambda n: None)
    assert attach._url_attachment("http://127.0.0.1:9", "given", "stream").token == "given"

    monkeypatch.setenv("SYMPHONY_API_TOKEN", "from-the-variable")
    endpoint = discovery.Endpoint("/p/WORKFLOW.md", "/p/WORKFLOW.md", "http://127.0.0.1:9", 9)
    assert attach.workflow_attachment(endpoint).token == "from-the-variable"
    with_token = dataclasses.replace(endpoint, token="generated")
    assert attach.workflow_attachment(with_token).token == "generated"
