"""REST calls to an OpenHands agent-server (docs/protocols.md "OpenHands agent-server").

Every call sends ``X-Session-API-Key`` when a key is configured. Failures raise
:class:`~symphony_tui.agents.base.AgentError`: ``transport_error`` when the server cannot be
reached or times out, ``protocol_error`` for an unexpected status or body. ``status`` on the
error tells callers (e.g. 404 for an unknown conversation).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from symphony_tui.agents.http_call import HTTPCallError, JSONClient

API_KEY_HEADER = "X-Session-API-Key"
SEARCH_PAGE_LIMIT = 100  # the server's maximum page size


class OpenHandsHTTPError(HTTPCallError):
    """A REST call to the agent-server failed; ``status`` is the HTTP status, or ``None``
    for transport errors."""


class OpenHandsClient(JSONClient):
    """Thin async client. ``base_url`` like ``http://127.0.0.1:8000`` (no trailing path);
    ``api_key`` is sent as ``X-Session-API-Key``; 200 and 201 are the accepted statuses."""

    error = OpenHandsHTTPError
    ok = (200, 201)

    def __init__(
        self, base_url: str, *, api_key: str | None = None, timeout_s: float = 30.0
    ) -> None:
        headers = {API_KEY_HEADER: api_key} if api_key else {}
        super().__init__(base_url, timeout_s=timeout_s, headers=headers)
        self.api_key = api_key

    async def health(self) -> bool:
        """``GET /health`` is 200."""
        try:
            resp = await self._http.get("/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    async def create_conversation(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/conversations`` -> conversation info (201 new, 200 existing id)."""
        info = await self.call("POST", "/api/conversations", "create conversation", json=body)
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            raise OpenHandsHTTPError("protocol_error", "create conversation: no id in response")
        return info

    async def get_conversation(self, conversation_id: str) -> dict[str, Any]:
        info = await self.call("GET", f"/api/conversations/{conversation_id}", "get conversation")
        if not isinstance(info, dict):
            raise OpenHandsHTTPError("protocol_error", "get conversation: not an object")
        return info

    async def send_message(self, conversation_id: str, text: str, *, run: bool = True) -> None:
        """``POST .../events {role:"user", content:[{type:"text", text}], run}``."""
        body = {"role": "user", "content": [{"type": "text", "text": text}], "run": run}
        await self.call(
            "POST", f"/api/conversations/{conversation_id}/events", "send message", json=body
        )

    async def run(self, conversation_id: str) -> None:
        await self.call("POST", f"/api/conversations/{conversation_id}/run", "run")

    async def interrupt(self, conversation_id: str) -> None:
        """``POST .../interrupt``: abandons the in-flight model call (status ``paused``)."""
        await self.call("POST", f"/api/conversations/{conversation_id}/interrupt", "interrupt")

    async def respond_to_confirmation(
        self, conversation_id: str, *, accept: bool, reason: str | None = None
    ) -> None:
        body: dict[str, Any] = {"accept": accept}
        if not accept and reason:
            body["reason"] = reason
        await self.call(
            "POST",
            f"/api/conversations/{conversation_id}/events/respond_to_confirmation",
            "respond to confirmation",
            json=body,
        )

    async def set_confirmation_policy(self, conversation_id: str, kind: str) -> None:
        """``kind``: ``NeverConfirm`` | ``AlwaysConfirm`` | ``ConfirmRisky``."""
        await self.call(
            "POST",
            f"/api/conversations/{conversation_id}/confirmation_policy",
            "set confirmation policy",
            json={"policy": {"kind": kind}},
        )

    async def search_page(
        self, conversation_id: str, page_id: str | None = None, limit: int = SEARCH_PAGE_LIMIT
    ) -> tuple[list[Any], str | None]:
        """One page of ``events/search`` (oldest first): ``(items, next_page_id)``."""
        params: dict[str, Any] = {"limit": limit}
        if page_id:
            params["page_id"] = page_id
        page = await self.call(
            "GET",
            f"/api/conversations/{conversation_id}/events/search",
            "search events",
            params=params,
        )
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise OpenHandsHTTPError("protocol_error", "search events: no items list")
        nxt = page.get("next_page_id")
        return page["items"], nxt if isinstance(nxt, str) and nxt else None

    async def search_all(
        self, conversation_id: str, *, limit: int = SEARCH_PAGE_LIMIT, max_pages: int = 10_000
    ) -> AsyncIterator[list[Any]]:
        """Yield every page of ``events/search`` in order, following ``next_page_id``."""
        page_id: str | None = None
        seen_pages: set[str] = set()
        for _ in range(max_pages):
            items, nxt = await self.search_page(conversation_id, page_id, limit)
            yield items
            # A server that hands back the same cursor would loop forever: stop instead.
            if nxt is None or nxt in seen_pages:
                return
            seen_pages.add(nxt)
            page_id = nxt
