"""Bearer-token authentication (docs/http-api.md, "Authentication"): who needs a token, the
refusal to serve without one, 401 on every path (the stream too), nothing of the token in
the log; the Host / Origin checks still come first."""

from __future__ import annotations

import logging

import httpx
import pytest

from symphony_tui.api.auth import TokenError, resolve_token, token_matches
from symphony_tui.api.client import RemotePort
from symphony_tui.api.server import ApiServer
from tests.api.test_http_api import asking
from tests.scheduler.conftest import make_issue

TOKEN = "s3cret-token-value"


@pytest.fixture
async def guarded(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, token=TOKEN)
    await api.start()
    async with httpx.AsyncClient(base_url=api.url, timeout=10.0) as client:
        yield h, api, client
    await api.stop()


def test_who_needs_a_token_and_where_it_comes_from():
    assert resolve_token("127.0.0.1").token is None  # loopback: token-free by default
    assert resolve_token("::1").token is None
    required = resolve_token("127.0.0.1", require_token=True)
    assert required.generated and len(required.token) >= 32
    wide = resolve_token("0.0.0.0")
    assert wide.generated and wide.token and wide.token != resolve_token("0.0.0.0").token
    from_env = resolve_token("0.0.0.0", token_env="API_TOKEN", environ={"API_TOKEN": " t0k "})
    assert from_env.token == "t0k" and not from_env.generated
    with pytest.raises(TokenError, match=r"API_TOKEN.*not set"):
        resolve_token("0.0.0.0", token_env="API_TOKEN", environ={})
    with pytest.raises(TokenError):
        resolve_token("127.0.0.1", token_env="API_TOKEN", environ={"API_TOKEN": ""})


def test_token_compare():
    assert token_matches(f"Bearer {TOKEN}", TOKEN)
    assert token_matches(f"bearer  {TOKEN} ", TOKEN)
    assert not token_matches(f"Basic {TOKEN}", TOKEN)
    assert not token_matches("Bearer s3cret", TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("Bearer ", TOKEN)


async def test_a_server_on_a_non_loopback_address_refuses_to_start_without_a_token(make_harness):
    h = make_harness([])
    api = ApiServer(h.orch, host="0.0.0.0", bind_port=0)
    with pytest.raises(TokenError, match="refusing"):
        await api.start()
    assert api.port is None and api._runner is None  # nothing was bound


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/state"),
        ("GET", "/api/v1/snapshot"),
        ("GET", "/api/v1/events"),
        ("GET", "/api/v1/stream"),
        ("GET", "/api/v1/ABC-1"),
        ("POST", "/api/v1/refresh"),
        ("POST", "/api/v1/commands"),
        ("GET", "/api/v1/no-such-route/x"),
    ],
)
async def test_every_path_is_401_without_the_right_token(guarded, caplog, method, path):
    h, _api, client = guarded
    caplog.set_level(logging.WARNING, logger="symphony_tui.api")
    body = '{"type": "pause_dispatch", "paused": true}'
    headers = {"Content-Type": "application/json"}
    for auth in (None, "Bearer wrong-token", f"Basic {TOKEN}"):
        sent = dict(headers, **({"Authorization": auth} if auth else {}))
        r = await client.request(method, path, content=body, headers=sent)
        assert r.status_code == 401, (auth, r.text)
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert not h.orch.dispatch_paused
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    assert logged.count("401") == 3 and path in logged
    assert TOKEN not in logged and "wrong-token" not in logged


async def test_the_right_token_opens_every_path(guarded):
    h, _api, client = guarded
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert (await client.get("/api/v1/state", headers=auth)).status_code == 200
    r = await client.post(
        "/api/v1/commands", json={"type": "pause_dispatch", "paused": True}, headers=auth
    )
    assert r.status_code == 200 and h.orch.dispatch_paused
    async with client.stream("GET", "/api/v1/stream", headers=auth) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("event: snapshot"):
                break


async def test_host_and_origin_checks_come_before_the_token(guarded):
    _h, _api, client = guarded
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    rebound = await client.get("/api/v1/stream", headers=dict(auth, Host="attacker.example"))
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden_host"
    evil = await client.post(
        "/api/v1/commands",
        content='{"type": "refresh"}',
        headers=dict(auth, Origin="http://evil.example"),
    )
    assert evil.status_code == 403 and evil.json()["error"]["code"] == "forbidden_origin"


async def test_the_remote_port_sends_its_token(guarded):
    _h, api, _client = guarded
    wrong = RemotePort(api.url, token="nope")
    try:
        with pytest.raises(Exception, match="401"):
            await wrong.stream_once()
    finally:
        await wrong.close()
    remote = RemotePort(api.url, token=TOKEN)
    try:
        await remote.refresh_once()
        assert remote.snapshot().approvals[0].id == "ap-1"
    finally:
        await remote.close()


def test_the_cli_refuses_to_start_when_the_named_token_variable_is_unset(
    tmp_path, monkeypatch, capsys
):
    from symphony_tui.cli import main
    from tests.scheduler.conftest import write_workflow

    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    path = write_workflow(
        tmp_path, "server:\n  port: 0\n  host: 0.0.0.0\n  auth_token_env: NO_SUCH_TOKEN_VAR\n"
    )
    code = main([str(path), "--headless", "--no-lock", "--log-dir", str(tmp_path / "logs")])
    err = capsys.readouterr().err
    assert code == 1
    assert "NO_SUCH_TOKEN_VAR" in err and "refusing" in err
    assert len(err.strip().splitlines()) == 1


def test_the_cli_prints_a_generated_token_once(tmp_path, capsys):
    from symphony_tui.cli import _api_server
    from symphony_tui.runtime import build_runtime
    from tests.scheduler.conftest import write_workflow

    path = write_workflow(tmp_path, "server:\n  port: 0\n  require_token: true\n")
    runtime = build_runtime(path, lock=False, events_path=tmp_path / "e.jsonl")
    api = _api_server(runtime, None)
    err = capsys.readouterr().err
    assert api.token and err.count(api.token) == 1 and "shown once" in err


def test_a_server_on_every_address_answers_to_the_machine_s_names():
    """Bound to 0.0.0.0 (token required), requests naming the machine by its host name
    are served; names beyond those come from ``server.allowed_hosts``."""
    import socket

    from symphony_tui.api.server import serving_names

    wide = serving_names("0.0.0.0")
    assert socket.gethostname().lower() in wide and "0.0.0.0" in wide
    assert serving_names("10.9.8.7") == frozenset({"10.9.8.7"})
    assert "symphony.example" in serving_names("10.9.8.7", ["Symphony.Example"])
    assert ApiServer(None, host="::", token=TOKEN).allowed_hosts >= {socket.gethostname().lower()}


async def test_an_allowed_host_is_served_and_another_is_told_how_to_allow_it(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, token=TOKEN, allowed_hosts=["symphony.example"])
    await api.start()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=10.0) as client:
            ok = await client.get("/api/v1/state", headers=dict(auth, Host="symphony.example:80"))
            assert ok.status_code == 200
            other = await client.get("/api/v1/state", headers=dict(auth, Host="other.example"))
            assert other.status_code == 403
            assert "server.allowed_hosts" in other.json()["error"]["message"]
    finally:
        await api.stop()
