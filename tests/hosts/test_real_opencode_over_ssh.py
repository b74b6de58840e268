"""The real ``opencode serve`` (1.18.33) started on a worker host in the
workspace, reached through an SSH port forward, runs turns end to end against the fake
model; after close (and after an interrupt) nothing of it is left on the host; a missing
program is one line; a host that dies mid-turn is the host lost. Real sshd on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import socket
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.opencode import OpenCodeBackend
from symphony_tui.agents.opencode.server import ManagedServer
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import (
    FAKE_MODEL,
    PROXY,
    fake_config,
    opencode_env,
    server_command,
)
from symphony_tui_testing.session_host import make_issue
from tests.hosts.test_codex_over_ssh import HostedSession, remote_descendants
from tests.real_programs import require_opencode

pytestmark = [pytest.mark.real_opencode, pytest.mark.slow]

QUICK = StreamOptions(readiness_timeout_s=10, backoff_initial_s=0.1, backoff_max_s=0.5)


@pytest.fixture(scope="module")
def model():
    with FakeModelServer(slow_delay=0.05) as fake:
        yield fake


def backend(
    fleet,
    model_url: str,
    *,
    command: str | None = None,
    hosts: dict | None = None,
    password_env: str | None = None,
    env: dict | None = None,
):
    oc_bin = require_opencode()
    settings = Settings.model_validate(
        {
            "agent": {"backend": "opencode"},
            "opencode": {
                "command": command or f"{shlex.quote(str(oc_bin))} serve",
                "model": FAKE_MODEL,
                "startup_timeout_ms": 120_000,
                "password_env": password_env,
                # Resolved here, exported there: the provider config travels as content.
                "env": {
                    "OPENCODE_CONFIG_CONTENT": json.dumps(fake_config(model_url)),
                    "HTTP_PROXY": PROXY,
                    "HTTPS_PROXY": PROXY,
                    "NO_PROXY": "127.0.0.1,localhost",
                    "LEAK": "$SCHED_SECRET",
                },
            },
            "tracker": {"secret_env_names": ["SCHED_SECRET"]},
            "worker": {"ssh_hosts": fleet.names, "hosts": hosts or {}},
        }
    )
    return OpenCodeBackend(
        lambda: settings,
        env={"SCHED_SECRET": "s3cr3t", **(env or {})},
        state_dir=Path("/nonexistent/not-used-on-hosts"),
        stream_options=QUICK,
    )


def workspace(tmp_path: Path, name: str = "OC-1") -> Path:
    ws = tmp_path / "remote-ws" / name
    ws.mkdir(parents=True)
    return ws


def slow_words(event) -> bool:
    return event.kind == EventKind.MESSAGE_DELTA and "word" in (event.message or "")


def listening(url: str) -> bool:
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_real_opencode_runs_turns_on_the_host_and_leaves_nothing(
    tmp_path, fleet, model
) -> None:
    ws = workspace(tmp_path)
    b = backend(fleet, model.url)
    host = HostedSession(ws, fleet.names[1], issue=make_issue("OC-1"))
    session = await b.start_session(host)
    server = session._closers  # the session owns its server and client
    try:
        assert server, "the session owns no server"
        first = await session.run_turn("Say hello.")
        assert first.status is TurnStatus.COMPLETED, first
        # An interrupt mid-answer ends the turn; the session goes on.
        turn = asyncio.create_task(session.run_turn("SLOW400 please"))
        await host.wait_for(slow_words, timeout=60)
        await session.interrupt()
        cut = await asyncio.wait_for(turn, 20)
        assert cut.status is TurnStatus.INTERRUPTED, cut
        url = host.recorded["server_url"]
        assert url.startswith("http://127.0.0.1:") and listening(url)
        assert remote_descendants(fleet), "no server process on the host"
    finally:
        await session.close()
        await b.aclose()
    messages = [e.message for e in host.of_kind(EventKind.MESSAGE)]
    assert messages[0] == "Hello from the fake model. You said: Say hello."
    assert host.recorded["directory"] == str(ws)
    # The server ran in the workspace there, isolated under it, and its sessions stay.
    assert (ws / ".symphony" / "opencode" / "data" / "opencode").is_dir()
    log = (ws / ".symphony" / "opencode" / "server.log").read_text()
    assert "s3cr3t" not in log
    await asyncio.sleep(0.5)
    assert remote_descendants(fleet) == []
    assert not listening(url), "the port forward outlived the session"


async def test_the_next_attempt_re_attaches_to_the_session_kept_in_the_workspace(
    tmp_path, fleet, model
) -> None:
    ws = workspace(tmp_path)
    b = backend(fleet, model.url)
    host = HostedSession(ws, fleet.names[0], issue=make_issue("OC-2"))
    session = await b.start_session(host)
    try:
        assert (await session.run_turn("Say hello.")).status is TurnStatus.COMPLETED
    finally:
        await session.close()
    sid = host.recorded["session_id"]
    # A new backend (a console restart) with the manifest's facts: a new server on the
    # host finds the session in the workspace's state.
    again = HostedSession(ws, fleet.names[0], issue=make_issue("OC-2"), resume=dict(host.recorded))
    b2 = backend(fleet, model.url)
    session = await b2.start_session(again)
    try:
        assert session.session_id == sid
        [started] = again.of_kind(EventKind.SESSION_STARTED)
        assert started.payload.resumed
    finally:
        await session.close()
    await asyncio.sleep(0.3)
    assert remote_descendants(fleet) == []


async def test_a_missing_program_on_the_host_is_one_line(tmp_path, fleet, model) -> None:
    ws = workspace(tmp_path)
    # The per-host command wins over opencode.command on that host only.
    b = backend(
        fleet,
        model.url,
        hosts={fleet.names[0]: {"commands": {"opencode": "/opt/nowhere/opencode serve"}}},
    )
    with pytest.raises(AgentError) as err:
        await b.start_session(HostedSession(ws, fleet.names[0]))
    text = str(err.value)
    assert "'/opt/nowhere/opencode serve' not found on host" in text and "\n" not in text
    assert not err.value.host_lost
    await asyncio.sleep(0.3)
    assert remote_descendants(fleet) == []


async def test_a_server_that_fails_to_start_gives_the_tail_of_its_remote_log(
    tmp_path, fleet, model
) -> None:
    ws = workspace(tmp_path)
    b = backend(fleet, model.url, command="echo 'no provider configured' >&2; exit 3; :")
    with pytest.raises(AgentError) as err:
        await b.start_session(HostedSession(ws, fleet.names[1]))
    text = str(err.value)
    assert "exited with 3 on host" in text and "no provider configured" in text, text
    assert "\n" not in text


async def test_a_host_that_dies_mid_turn_is_the_host_lost(tmp_path, fleet, model) -> None:
    ws = workspace(tmp_path)
    b = backend(fleet, model.url)
    victim = fleet.hosts[0]
    host = HostedSession(ws, victim.name, issue=make_issue("OC-3"))
    session = await b.start_session(host)
    left: list[int] = []
    try:
        turn = asyncio.create_task(session.run_turn("SLOW2000 please"))
        await host.wait_for(slow_words, timeout=60)
        left = victim.kill()
        with pytest.raises(AgentError):
            await asyncio.wait_for(turn, 30)
        assert session.host_lost and victim.name in session.host_lost
        assert "\n" not in session.host_lost
    finally:
        await session.close()
        await b.aclose()
        for pid in left:  # the host "died": its programs are ours to end here
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


async def test_a_server_run_on_the_host_by_other_means_is_reached_through_a_forward(
    tmp_path, fleet, model
) -> None:
    # The hosts are this machine: a server bound to loopback here is one on the host.
    running = ManagedServer(
        server_command(require_opencode()),
        tmp_path / "external",
        env={**os.environ, **opencode_env(tmp_path / "cfg", model.url)},
    )
    await running.start()
    try:
        assert running.base_url is not None
        port = int(running.base_url.rsplit(":", 1)[1])
        ws = workspace(tmp_path)
        b = backend(
            fleet,
            model.url,
            command="/opt/nowhere/not-started serve",  # never launched on that host
            hosts={fleet.names[0]: {"base_url": {"opencode": f"http://127.0.0.1:{port}"}}},
            password_env="OC_ON_HOST_PASSWORD",
            env={"OC_ON_HOST_PASSWORD": running.password},
        )
        host = HostedSession(ws, fleet.names[0], issue=make_issue("OC-4"))
        session = await b.start_session(host)
        try:
            url = host.recorded["server_url"]
            assert url != running.base_url and listening(url)  # the forward, not the server
            result = await session.run_turn("Say hello.")
            assert result.status is TurnStatus.COMPLETED, result
        finally:
            await session.close()
        await asyncio.sleep(0.3)
        assert not listening(url), "the forward outlived the session"
        assert running.running, "a server run by other means is not ours to stop"
    finally:
        await running.stop()
