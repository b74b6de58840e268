"""REST calls to an OpenCode server (docs/protocols.md "OpenCode server"; ``GET /doc`` of 1.18.33).

Only the classic routes are used (the newer ``/api/*`` set does not control sessions started
by the classic ones). Every call but the health probe carries ``directory=<workspace>``: one
server serves every workspace, and the directory picks the project instance (its config,
sessions and event bus; measured: a session created with ``directory=D`` runs its tools in
``D`` whatever the server's own working directory).

Authentication: HTTP basic, user ``opencode``, when the server runs with
``OPENCODE_SERVER_PASSWORD`` (then every route, ``/global/health`` included, answers 401
without it). Failures raise :class:`OpenCodeHTTPError` (an :class:`AgentError`):
``transport_error`` when the server cannot be reached or times out, ``protocol_error`` for an
unexpected status or body; ``status`` is the HTTP status or ``None``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from httpx_sse import EventSource, aconnect_sse

from symphony_tui.agents.http_call import HTTPCallError, JSONClient

AUTH_USER = "opencode"
HEALTH_TIMEOUT_S = 2.0  # a server that is still starting may accept and never answer


class OpenCodeHTTPError(HTTPCallError):
    """A REST call to the OpenCode server failed; ``status`` is the HTTP status, or
    ``None`` for transport errors."""


class OpenCodeClient(JSONClient):
    """Thin async client. ``base_url`` like ``http://127.0.0.1:4096`` (no trailing path);
    ``password`` enables HTTP basic auth as user ``opencode``; any 2xx is accepted."""

    error = OpenCodeHTTPError

    def __init__(
        self, base_url: str, *, password: str | None = None, timeout_s: float = 30.0
    ) -> None:
        auth = httpx.BasicAuth(AUTH_USER, password) if password else None
        super().__init__(base_url, timeout_s=timeout_s, auth=auth)
        self.password = password

    async def _call(
        self,
        method: str,
        path: str,
        what: str,
        directory: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """:meth:`JSONClient.call` on the project instance of ``directory``."""
        query = {"directory": directory, **(params or {})}
        return await self.call(method, path, what, json=json, params=query)

    async def health(self) -> bool:
        """``GET /global/health`` answers 200 with ``healthy: true``."""
        try:
            resp = await self._http.get("/global/health", timeout=HEALTH_TIMEOUT_S)
            return resp.status_code == 200 and bool(resp.json().get("healthy"))
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    async def create_session(self, directory: str, title: str) -> dict[str, Any]:
        """``POST /session {title}`` -> session info (``id`` ``ses_...``)."""
        info = await self._call(
            "POST", "/session", "create session", directory, json={"title": title}
        )
        return _with_id(info, "create session")

    async def get_session(self, directory: str, session_id: str) -> dict[str, Any]:
        """``GET /session/{id}``; a 404 (unknown session) keeps its ``status``."""
        info = await self._call("GET", f"/session/{session_id}", "get session", directory)
        return _with_id(info, "get session")

    async def prompt_async(
        self, directory: str, session_id: str, text: str, model: tuple[str, str] | None
    ) -> None:
        """``POST /session/{id}/prompt_async`` (204 at once; the turn runs on the server).
        ``model`` is ``(providerID, modelID)``; ``None`` lets the server pick its default."""
        body: dict[str, Any] = {"parts": [{"type": "text", "text": text}]}
        if model is not None:
            body["model"] = {"providerID": model[0], "modelID": model[1]}
        await self._call(
            "POST", f"/session/{session_id}/prompt_async", "prompt", directory, json=body
        )

    async def abort(self, directory: str, session_id: str) -> None:
        await self._call("POST", f"/session/{session_id}/abort", "abort", directory)

    async def messages(self, directory: str, session_id: str) -> list[dict[str, Any]]:
        """``GET /session/{id}/message``: ``[{info, parts}]``, oldest first."""
        items = await self._call("GET", f"/session/{session_id}/message", "messages", directory)
        if not isinstance(items, list):
            raise OpenCodeHTTPError("protocol_error", "messages: not a list")
        return [m for m in items if isinstance(m, dict) and isinstance(m.get("info"), dict)]

    async def status(self, directory: str) -> dict[str, Any]:
        """``GET /session/status``: ``{session id: {type: busy|retry}}``; idle ones absent."""
        value = await self._call("GET", "/session/status", "session status", directory)
        return value if isinstance(value, dict) else {}

    async def permissions(self, directory: str) -> list[dict[str, Any]]:
        """``GET /permission``: pending permission requests of the instance."""
        value = await self._call("GET", "/permission", "permissions", directory)
        return [p for p in value or [] if isinstance(p, dict)]

    async def reply_permission(
        self, directory: str, request_id: str, reply: str, message: str | None = None
    ) -> None:
        """``POST /permission/{id}/reply {reply: once|always|reject, message?}``."""
        body: dict[str, Any] = {"reply": reply}
        if message:
            body["message"] = message
        await self._call(
            "POST", f"/permission/{request_id}/reply", "permission reply", directory, json=body
        )

    async def questions(self, directory: str) -> list[dict[str, Any]]:
        """``GET /question``: pending questions of the instance."""
        value = await self._call("GET", "/question", "questions", directory)
        return [q for q in value or [] if isinstance(q, dict)]

    async def reply_question(
        self, directory: str, request_id: str, answers: list[list[str]]
    ) -> None:
        """``POST /question/{id}/reply {answers}``: one list of labels per question."""
        await self._call(
            "POST",
            f"/question/{request_id}/reply",
            "question reply",
            directory,
            json={"answers": answers},
        )

    async def reject_question(self, directory: str, request_id: str) -> None:
        await self._call("POST", f"/question/{request_id}/reject", "question reject", directory)

    @asynccontextmanager
    async def events(
        self, directory: str, *, connect_timeout_s: float
    ) -> AsyncIterator[EventSource]:
        """The instance's SSE stream ``GET /event`` (no read timeout: the caller's watchdog
        bounds silence). Raises :class:`OpenCodeHTTPError` when it cannot be opened."""
        timeout = httpx.Timeout(connect_timeout_s, read=None)
        try:
            async with aconnect_sse(
                self._http, "GET", "/event", params={"directory": directory}, timeout=timeout
            ) as source:
                status = source.response.status_code
                if status != 200:
                    raise OpenCodeHTTPError(
                        "protocol_error" if status in (401, 403, 404) else "transport_error",
                        f"event stream: HTTP {status}",
                        status,
                    )
                yield source
        except httpx.HTTPError as e:
            raise OpenCodeHTTPError("transport_error", f"event stream: {e!r}") from e


def _with_id(info: Any, what: str) -> dict[str, Any]:
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        raise OpenCodeHTTPError("protocol_error", f"{what}: no id in response")
    return info
