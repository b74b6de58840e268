"""A tiny in-test stand-in for the agent-server's event surface.

One port serves both ``GET /api/conversations/{id}/events/search`` (paged, oldest first)
and ``WS /sockets/events/{id}`` (first frame: a ``full_state`` state event, then live
events). Tests add events to the store, push live frames, and drop sockets abruptly.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

CID = "11111111-2222-3333-4444-555555555555"
BASE = datetime(2026, 11, 30, 7, 0, 0, tzinfo=UTC)


def ev(n: int, kind: str = "MessageEvent", *, at_ms: int | None = None, **extra: Any) -> dict:
    """An event with id ``e<n>`` at ``BASE + at_ms`` (default ``n * 10`` ms)."""
    ts = BASE + timedelta(milliseconds=n * 10 if at_ms is None else at_ms)
    return {
        "id": f"e{n:03d}",
        "timestamp": ts.replace(tzinfo=None).isoformat(),
        "source": "agent",
        "kind": kind,
        **extra,
    }


def status_ev(n: int, status: str) -> dict:
    return ev(n, "ConversationStateUpdateEvent", key="execution_status", value=status)


class FakeEventServer:
    """``events``: the persisted store (search reads it). ``page_size``: search page size.
    ``auth_seen``: how each socket authenticated (``first_frame`` / ``query`` / ``header``
    / ``none``). ``close_code``: if set, sockets are closed with it right after accept."""

    def __init__(self, *, page_size: int = 2, api_key: str | None = None) -> None:
        self.events: list[dict] = []
        self.page_size = page_size
        self.api_key = api_key
        self.status = "idle"
        self.auth_seen: list[str] = []
        self.search_calls: list[dict[str, list[str]]] = []
        self.close_code: int | None = None
        self.pre_ready_frames: list[str] = []
        self.sockets: list[ServerConnection] = []
        self.connected = asyncio.Event()
        self._server: Server | None = None
        self._n_state = 0

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aenter__(self) -> FakeEventServer:
        self._server = await serve(
            self._handler, "127.0.0.1", 0, process_request=self._process_request
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    # -- test controls
    async def push(self, event: dict | str, *, persist: bool = True) -> None:
        """Store ``event`` (unless a raw string or ``persist=False``) and send it live."""
        if isinstance(event, dict) and persist:
            self.events.append(event)
        frame = event if isinstance(event, str) else json.dumps(event)
        for ws in list(self.sockets):
            try:
                await ws.send(frame)
            except Exception:
                self.sockets.remove(ws)

    def drop(self) -> None:
        """Cut every socket without a close frame (a network drop)."""
        self.connected.clear()
        for ws in self.sockets:
            ws.transport.abort()
        self.sockets.clear()

    def full_state(self) -> dict:
        self._n_state += 1
        return {
            "id": f"state-{self._n_state}",
            "timestamp": datetime.now(UTC).replace(tzinfo=None).isoformat(),
            "source": "environment",
            "kind": "ConversationStateUpdateEvent",
            "key": "full_state",
            "value": {"execution_status": self.status, "stats": {"usage_to_metrics": {}}},
        }

    # -- server side
    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        if url.path.startswith("/sockets/events/"):
            return None
        if url.path == f"/api/conversations/{CID}/events/search":
            q = parse_qs(url.query)
            self.search_calls.append(q)
            ordered = sorted(self.events, key=lambda e: (e["timestamp"], e["id"]))
            start = 0
            if "page_id" in q:
                start = next(i for i, e in enumerate(ordered) if e["id"] == q["page_id"][0])
            limit = min(int(q.get("limit", ["100"])[0]), self.page_size)
            page = ordered[start : start + limit]
            nxt = ordered[start + limit]["id"] if start + limit < len(ordered) else None
            return conn.respond(200, json.dumps({"items": page, "next_page_id": nxt}))
        return conn.respond(404, json.dumps({"detail": "not found"}))

    async def _handler(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        url = urlsplit(ws.request.path)
        if url.path != f"/sockets/events/{CID}":
            await ws.close(4004, "Conversation not found")
            return
        query = parse_qs(url.query)
        if "session_api_key" in query:
            how = "query"
        elif "X-Session-API-Key" in ws.request.headers:
            how = "header"
        elif self.api_key:
            first = json.loads(await ws.recv())
            how = "first_frame" if first.get("type") == "auth" else "bad"
            if first.get("session_api_key") != self.api_key:
                await ws.close(4001, "bad key")
                return
        else:
            how = "none"
        self.auth_seen.append(how)
        if self.close_code is not None:
            await ws.close(self.close_code, "closing")
            return
        for frame in self.pre_ready_frames:
            await ws.send(frame)
        await ws.send(json.dumps(self.full_state()))
        self.sockets.append(ws)
        self.connected.set()
        try:
            await ws.wait_closed()
        finally:
            if ws in self.sockets:
                self.sockets.remove(ws)
