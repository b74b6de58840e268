"""Linear's rate-limit headers and when to try again.

Linear answers every request with ``X-RateLimit-Requests-{Limit,Remaining,Reset}`` and
``X-RateLimit-Complexity-{Limit,Remaining,Reset}`` (resets are UTC epoch milliseconds) plus
``X-Complexity`` (the cost of this query). A limited request gets HTTP 429 or a GraphQL error
with ``extensions.code == "RATELIMITED"``; ``Retry-After`` (seconds or an HTTP date) may be
present too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

HEADERS = {
    "requests_limit": "x-ratelimit-requests-limit",
    "requests_remaining": "x-ratelimit-requests-remaining",
    "requests_reset": "x-ratelimit-requests-reset",
    "complexity_limit": "x-ratelimit-complexity-limit",
    "complexity_remaining": "x-ratelimit-complexity-remaining",
    "complexity_reset": "x-ratelimit-complexity-reset",
    "complexity": "x-complexity",
}

DEFAULT_BACKOFF = timedelta(seconds=60)
"""Pause when Linear says "limited" but gives no usable reset time."""

MIN_BACKOFF = timedelta(seconds=1)
"""Never resume sooner than this after a limit, even if the stated reset already passed."""


def read_headers(headers: httpx.Headers) -> dict[str, int]:
    """The integer rate-limit headers present in ``headers``, keyed by :data:`HEADERS` names."""
    out: dict[str, int] = {}
    for key, header in HEADERS.items():
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            out[key] = int(float(raw.strip()))
        except ValueError:
            continue
    return out


def epoch_ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def is_rate_limited(status: int, body: Any) -> bool:
    """HTTP 429, or a GraphQL error whose ``extensions.code`` is ``RATELIMITED``."""
    if status == 429:
        return True
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        for err in body["errors"]:
            ext = err.get("extensions") if isinstance(err, dict) else None
            if isinstance(ext, dict) and str(ext.get("code", "")).upper() == "RATELIMITED":
                return True
    return False


def retry_at(headers: httpx.Headers, now: datetime) -> datetime:
    """When a limited request may be retried.

    ``Retry-After`` wins; otherwise the reset of the exhausted budget (requests, then
    complexity); otherwise the later of the stated resets; otherwise ``now`` + 60 s. The result
    is at least ``now`` + 1 s so an already-passed reset cannot cause an immediate retry loop.
    """
    values = read_headers(headers)
    when: datetime | None = _retry_after(headers.get("retry-after"), now)
    if when is None:
        exhausted = [
            values[f"{b}_reset"]
            for b in ("requests", "complexity")
            if values.get(f"{b}_remaining") == 0 and f"{b}_reset" in values
        ]
        resets = exhausted or [
            values[k] for k in ("requests_reset", "complexity_reset") if k in values
        ]
        if resets:
            when = epoch_ms(max(resets))
    if when is None:
        when = now + DEFAULT_BACKOFF
    return max(when, now + MIN_BACKOFF)


def exhausted_until(values: dict[str, int], now: datetime) -> datetime | None:
    """If a successful answer says a budget is at 0 with a future reset, that reset."""
    out: datetime | None = None
    for budget in ("requests", "complexity"):
        if values.get(f"{budget}_remaining") == 0 and f"{budget}_reset" in values:
            reset = epoch_ms(values[f"{budget}_reset"])
            if reset > now and (out is None or reset > out):
                out = reset
    return out


def _retry_after(raw: str | None, now: datetime) -> datetime | None:
    if not raw:
        return None
    raw = raw.strip()
    try:
        return now + timedelta(seconds=max(0.0, float(raw)))
    except ValueError:
        pass
    try:
        parsed = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
