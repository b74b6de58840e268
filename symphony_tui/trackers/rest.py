"""HTTP for the REST trackers (Jira, GitLab, Asana): one request, its error categories and the
rate-limit pause. Each adapter gives its vendor's name, category prefix, base URL and auth
headers; the rest is shared.

**Errors** (spec §11.4, one line each, the credential never in them, :func:`redact`):
the portable categories: ``tracker_request`` (transport failure or timeout),
``tracker_status`` (a non-2xx answer; ``credentials_refused`` on 401), ``tracker_response``
and ``tracker_pagination`` (raised by adapters), ``tracker_rate_limited``.

**Rate limits**: a ``429`` pauses the client until ``Retry-After`` (seconds or an HTTP date),
else the vendor's reset header (``RateLimit-Reset`` / ``X-RateLimit-Reset``: epoch seconds
or an ISO-8601 time), else :data:`DEFAULT_BACKOFF`; never less than :data:`MIN_BACKOFF`. A
``503`` that carries ``Retry-After`` (Jira and GitLab send it when overloaded) pauses the same
way. While paused every call raises ``TrackerError("tracker_rate_limited",
retry_at=...)`` without sending anything. An accepted answer whose ``RateLimit-Remaining`` /
``X-RateLimit-Remaining`` is ``0`` pauses until its reset, before the vendor must refuse us.
Any other ``5xx`` is a ``tracker_status`` error (the scheduler tries again next tick).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from symphony_tui.config import rest_trackers
from symphony_tui.config.settings import Settings, TrackerSettings
from symphony_tui.trackers.base import TrackerError

log = logging.getLogger(__name__)

DEFAULT_BACKOFF = timedelta(seconds=60)
"""Pause after a refusal that names no time to come back."""
MIN_BACKOFF = timedelta(seconds=1)
"""Never resume sooner than this after a refusal, even if the stated time already passed."""
_MAX_DETAIL = 300
_RESET = ("retry-after", "ratelimit-reset", "x-ratelimit-reset")
_REMAINING = ("ratelimit-remaining", "x-ratelimit-remaining")


@dataclass(frozen=True)
class RestResponse:
    """One answer: ``status``, ``body`` (parsed JSON or ``None``), ``text`` (raw body, the
    credential redacted) and ``headers`` (lowercase keys)."""

    status: int
    body: Any
    text: str
    headers: dict[str, str]


@dataclass(frozen=True)
class Vendor:
    """What differs between the REST trackers: ``name`` (said in messages), ``prefix`` (of
    the error categories), ``base_url`` and ``headers`` (auth included; raise a
    ``TrackerError`` when a credential is missing) from the tracker settings, and the
    ``secrets`` to redact from every message."""

    name: str
    prefix: str
    base_url: Callable[[TrackerSettings], str]
    headers: Callable[[TrackerSettings], dict[str, str]]
    secrets: Callable[[TrackerSettings], tuple[str, ...]]


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def _utcnow() -> datetime:
    return datetime.now(UTC)


class RestClient:
    """Requests against one vendor's REST API. ``settings`` is called on every request (hot
    reload); ``transport`` replaces the network (tests); ``clock`` gives aware UTC times."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        vendor: Vendor,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self.vendor = vendor
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
        """The latest rate-limit headers seen (``limit``, ``remaining``, ``reset`` as sent,
        ``observed_at``) and ``paused_until``."""
        return {**self._limits, "paused_until": self.paused_until}

    def redact(self, text: str) -> str:
        return redact(text, self.vendor.secrets(self._settings().tracker))

    def now(self) -> datetime:
        """The client's clock (aware UTC)."""
        return self._clock()

    async def request(
        self,
        method: str,
        path_or_url: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, Any]] | None = None,
        body: Any = None,
    ) -> RestResponse:
        """Send one request (``path_or_url`` relative to the vendor's base URL, or a full URL
        on the same origin). Raises :class:`TrackerError`: a missing credential (the vendor's
        category), ``tracker_rate_limited`` (``retry_at`` set) or ``tracker_request``; any other
        answer, whatever its status, is returned."""
        tracker = self._settings().tracker
        vendor = self.vendor
        secrets = vendor.secrets(tracker)
        headers = vendor.headers(tracker)
        paused = self.paused_until
        if paused is not None:
            raise TrackerError(
                "tracker_rate_limited",
                f"{vendor.name} rate limit: paused until {_iso(paused)}",
                retry_at=paused,
            )
        url = self._url(path_or_url, vendor.base_url(tracker))
        try:
            response = await self._client().request(
                method.upper(),
                url,
                params=_params(params),
                json=body,
                headers=headers,
                timeout=tracker.timeout_ms / 1000,
            )
        except httpx.TimeoutException:
            raise self._request_error(f"timed out after {tracker.timeout_ms} ms", secrets) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            raise self._request_error(f"{type(exc).__name__}: {exc}", secrets) from None
        now = self._clock()
        lowered = {k.lower(): v for k, v in response.headers.items()}
        self._observe(lowered, now)
        text = redact(response.text, secrets)
        try:
            body_out = json.loads(response.text) if response.text else None
        except ValueError:
            body_out = None
        status = response.status_code
        if status == 429 or (status == 503 and "retry-after" in lowered):
            until = _retry_at(lowered, now)
            self._paused_until = until
            what = "rate limit" if status == 429 else "unavailable"
            log.warning("%s %s status=%s paused_until=%s", vendor.prefix, what, status, _iso(until))
            raise TrackerError(
                "tracker_rate_limited",
                f"{vendor.name} {what} (HTTP {status}): paused until {_iso(until)}",
                retry_at=until,
            )
        exhausted = _exhausted_until(lowered, now)
        if exhausted is not None:
            self._paused_until = exhausted
            log.warning("%s rate budget exhausted paused_until=%s", vendor.prefix, _iso(exhausted))
        return RestResponse(status, body_out, text, lowered)

    def ok_body(self, response: RestResponse, what: str) -> Any:
        """The body of a 2xx answer; raises ``tracker_status`` for any other status,
        with the vendor's error message when it gave one."""
        if 200 <= response.status < 300:
            return response.body
        detail = _error_detail(response.body) or response.text[:_MAX_DETAIL].strip()
        detail = " ".join(detail.split())[:_MAX_DETAIL]
        message = f"HTTP {response.status} from {self.vendor.name} for {what}" + (
            f": {detail}" if detail else ""
        )
        log.warning(
            "%s request failed status=%s what=%s", self.vendor.prefix, response.status, what
        )
        raise TrackerError(
            "tracker_status",
            self.redact(message),
            credentials_refused=response.status == 401,
        )

    async def json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, Any]] | None = None,
        body: Any = None,
    ) -> Any:
        """:meth:`request` and :meth:`ok_body` in one."""
        return self.ok_body(await self.request(method, path, params=params, body=body), path)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _observe(self, headers: dict[str, str], now: datetime) -> None:
        values = {
            key: headers[name]
            for key, names in (
                ("limit", ("ratelimit-limit", "x-ratelimit-limit")),
                ("remaining", _REMAINING),
                ("reset", ("ratelimit-reset", "x-ratelimit-reset")),
            )
            for name in names
            if name in headers
        }
        if values:
            self._limits = {**values, "observed_at": now}

    def _url(self, path_or_url: str, base_url: str) -> str:
        if path_or_url.startswith(("https://", "http://")):
            base, target = httpx.URL(base_url), httpx.URL(path_or_url)
            if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
                raise TrackerError(
                    "tracker_request",
                    f"{self.vendor.name} pointed outside its base URL",
                )
            return path_or_url
        return base_url.rstrip("/") + "/" + path_or_url.lstrip("/")

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        return self._http

    def _request_error(self, detail: str, secrets: tuple[str, ...]) -> TrackerError:
        message = redact(f"request to {self.vendor.name} failed: {detail}", secrets)
        log.warning("%s request failed: %s", self.vendor.prefix, message)
        return TrackerError("tracker_request", " ".join(message.split()))


class RestTracker:
    """What the Jira, GitLab and Asana trackers share: the client for their :data:`VENDOR`
    (set by each), the rate-limit view for the console, redaction and closing.
    ``settings`` is read on every call (hot reload); ``transport`` replaces the network in
    tests; ``clock`` gives aware UTC datetimes and drives the rate-limit pause."""

    VENDOR: Vendor
    kind: str

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self.client = RestClient(settings, self.VENDOR, transport=transport, clock=clock)

    @property
    def paused_until(self) -> datetime | None:
        """End of the current rate-limit pause (UTC), or ``None``."""
        return self.client.paused_until

    def rate_limit_status(self) -> dict[str, Any]:
        return self.client.rate_limit_status()

    def redact(self, text: str) -> str:
        """``text`` with the credential replaced by ``[redacted]``."""
        return self.client.redact(text)

    def secret_environment_names(self) -> frozenset[str]:
        """The kind's default credential variables, the one the credential setting names
        (``$VAR``) and the workflow's declared secret names (spec §15.3)."""
        tracker = self._tracker()
        names = {*rest_trackers.SECRET_NAMES.get(self.kind, ()), *tracker.secret_env_names}
        if tracker.api_key_env:
            names.add(tracker.api_key_env)
        return frozenset(names)

    async def aclose(self) -> None:
        await self.client.aclose()

    def _tracker(self) -> TrackerSettings:
        return self._settings().tracker


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time (``Z``, ``+00:00`` or Jira's ``+0000``) -> aware datetime; anything
    else -> ``None``."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if len(text) > 5 and text[-5] in "+-" and text[-4:].isdigit():
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _params(
    params: Mapping[str, Any] | list[tuple[str, Any]] | None,
) -> list[tuple[str, str]] | None:
    if not params:
        return None
    items = params.items() if isinstance(params, Mapping) else params
    return [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in items]


def _when(raw: str, now: datetime, *, header: str) -> datetime | None:
    """A reset header's time: seconds to wait (``Retry-After``), epoch seconds (a number
    past 10^9), an ISO-8601 time or an HTTP date; ``None`` when unreadable."""
    raw = raw.strip()
    try:
        number = float(raw)
    except ValueError:
        number = None
    if number is not None:
        if header != "retry-after" and number > 1e9:
            return datetime.fromtimestamp(number, tz=UTC)
        return now + timedelta(seconds=max(0.0, number))
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _retry_at(headers: Mapping[str, str], now: datetime) -> datetime:
    for header in _RESET:
        if header in headers:
            when = _when(headers[header], now, header=header)
            if when is not None:
                return max(when, now + MIN_BACKOFF)
    return now + DEFAULT_BACKOFF


def _exhausted_until(headers: Mapping[str, str], now: datetime) -> datetime | None:
    remaining = next((headers[h] for h in _REMAINING if h in headers), None)
    if remaining is None or remaining.strip() != "0":
        return None
    for header in ("ratelimit-reset", "x-ratelimit-reset"):
        if header in headers:
            when = _when(headers[header], now, header=header)
            if when is not None and when > now:
                return when
    return None


def _error_detail(body: Any) -> str:
    """The vendor's own words from an error body: Jira's ``errorMessages`` / ``errors``,
    GitLab's ``message`` / ``error``, Asana's ``errors[].message``."""
    if not isinstance(body, dict):
        return ""
    parts: list[str] = []
    for key in ("errorMessages", "errors"):
        value = body.get(key)
        if isinstance(value, list):
            for item in value[:3]:
                if isinstance(item, str):
                    parts.append(item)
                elif isinstance(item, dict) and isinstance(item.get("message"), str):
                    parts.append(item["message"])
        elif isinstance(value, dict):
            parts += [f"{k}: {v}" for k, v in list(value.items())[:3]]
    for key in ("message", "error", "error_description"):
        value = body.get(key)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, dict | list):
            parts.append(json.dumps(value)[:_MAX_DETAIL])
    return "; ".join(parts)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
