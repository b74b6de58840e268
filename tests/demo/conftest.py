"""A raw JSON-RPC client that drives ``python -m symphony_tui.demo.agent`` as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TIMEOUT_S = 20.0
STATE_TOOL = {
    "name": "symphony_set_issue_state",
    "description": "Move this issue to another tracker state.",
    "inputSchema": {
        "type": "object",
        "properties": {"state": {"type": "string"}},
        "required": ["state"],
    },
}


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")


Answer = Callable[[dict[str, Any]], Any]


def tool_ok(msg: dict[str, Any]) -> Any:
    """Default answers: tool calls succeed; anything else is left unanswered (None)."""
    if msg["method"] == "item/tool/call":
        return {"contentItems": [{"type": "inputText", "text": "moved to Done"}], "success": True}
    return None


class AgentClient:
    """Client side of the wire: requests with ids, a queue of everything the agent sends
    that is not a response to us, and the full transcript of received messages."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.transcript: list[dict[str, Any]] = []
        self.inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 1
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, cwd: Path, speed: str = "0", **env: str) -> AgentClient:
        full_env = {**os.environ, "SYMPHONY_DEMO_SPEED": speed, **env}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "symphony_tui.demo.agent",
            cwd=str(cwd),
            env=full_env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=16 * 1024 * 1024,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            self.transcript.append(msg)
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
        await self.send_raw(json.dumps(obj).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        rid = self._next
        self._next += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.send({"id": rid, "method": method, "params": params or {}})
        async with asyncio.timeout(TIMEOUT_S):
            return await fut

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            msg = await self.inbox.get()
        assert msg is not None, "the agent closed stdout"
        return msg

    async def until(self, pred: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Messages up to and including the first one matching ``pred``."""
        seen = []
        while True:
            msg = await self.next()
            seen.append(msg)
            if pred(msg):
                return seen

    async def handshake(
        self,
        cwd: Path,
        tools: list[dict[str, Any]] | None = None,
        policy: Any = "on-request",
    ) -> str:
        init = await self.request(
            "initialize",
            {
                "clientInfo": {"name": "tests", "title": "tests", "version": "0"},
                "capabilities": {"experimentalApi": True},
            },
        )
        assert {"userAgent", "codexHome", "platformFamily", "platformOs"} <= init.keys()
        await self.send({"method": "initialized"})
        return await self.handshake_thread(cwd, tools, policy)

    async def handshake_thread(
        self,
        cwd: Path,
        tools: list[dict[str, Any]] | None = None,
        policy: Any = "on-request",
    ) -> str:
        """``thread/start`` (after the handshake); returns the thread id."""
        result = await self.request(
            "thread/start",
            {
                "cwd": str(cwd),
                "approvalPolicy": policy,
                "sandbox": "workspace-write",
                "dynamicTools": [STATE_TOOL] if tools is None else tools,
            },
        )
        thread_id = result["thread"]["id"]
        await self.until(
            lambda m: (
                m.get("method") == "thread/started" and m["params"]["thread"]["id"] == thread_id
            )
        )
        return thread_id

    async def turn(
        self, thread_id: str, text: str, answer: Answer = tool_ok
    ) -> list[dict[str, Any]]:
        """Start a turn and collect what the agent sends until ``turn/completed``,
        answering server requests with ``answer`` (None = leave unanswered)."""
        started = await self.request(
            "turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]}
        )
        assert started["turn"]["status"] == "inProgress"
        seen: list[dict[str, Any]] = []
        while True:
            msg = await self.next()
            seen.append(msg)
            if "id" in msg and "method" in msg:
                result = answer(msg)
                if result is not None:
                    await self.send({"id": msg["id"], "result": result})
            if msg.get("method") == "turn/completed":
                assert msg["params"]["turn"]["id"] == started["turn"]["id"]
                return seen

    async def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(TIMEOUT_S):
                code = await self.proc.wait()
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        return code

    async def stderr(self) -> str:
        assert self.proc.stderr is not None
        return (await self.proc.stderr.read()).decode()


def methods(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["method"] for m in msgs if "method" in m]


def items(msgs: list[dict[str, Any]], event: str, kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["item"]
        for m in msgs
        if m.get("method") == event and m["params"]["item"]["type"] == kind
    ]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "DEMO-9"
    ws.mkdir()
    (ws / "README.md").write_text("hello\n")
    return ws


@pytest.fixture
async def agent(workspace: Path):
    client = await AgentClient.start(workspace)
    try:
        yield client
    finally:
        await client.close()
