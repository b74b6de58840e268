"""The app-server link across drops, against a scripted WebSocket app-server on a unix
socket (agents/codex/link.py): what finished while away is handed up once, an answer
written while away reaches the server once even though it asks again, and a host that
does not answer ends the link as lost, naming the host."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from symphony_tui.agents.codex.link import AppServerLink
from symphony_tui.agents.reconnect import Backoff

QUICK = Backoff(initial_s=0.01, max_s=0.05, max_attempts=1_000_000, jitter=0.5)
APPROVAL = {"id": 7, "method": "item/commandExecution/requestApproval", "params": {"itemId": "c"}}


class Place:
    """A place on a "host" whose answers the test sets (``living``), once ``answers`` is
    set."""

    def __init__(self, path: Path, living: bool | None = True) -> None:
        self.path = str(path)
        self.host: str | None = "h1"
        self.living = living
        self.answers = asyncio.Event()
        self.answers.set()

    async def socket(self) -> str:
        return self.path

    async def drop(self) -> None:
        return None

    async def alive(self) -> bool | None:
        await self.answers.wait()
        return self.living

    async def tail(self) -> str:
        return ""

    async def release(self) -> None:
        return None


class Server:
    """Connection 1 streams a turn's start, an item and an approval request, then drops;
    connection 2 answers the link's resume, asks the approval again and lists the turn as
    finished with a second item."""

    def __init__(self) -> None:
        self.connections = 0
        self.received: list[list[dict[str, Any]]] = []
        self.drop = asyncio.Event()

    async def handler(self, ws: Any) -> None:
        self.connections += 1
        got: list[dict[str, Any]] = []
        self.received.append(got)
        if self.connections == 1:
            for msg in (
                {"method": "turn/started", "params": {"turn": {"id": "t1"}}},
                {"method": "item/completed", "params": {"item": {"id": "i1", "type": "x"}}},
                APPROVAL,
            ):
                await ws.send(json.dumps(msg))
            await self.drop.wait()
            return  # the connection drops
        async for message in ws:
            msg = json.loads(message)
            got.append(msg)
            method = msg.get("method")
            if method == "thread/resume":
                await ws.send(json.dumps({"id": msg["id"], "result": {"thread": {"id": "th"}}}))
                await ws.send(json.dumps(APPROVAL))  # codex asks a pending request again
            elif method == "thread/turns/list":
                items = [{"id": "i1", "type": "x"}, {"id": "i2", "type": "x"}]
                turn = {"id": "t1", "status": "completed", "items": items}
                await ws.send(json.dumps({"id": msg["id"], "result": {"data": [turn]}}))
            elif "id" in msg and "method" in msg:
                await ws.send(json.dumps({"id": msg["id"], "result": {}}))


async def read(link: AppServerLink) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(link.reader.readline(), 10))


async def test_a_drop_is_caught_up_once_and_an_answer_held_meanwhile_is_sent_once(tmp_path):
    from websockets.asyncio.server import unix_serve

    server = Server()
    sock = tmp_path / "app.sock"
    states: list[str] = []
    place = Place(sock)
    async with unix_serve(server.handler, str(sock)):
        link = await AppServerLink.open(
            place,
            5,
            hello={"clientInfo": {"name": "t"}},
            lost_after_s=5,
            backoff=QUICK,
            on_state=lambda state, since, reason: states.append(state),
        )
        link.follow("th")
        try:
            assert (await read(link))["method"] == "turn/started"
            assert (await read(link))["params"]["item"]["id"] == "i1"
            assert (await read(link))["id"] == 7
            place.answers.clear()  # the link stays down until the test lets it back
            server.drop.set()
            while link.state == "connected":
                await asyncio.sleep(0.01)
            link.writer.write(b'{"id":7,"result":{"decision":"accept"}}\n')
            await link.writer.drain()  # held while the link is down
            place.answers.set()
            after = [await read(link), await read(link)]
            assert [m["method"] for m in after] == ["item/completed", "turn/completed"]
            assert after[0]["params"]["item"]["id"] == "i2"  # i1 was seen: not again
            assert after[1]["params"]["turn"]["status"] == "completed"
            link.writer.write(b'{"id":1,"method":"next","params":{}}\n')
            await link.writer.drain()
            assert (await read(link))["id"] == 1  # the re-sent approval was not handed up
        finally:
            await link.aclose()
    second = server.received[1]
    methods = [m.get("method") for m in second]
    assert methods[:4] == ["initialize", "initialized", "thread/resume", "thread/turns/list"]
    assert [m for m in second if m.get("id") == 7] == [{"id": 7, "result": {"decision": "accept"}}]
    assert link.reconnects == 1 and states == ["reconnecting", "connected"]


async def test_a_host_that_does_not_answer_ends_the_link_as_lost(tmp_path):
    from websockets.asyncio.server import unix_serve

    async def handler(ws: Any) -> None:
        await ws.close()  # the first connection drops at once

    sock = tmp_path / "app.sock"
    place = Place(sock, living=None)
    async with unix_serve(handler, str(sock)):
        link = await AppServerLink.open(place, 5, hello={}, lost_after_s=0.3, backoff=QUICK)
        assert await asyncio.wait_for(link.reader.read(), 10) == b""
    assert link.state == "lost" and link.host_lost == "h1"
    assert "host h1 not reached for 0.3s" in link.close_reason
    await link.aclose()
