"""The demo agent on ``--listen unix://PATH``: a detached app-server that outlives its clients.

Each test starts ``python -m symphony_tui.demo.agent --listen unix://...`` and talks to it
as the codex backend does (``websockets`` ``unix_connect``, one JSON-RPC message per text
frame, ``TurnTracker.adopt``'s ``thread/resume`` then ``thread/turns/list``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import unix_connect
from websockets.exceptions import ConnectionClosed

from .conftest import STATE_TOOL, TIMEOUT_S, RpcError, methods, tool_ok


class WsClient:
    """One connection to the agent's socket: requests, an inbox of everything else."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 1
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, path: Path) -> WsClient:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                try:
                    ws = await unix_connect(str(path), uri="ws://localhost/")
                    return cls(ws)
                except OSError:
                    await asyncio.sleep(0.05)  # not listening yet

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in self.ws:
                msg = json.loads(frame)
                if "method" not in msg and msg.get("id") in self._pending:
                    fut = self._pending.pop(msg["id"])
                    if "error" in msg:
                        fut.set_exception(RpcError(msg["error"]))
                    else:
                        fut.set_result(msg["result"])
                else:
                    self.inbox.put_nowait(msg)
        self.inbox.put_nowait(None)

    async def send(self, obj: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(obj))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        rid = self._next
        self._next += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.send({"id": rid, "method": method, "params": params or {}})
        async with asyncio.timeout(TIMEOUT_S):
            return await fut

    async def initialize(self) -> None:
        await self.request("initialize", {"clientInfo": {"name": "tests", "version": "0"}})
        await self.send({"method": "initialized"})

    async def until(self, pred: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Messages up to and including the first matching ``pred``."""
        seen = []
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                msg = await self.inbox.get()
                assert msg is not None, "the agent closed the connection"
                seen.append(msg)
                if pred(msg):
                    return seen

    async def follow(
        self, answer: Callable[[dict[str, Any]], Any] = tool_ok
    ) -> list[dict[str, Any]]:
        """Messages up to ``turn/completed``, server requests answered with ``answer``."""
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1].get("method") != "turn/completed":
            seen += await self.until(lambda m: "id" in m or m.get("method") == "turn/completed")
            if "id" in seen[-1]:
                await self.send({"id": seen[-1]["id"], "result": answer(seen[-1])})
        return seen

    def drained(self) -> list[dict[str, Any]]:
        """What has arrived and not been read yet."""
        out = []
        while not self.inbox.empty():
            msg = self.inbox.get_nowait()
            if msg is not None:
                out.append(msg)
        return out

    async def close(self) -> None:
        await self.ws.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class DetachedDemo:
    """The agent process on a socket, stdin on /dev/null as the scheduler starts it."""

    def __init__(self, proc: asyncio.subprocess.Process, sock: Path) -> None:
        self.proc = proc
        self.sock = sock

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(TIMEOUT_S):
                return await self.proc.wait()
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()


@pytest.fixture
def sock_dir() -> AsyncIterator[Path]:
    # a unix socket path has about 100 bytes: not under pytest's deep tmp_path
    folder = Path(tempfile.mkdtemp(prefix="demo-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def _start(sock: Path, cwd: Path, speed: str) -> DetachedDemo:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "symphony_tui.demo.agent", "--listen", f"unix://{sock}",
        cwd=str(cwd), env={**os.environ, "SYMPHONY_DEMO_SPEED": speed},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return DetachedDemo(proc, sock)


async def _thread(client: WsClient, cwd: Path) -> str:
    started = await client.request(
        "thread/start",
        {"cwd": str(cwd), "approvalPolicy": "on-request", "dynamicTools": [STATE_TOOL]},
    )
    return started["thread"]["id"]


async def _turn(client: WsClient, thread_id: str, text: str) -> str:
    started = await client.request(
        "turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]}
    )
    return started["turn"]["id"]


async def _adopt(path: Path, thread_id: str) -> tuple[WsClient, dict[str, Any], dict[str, Any]]:
    """Reconnect as a restarted scheduler does: initialize, resume, list the turns."""
    client = await WsClient.connect(path)
    await client.initialize()
    resumed = await client.request("thread/resume", {"threadId": thread_id, "excludeTurns": True})
    listed = await client.request(
        "thread/turns/list", {"threadId": thread_id, "limit": 5, "itemsView": "full"}
    )
    return client, resumed, listed


async def test_a_turn_goes_on_while_nobody_is_connected_and_a_new_client_follows_it(
    workspace: Path, sock_dir: Path
) -> None:
    sock = sock_dir / "app.sock"
    agent = await _start(sock, workspace, speed="0.05")  # [demo: slow]: several seconds
    try:
        first = await WsClient.connect(sock)
        await first.initialize()
        thread_id = await _thread(first, workspace)
        turn_id = await _turn(first, thread_id, "work slowly [demo: slow]")
        before = await first.until(lambda m: m.get("method") == "item/agentMessage/delta")
        await first.close()  # mid-turn: the agent's first message is streaming

        second, resumed, listed = await _adopt(sock, thread_id)
        assert agent.proc.returncode is None
        assert resumed["thread"]["id"] == thread_id and resumed["thread"]["turns"] == []
        turns = listed["data"]
        assert turns[0]["id"] == turn_id
        if turns[0]["status"] == "inProgress":  # the usual case: the turn is slow
            assert resumed["thread"]["status"]["type"] == "active"
        rest = await second.follow()
        end = rest[-1]["params"]["turn"]
        assert end["id"] == turn_id and end["status"] == "completed"
        # the rest of the turn reached the new client, its tool call answered there
        assert "item/tool/call" in methods(rest)
        assert (workspace / f"NOTES-{workspace.name}.md").is_file()
        # the whole turn is listed, newest first, every item complete and in order
        final = await second.request(
            "thread/turns/list", {"threadId": thread_id, "limit": 1, "itemsView": "full"}
        )
        (turn,) = final["data"]
        assert turn["id"] == turn_id and turn["status"] == "completed"
        kinds = [i["type"] for i in turn["items"]]
        assert kinds[:3] == ["userMessage", "reasoning", "agentMessage"]
        assert {"commandExecution", "fileChange", "dynamicToolCall"} <= set(kinds)
        assert all(i.get("status", "completed") == "completed" for i in turn["items"])
        # what was said before the cut is not said again
        assert "turn/started" not in methods(rest)
        assert not [m for m in rest if m["params"].get("item", {}).get("type") == "userMessage"]
        assert "turn/started" in methods(before)
        await second.close()
    finally:
        assert await agent.stop() == 0
    assert not sock.exists()


async def test_an_approval_pending_across_a_disconnect_is_sent_again_and_answered_once(
    workspace: Path, sock_dir: Path
) -> None:
    sock = sock_dir / "app.sock"
    agent = await _start(sock, workspace, speed="0")
    try:
        first = await WsClient.connect(sock)
        await first.initialize()
        thread_id = await _thread(first, workspace)
        await _turn(first, thread_id, "release it [demo: approval]")
        asked = (await first.until(lambda m: m.get("method", "").endswith("requestApproval")))[-1]
        await first.close()  # unanswered

        second, resumed, listed = await _adopt(sock, thread_id)
        status = resumed["thread"]["status"]
        assert status == {"type": "active", "activeFlags": ["waitingOnApproval"]}
        # the same request again, same id, after the resume answer
        again = (await second.until(lambda m: m.get("method", "").endswith("requestApproval")))[-1]
        assert again["id"] == asked["id"] and again["params"] == asked["params"]
        # the command waiting for it is listed as running
        commands = [i for i in listed["data"][0]["items"] if i["type"] == "commandExecution"]
        assert [c["status"] for c in commands] == ["completed", "inProgress"]  # ls, then this
        assert commands[-1]["id"] == asked["params"]["itemId"]
        assert not (workspace / f"RELEASE-{workspace.name}.txt").exists()

        await second.send({"id": again["id"], "result": {"decision": "accept"}})
        seen = await second.follow()
        assert seen[-1]["params"]["turn"]["status"] == "completed"
        resolved = [
            m["params"]["requestId"] for m in seen if m.get("method") == "serverRequest/resolved"
        ]
        assert resolved.count(asked["id"]) == 1
        assert (workspace / f"RELEASE-{workspace.name}.txt").read_text().startswith("release")
        await second.close()

        # answered: a later client is not asked again
        third, resumed, _ = await _adopt(sock, thread_id)
        assert resumed["thread"]["status"] == {"type": "idle"}
        await third.request("thread/read", {"threadId": thread_id})
        assert not [m for m in third.drained() if "id" in m]
        await third.close()
    finally:
        assert await agent.stop() == 0


async def test_a_new_connection_replaces_the_old_and_hears_a_thread_once_it_resumes_it(
    workspace: Path, sock_dir: Path
) -> None:
    sock = sock_dir / "app.sock"
    agent = await _start(sock, workspace, speed="0.02")
    try:
        first = await WsClient.connect(sock)
        await first.initialize()
        thread_id = await _thread(first, workspace)
        await _turn(first, thread_id, "work slowly [demo: slow]")
        second = await WsClient.connect(sock)
        with pytest.raises(RpcError) as early:
            await second.request("thread/read", {"threadId": thread_id})
        assert early.value.code == -32600  # not initialized on this connection
        async with asyncio.timeout(TIMEOUT_S):
            while await first.inbox.get() is not None:
                pass  # until the agent closes the replaced connection
        await second.initialize()
        # not resumed: the turn goes on unheard, up to its tool call, which waits
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                listed = await second.request(
                    "thread/turns/list", {"threadId": thread_id, "itemsView": "full"}
                )
                (turn,) = listed["data"]
                if any(i["type"] == "dynamicToolCall" for i in turn["items"]):
                    break
                await asyncio.sleep(0.05)
        assert turn["status"] == "inProgress" and turn["itemsView"] == "full"
        assert turn["items"][0]["type"] == "userMessage"
        summary = await second.request("thread/turns/list", {"threadId": thread_id})
        kinds = {i["type"] for i in summary["data"][0]["items"]}
        assert summary["data"][0]["itemsView"] == "summary"
        assert kinds == {"userMessage", "agentMessage"}
        assert [m for m in second.drained() if "threadId" in m.get("params", {})] == []
        # resumed: the waiting tool call is asked here, and the turn ends here
        resumed = await second.request("thread/resume", {"threadId": thread_id})
        assert resumed["thread"]["status"] == {"type": "active", "activeFlags": []}
        call = (await second.until(lambda m: m.get("method") == "item/tool/call"))[-1]
        await second.send({"id": call["id"], "result": tool_ok(call)})
        await second.until(lambda m: m.get("method") == "turn/completed")
        await second.close()
    finally:
        assert await agent.stop() == 0


async def test_a_bad_listen_address_is_one_line_and_exit_2(workspace: Path, sock_dir: Path) -> None:
    (sock_dir / "file").write_text("not a socket")
    for listen in ("ws://127.0.0.1:1", f"unix://{sock_dir / 'file'}", "unix://"):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "symphony_tui.demo.agent", "--listen", listen,
            cwd=str(workspace), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(TIMEOUT_S):
            out, err = await proc.communicate()
        assert proc.returncode == 2, err
        assert out == b"" and len(err.decode().strip().splitlines()) == 1, err
        assert "--listen" in err.decode() and "Traceback" not in err.decode()
    assert (sock_dir / "file").read_text() == "not a socket"


async def test_a_stale_socket_is_replaced_a_served_one_is_not_and_readyz_answers(
    workspace: Path, sock_dir: Path
) -> None:
    sock = sock_dir / "app.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))  # left behind by an agent that was killed: nobody accepts
    stale.close()
    agent = await _start(sock, workspace, speed="0")
    try:
        client = await WsClient.connect(sock)
        await client.initialize()
        await client.close()
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        async with asyncio.timeout(TIMEOUT_S):
            status = await reader.readline()
        writer.close()
        assert status.startswith(b"HTTP/1.1 200")
        # a second agent on the same, served, socket: one line, exit 2, the first goes on
        other = await _start(sock, workspace, speed="0")
        async with asyncio.timeout(TIMEOUT_S):
            _, err = await other.proc.communicate()
        assert other.proc.returncode == 2
        assert "served by another process" in err.decode()
        assert len(err.decode().strip().splitlines()) == 1
        again = await WsClient.connect(sock)
        await again.initialize()
        await again.close()
    finally:
        assert await agent.stop() == 0
