"""The controls and the API under abuse (docs/security.md): the control token, the peer
check on mutating requests, bounded bodies and headers, identifiers without control
characters, stream caps, and each run's posture in ``/api/v1/<issue>``."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.auth import CONTROL_HEADER, find_control_token
from symphony_tui.api.peers import PeerGuard, unix_peer_pid
from symphony_tui.api.server import ApiServer
from symphony_tui.api.stream import StreamHub
from symphony_tui.domain import ApprovalKind, ApprovalRequest
from tests.scheduler.conftest import make_issue


async def asking(session, prompt, turn):
    await session.host.request_approval(
        ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make deploy")
    )
    return TurnResult(TurnStatus.COMPLETED)


@pytest.fixture
async def served(make_harness, tmp_path):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, bind_port=0, announce_dir=tmp_path / "notes")
    await api.start()
    async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:
        yield h, api, client
    await api.stop()


def _approval(h) -> str:
    return h.orch.snapshot().approvals[0].id


def _post_from(cwd, url: str, path: str, body: dict, headers: dict) -> tuple[int, dict]:
    """POST from another process working in ``cwd`` (a client the scheduler did not start)."""
    code = textwrap.dedent(
        f"""
        import json, sys, urllib.request, urllib.error
        req = urllib.request.Request({url + path!r}, data=json.dumps({body!r}).encode(),
            headers={{"Content-Type": "application/json", **{headers!r}}}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                print(r.status); print(r.read().decode())
        except urllib.error.HTTPError as e:
            print(e.code); print(e.read().decode())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "SYMPHONY_TUI_SCHEDULER_PID"}
    out = Path(cwd) / f".client-{time.monotonic_ns()}.out"
    script = Path(tempfile.mkdtemp()) / "client.py"
    script.write_text(code)
    # started in the background by a shell that exits: the client is no child of ours
    subprocess.run(
        ["sh", "-c", f'"{sys.executable}" "{script}" > "{out}" 2>&1 &'],
        cwd=cwd, env=env, check=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = out.read_text() if out.exists() else ""
        if text.count("\n") >= 2:
            out.unlink()
            status, _, body_text = text.partition("\n")
            return int(status), json.loads(body_text or "{}")
        time.sleep(0.1)
    raise AssertionError(f"the client did not answer: {text!r}")


async def test_writes_need_the_control_token_which_sits_in_a_file_only_the_user_reads(served):
    h, api, client = served
    approve = {"type": "approve", "approval_id": _approval(h)}
    r = await client.post("/api/v1/commands", json=approve)
    assert r.status_code == 401 and r.json()["error"]["code"] == "control_token_required"
    r = await client.post("/api/v1/commands", json=approve, headers={CONTROL_HEADER: "guess"})
    assert r.status_code == 401
    assert h.orch.snapshot().approvals  # still pending
    # the token is in a 0600 file named by the API note, never in a child's environment
    mode = stat.S_IMODE(api.control_file.stat().st_mode)
    assert mode == 0o600 and stat.S_IMODE(api.control_file.parent.stat().st_mode) == 0o700
    assert find_control_token(api.port, api.control_file.parent) == api.control_token
    assert api.control_token not in json.dumps(os.environ.copy())
    r = await client.post("/api/v1/commands", json=approve, headers=api.control_headers())
    assert r.status_code == 200 and r.json()["ok"], r.text
    entries = (await client.get("/api/v1/audit")).json()["entries"]
    refused = [e for e in entries if not e["ok"]]
    assert len(refused) == 2 and all("no credential" in e["via"] for e in refused)
    approved = next(e for e in entries if e["what"] == "approve" and e["ok"])
    assert f"pid {os.getpid()}" in approved["via"] and "control token" in approved["via"]
    path = api.control_file
    await api.stop()
    assert not path.exists()  # gone with the server


async def test_a_client_working_in_a_workspace_is_refused_and_audited(served, tmp_path):
    h, api, _client = served
    workspace = h.orch.snapshot().running[0].workspace_path
    approve = {"type": "approve", "approval_id": _approval(h)}
    status, body = await asyncio.to_thread(
        _post_from, workspace, api.url, "/api/v1/commands", approve, api.control_headers()
    )
    assert status == 403 and body["error"]["code"] == "control_refused"
    assert "inside the workspace root" in body["error"]["message"]
    assert h.orch.snapshot().approvals
    # the same client outside every workspace is let in
    status, body = await asyncio.to_thread(
        _post_from, tmp_path, api.url, "/api/v1/commands", approve, api.control_headers()
    )
    assert status == 200 and body["ok"], body
    entries = [e for e in await h.orch.audit_entries(50) if e.what.startswith("POST")]
    assert entries and "inside the workspace root" in entries[-1].message


async def test_processes_the_scheduler_started_are_refused_even_when_reparented(tmp_path):
    guard = PeerGuard(lambda: [])
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(30)"
    )
    try:
        why = guard.refusal(child.pid, [])
        assert why and "descends from the scheduler" in why
    finally:
        child.kill()
        await child.wait()

    def orphan(env: dict[str, str], cwd) -> int:
        # ``sh`` starts sleep in the background and exits: sleep is no child of ours now
        done = subprocess.run(
            ["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"],
            env=env, cwd=cwd, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return int(done.stdout.strip())

    clean = {k: v for k, v in os.environ.items() if k != "SYMPHONY_TUI_SCHEDULER_PID"}
    marked = orphan({**clean, "SYMPHONY_TUI_SCHEDULER_PID": "4242"}, tmp_path)
    plain = orphan(clean, tmp_path)
    inside = orphan(clean, tmp_path)
    try:
        why = guard.refusal(marked, [])
        assert why and "SYMPHONY_TUI_SCHEDULER_PID=4242" in why
        assert guard.refusal(plain, []) is None
        why = guard.refusal(inside, [tmp_path.resolve()])
        assert why and "inside the workspace root" in why
    finally:
        for pid in (marked, plain, inside):
            os.kill(pid, 9)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"type": "approve", "approval_id": "\xff\xfe"}', "invalid_body"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid_body"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "invalid_body"),
        (b"not json", "invalid_body"),
    ],
    ids=["invalid-utf8", "nested-100k-lists", "nested-5k-objects", "not-json"],
)
async def test_bad_bodies_are_one_line_400s(served, body, code):
    _h, api, client = served
    for path in ("/api/v1/commands", "/api/v1/audit"):
        r = await client.post(
            path,
            content=body,
            headers={"Content-Type": "application/json", **api.control_headers()},
        )
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == code and "\n" not in error["message"]
        assert "Traceback" not in r.text


async def test_control_characters_in_identifiers_are_refused(served):
    h, api, client = served
    r = await client.get("/api/v1/AB%00C")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_identifier"
    r = await client.post(
        "/api/v1/commands",
        json={"type": "stop", "issue_id": "ABC-1\x00; rm -rf /"},
        headers=api.control_headers(),
    )
    assert r.status_code == 400 and "U+0000" in r.json()["error"]["message"]
    assert h.orch.snapshot().running  # nothing stopped


async def test_a_client_slow_with_its_headers_is_dropped(served, monkeypatch):
    _h, api, _client = served
    reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
    writer.write(b"GET /api/v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never the blank line
    await writer.drain()
    # HEADER_TIMEOUT_S (10 s) later the server closes the connection without an answer
    got = await asyncio.wait_for(reader.read(), timeout=30)
    assert got == b""
    writer.close()


async def test_stream_clients_are_capped_per_client_and_in_total(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    hub = StreamHub(h.orch, interval_s=0.05, keepalive_s=0.2, max_streams=3)
    hub.max_streams_per_client = 2
    api = ApiServer(h.orch, stream=hub)
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
            opened = []
            for _ in range(2):
                cm = client.stream("GET", "/api/v1/stream")
                response = await cm.__aenter__()
                assert response.status_code == 200
                opened.append(cm)
            refused = await client.get("/api/v1/stream")
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "too_many_streams"
            assert "one client" in refused.json()["error"]["message"]
            assert refused.headers["Retry-After"]
            assert hub.open_streams == 2
            for cm in opened:
                await cm.__aexit__(None, None, None)
            for _ in range(100):
                if hub.open_streams == 0:
                    break
                await asyncio.sleep(0.05)
            assert hub.open_streams == 0
            again = client.stream("GET", "/api/v1/stream")
            assert (await again.__aenter__()).status_code == 200
            await again.__aexit__(None, None, None)
    finally:
        await api.stop()


async def test_the_issue_endpoint_shows_the_runs_posture(served):
    _h, _api, client = served
    body = (await client.get("/api/v1/ABC-1")).json()
    posture = body["posture"]
    assert posture == body["running"]["posture"]
    assert posture["sandbox"].startswith("codex workspace-write")
    assert "blocked" in posture["network"] and "unix socket" in posture["transport"]
    assert set(posture) >= {"secrets_withheld", "sandbox_policy", "control_api"}


def test_a_unix_socket_peer_is_named_by_its_credentials():
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        assert unix_peer_pid(ours) == os.getpid()


async def test_a_child_forked_while_the_scheduler_holds_a_connection_does_not_hide_it():
    # A child that inherited the scheduler's own client socket (forked, not yet exec'd or
    # closed it) is the one psutil names; the scheduler still holds it, so it is let in.
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        served, _ = server.accept()
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(client.fileno(),)
        )
        try:
            verdict = await PeerGuard().judge(served, "127.0.0.1")
        finally:
            child.kill()
            child.wait()
            client.close()
            served.close()
    assert verdict.refusal is None, verdict.refusal
    assert verdict.peer.pid == os.getpid()
