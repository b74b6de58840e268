"""GitHub's rate limits, read from response headers (GitHub REST docs, "Rate limits for the
REST API"; the GraphQL API sends the same headers).

Every answer carries ``x-ratelimit-limit``, ``-remaining``, ``-used``, ``-reset`` (epoch
seconds) and ``-resource`` (``core``, ``graphql``, ``search``...). A **primary** limit is spent
when ``x-ratelimit-remaining`` is ``0``: wait until ``x-ratelimit-reset``. A **secondary** limit
(too many requests at once, or too many writes) answers 403 or 429 with ``retry-after``
seconds; without it, GitHub asks to wait at least one minute. The GraphQL API also reports a
spent primary limit as HTTP 200 with an error of type ``RATE_LIMITED``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

HEADERS = {
    "x-ratelimit-limit": "limit",
    "x-ratelimit-remaining": "remaining",
    "x-ratelimit-used": "used",
    "x-ratelimit-reset": "reset",
}
"""Header -> key of :func:`read_headers` (all integers; ``reset`` in epoch seconds)."""

SECONDARY_DEFAULT_S = 60
"""Wait after a secondary limit that names no ``retry-after`` (GitHub: "at least one minute")."""


def read_headers(headers: Mapping[str, str]) -> dict[str, Any]:
    """The rate-limit values of one answer: ints under :data:`HEADERS`' keys plus
    ``resource`` (str). Missing or unparseable headers are left out."""
    out: dict[str, Any] = {}
    for header, key in HEADERS.items():
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            out[key] = int(raw.strip())
        except ValueError:
            continue
    resource = headers.get("x-ratelimit-resource")
    if resource:
        out["resource"] = resource.strip()
    return out


def retry_after(headers: Mapping[str, str], now: datetime) -> datetime | None:
    """``retry-after`` as a datetime (seconds, or an HTTP date); ``None`` when absent."""
    raw = (headers.get("retry-after") or "").strip()
    if not raw:
        return None
    try:
        return now + timedelta(seconds=max(0.0, float(raw)))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else None


def reset_at(values: Mapping[str, Any], now: datetime) -> datetime | None:
    """``x-ratelimit-reset`` as an aware datetime (never before ``now``); ``None`` if absent."""
    reset = values.get("reset")
    if not isinstance(reset, int):
        return None
    return max(now, datetime.fromtimestamp(reset, tz=now.tzinfo))


def refused_until(
    status: int, headers: Mapping[str, str], body: Any, now: datetime
) -> tuple[str, datetime] | None:
    """Whether an answer is a rate-limit refusal: ``(kind, until)`` with kind ``primary`` or
    ``secondary``, else ``None``. A 403 that is not about rate limits (a permission) is not."""
    values = read_headers(headers)
    if status == 200 and _graphql_rate_limited(body):
        return "primary", reset_at(values, now) or now + timedelta(seconds=SECONDARY_DEFAULT_S)
    if status not in (403, 429):
        return None
    after = retry_after(headers, now)
    if after is not None:
        return "secondary", after
    if values.get("remaining") == 0:
        return "primary", reset_at(values, now) or now + timedelta(seconds=SECONDARY_DEFAULT_S)
    message = body.get("message") if isinstance(body, dict) else None
    if status == 429 or (isinstance(message, str) and "rate limit" in message.lower()):
        return "secondary", now + timedelta(seconds=SECONDARY_DEFAULT_S)
    return None


def exhausted_until(values: Mapping[str, Any], now: datetime) -> datetime | None:
    """The reset of a budget an accepted answer says is spent (``remaining`` 0), else None."""
    if values.get("remaining") != 0:
        return None
    return reset_at(values, now)


def _graphql_rate_limited(body: Any) -> bool:
    if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
        return False
    return any(isinstance(e, dict) and e.get("type") == "RATE_LIMITED" for e in body["errors"])
