"""One GraphQL request to Linear: auth, timeout, error categories, rate-limit pause.

Spec §11.2 / §11.4. The API key goes in ``Authorization`` as is (Linear personal keys are sent
raw; an OAuth token would already carry its ``Bearer`` prefix). It never appears in an error
or a log line: every message built here passes through :func:`redact`.

Rate limits: a 429 or a ``RATELIMITED`` GraphQL error pauses the client until the reset
Linear states (see :mod:`.ratelimit`); while paused every call raises
``TrackerError("rate_limited", retry_at=...)`` without sending anything. A successful answer
that says a budget is exhausted pauses the same way, before Linear has to refuse us.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear import ratelimit

log = logging.getLogger(__name__)

_MAX_DETAIL = 300


@dataclass(frozen=True)
class GraphQLResponse:
    """A Linear answer that was not a rate limit: HTTP ``status``, ``body`` (parsed JSON, or
    ``None`` when it was not JSON) and ``text`` (the raw body, key redacted)."""

    status: int
    body: Any
    text: str


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if secret and secret in text:
        return text.replace(secret, "[redacted]")
    return text


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LinearClient:
    """Sends GraphQL documents to ``tracker.endpoint`` with ``tracker.api_key``.

    ``settings`` is called on every request so a reloaded WORKFLOW.md applies at once.
    ``transport`` replaces the network (tests); ``clock`` returns aware UTC datetimes.
    """

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self._transport = transport
        self._clock = clock or _utcnow
        self._http: httpx.AsyncClient | None = None
        self._paused_until: datetime | None = None
        self._limits: dict[str, Any] = {}

    @property
    def paused_until(self) -> datetime | None:
        """End of the current rate-limit pause, or ``None`` when requests may be sent."""
        if self._paused_until is not None and self._clock() >= self._paused_until:
            self._paused_until = None
        return self._paused_until

    def rate_limit_status(self) -> dict[str, Any]:
        """Latest rate-limit header values for display: ints under the keys of
        :data:`ratelimit.HEADERS` (resets as epoch ms), ``observed_at`` (datetime) and
        ``paused_until`` (datetime or ``None``). Empty values are omitted."""
        out = dict(self._limits)
        out["paused_until"] = self.paused_until
        return out

    async def post(self, query: str, variables: dict[str, Any] | None = None) -> GraphQLResponse:
        """POST one document. Raises :class:`TrackerError` with ``missing_tracker_api_key``,
        ``rate_limited`` (with ``retry_at``) or ``linear_api_request`` (transport failure or
        timeout). Any other answer, whatever its status, is returned."""
        tracker = self._settings().tracker
        key = tracker.api_key or None
        if key is None:
            raise TrackerError("missing_tracker_api_key", "tracker.api_key is not set")
        paused = self.paused_until
        if paused is not None:
            raise TrackerError(
                "rate_limited",
                f"Linear rate limit: paused until {_iso(paused)}",
                retry_at=paused,
            )
        payload = {"query": query, "variables": variables or {}}
        timeout_s = tracker.timeout_ms / 1000
        try:
            response = await self._client().post(
                tracker.endpoint,
                json=payload,
                headers={"Authorization": key, "Content-Type": "application/json"},
                timeout=timeout_s,
            )
        except httpx.TimeoutException as exc:
            detail = f"timed out after {tracker.timeout_ms} ms"
            raise self._request_error(detail, exc, key) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            raise self._request_error(f"{type(exc).__name__}: {exc}", exc, key) from None
        now = self._clock()
        values = ratelimit.read_headers(response.headers)
        if values:
            self._limits = {**values, "observed_at": now}
        text = redact(response.text, key)
        try:
            body = json.loads(response.text) if response.text else None
        except ValueError:
            body = None
        if ratelimit.is_rate_limited(response.status_code, body):
            until = ratelimit.retry_at(response.headers, now)
            self._paused_until = until
            log.warning(
                "linear rate limited status=%s paused_until=%s", response.status_code, _iso(until)
            )
            raise TrackerError(
                "rate_limited",
                f"Linear rate limit (HTTP {response.status_code}): paused until {_iso(until)}",
                retry_at=until,
            )
        exhausted = ratelimit.exhausted_until(values, now)
        if exhausted is not None:
            self._paused_until = exhausted
            log.warning("linear rate budget exhausted paused_until=%s", _iso(exhausted))
        return GraphQLResponse(status=response.status_code, body=body, text=text)

    async def execute(self, query: str, variables: dict[str, Any] | None = None) -> dict:
        """POST and return ``data``. Raises :class:`TrackerError`: the :meth:`post` categories,
        ``linear_api_status`` (non-200, status in the message), ``linear_graphql_errors``
        (top-level ``errors``) and ``linear_unknown_payload`` (no ``data`` object)."""
        key = self._settings().tracker.api_key
        response = await self.post(query, variables)
        body = response.body
        if response.status != 200:
            detail = _error_messages(body) or response.text[:_MAX_DETAIL].strip()
            message = f"HTTP {response.status} from Linear" + (f": {detail}" if detail else "")
            log.warning("linear request failed status=%s", response.status)
            raise TrackerError(
                "linear_api_status",
                redact(message, key),
                credentials_refused=response.status == 401 or _auth_error(body),
            )
        if not isinstance(body, dict):
            raise TrackerError("linear_unknown_payload", "response body is not a JSON object")
        if body.get("errors"):
            detail = _error_messages(body) or "errors present"
            raise TrackerError(
                "linear_graphql_errors", redact(detail, key), credentials_refused=_auth_error(body)
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise TrackerError("linear_unknown_payload", "response has no data object")
        return data

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        return self._http

    def _request_error(self, detail: str, exc: BaseException, key: str) -> TrackerError:
        message = redact(f"request to Linear failed: {detail}", key)
        log.warning("linear request failed error=%s", type(exc).__name__)
        return TrackerError("linear_api_request", message)


def _auth_error(body: Any) -> bool:
    """Whether a GraphQL body's errors say the API key was refused
    (``extensions.code == "AUTHENTICATION_ERROR"``, as Linear answers a bad key)."""
    if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
        return False
    return any(
        isinstance(e, dict)
        and isinstance(e.get("extensions"), dict)
        and e["extensions"].get("code") == "AUTHENTICATION_ERROR"
        for e in body["errors"]
    )


def _error_messages(body: Any) -> str:
    """First GraphQL error messages of a body, joined and shortened to one line."""
    if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
        return ""
    parts = []
    for err in body["errors"][:3]:
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            parts.append(err["message"])
    text = "; ".join(parts).replace("\n", " ")
    return text[:_MAX_DETAIL]


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
