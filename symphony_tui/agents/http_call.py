"""JSON requests to a local agent server, with failures as one-line :class:`AgentError`.

Shared by the OpenHands and OpenCode REST clients (docs/protocols.md "OpenHands agent-server",
"OpenCode server"): both speak JSON over plain HTTP on loopback and report failures the same
way, ``transport_error`` when the server cannot be reached or times out, ``protocol_error``
for an unexpected status or a body that is not JSON.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, ClassVar

import httpx

from symphony_tui.agents.base import AgentError

BODY_EXCERPT_CHARS = 300  # of an error response, whitespace folded, in the message


class HTTPCallError(AgentError):
    """A REST call failed; ``status`` is the HTTP status, or ``None`` for transport errors."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(code, message)
        self.status = status


class JSONClient:
    """Base of the backends' REST clients: one ``httpx.AsyncClient`` on ``base_url`` (like
    ``http://127.0.0.1:8000``, trailing ``/`` dropped) that ignores the environment's proxy
    settings (agent servers are on loopback), with ``headers`` / ``auth`` on every request
    and ``timeout_s`` seconds per request. Subclasses set ``error`` (their
    :class:`HTTPCallError` type) and ``ok`` (the accepted statuses)."""

    error: ClassVar[type[HTTPCallError]] = HTTPCallError
    ok: ClassVar[Container[int]] = range(200, 300)

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, auth=auth, timeout=timeout_s, trust_env=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """``method path`` -> the decoded JSON body, or ``None`` for an empty one.

        ``what`` names the call in error messages (``"<what>: HTTP 404: <body>"``). Raises
        ``self.error``: ``transport_error`` (``status`` ``None``) when the request fails or
        times out, ``protocol_error`` (with ``status``) for a status outside ``ok`` or a
        body that is not JSON.
        """
        error = self.error
        try:
            resp = await self._http.request(method, path, json=json, params=params)
        except httpx.TimeoutException as e:
            raise error("transport_error", f"{what}: timed out ({e!r})") from e
        except httpx.HTTPError as e:
            raise error("transport_error", f"{what}: {e!r}") from e
        if resp.status_code not in self.ok:
            body = " ".join(resp.text.split())[:BODY_EXCERPT_CHARS]
            raise error(
                "protocol_error", f"{what}: HTTP {resp.status_code}: {body}", resp.status_code
            )
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as e:
            raise error("protocol_error", f"{what}: body is not JSON", resp.status_code) from e
