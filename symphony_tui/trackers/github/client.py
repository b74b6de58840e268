"""HTTP to GitHub: REST with ETags and Link pagination, GraphQL, and the rate-limit pause.

Headers follow GitHub's REST docs: ``Accept: application/vnd.github+json``,
``Authorization: Bearer <token>``, ``X-GitHub-Api-Version: 2022-11-28`` and a
``User-Agent``. The token never appears in an error or a log line (:func:`redact`).

**Conditional requests**: every GET answer with an ``ETag`` is kept (body and ``Link``, at most
:data:`ETAG_ENTRIES` URLs, least recently used dropped); the next GET of the same URL sends
``If-None-Match`` and a ``304 Not Modified`` reuses the kept answer (GitHub does not count an
authorized 304 against the primary rate limit).

**Pagination**: :meth:`GitHubClient.paged` follows ``Link: <...>; rel="next"`` to the end.

**Writes** (POST, PATCH, PUT, DELETE and GraphQL mutations) go one at a time, at least
:data:`WRITE_INTERVAL_S` apart, as GitHub's best practices ask to stay clear of secondary
limits ("make requests serially", "wait at least one second between each" write).

**Rate limits** (:mod:`.ratelimit`): a refusal (primary or secondary) pauses the client until
the time GitHub states; while paused every call raises ``TrackerError("rate_limited",
retry_at=...)`` without sending anything. An accepted answer with ``x-ratelimit-remaining: 0``
pauses the same way, before GitHub has to refuse us.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.github import ratelimit

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
USER_AGENT = "symphony-tui"
ETAG_ENTRIES = 512
WRITE_INTERVAL_S = 1.0
"""Least time between two writes (GitHub REST docs, "Best practices": one second)."""
MAX_PAGES = 500
"""Guard against a ``Link`` chain that never ends (50 000 issues at 100 a page)."""
_MAX_DETAIL = 300


@dataclass(frozen=True)
class RestResponse:
    """One GitHub answer: ``status`` (a reused 304 reports the kept 200), ``body`` (parsed
    JSON or ``None``), ``text`` (raw body, token redacted), ``headers`` (lowercase keys) and
    ``cached`` (True when GitHub said 304 and the kept body was reused)."""

    status: int
    body: Any
    text: str
    headers: dict[str, str]
    cached: bool = False


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if secret and secret in text:
        return text.replace(secret, "[redacted]")
    return text


def graphql_url(api_url: str) -> str:
    """The GraphQL endpoint of a REST base: ``https://api.github.com`` -> ``.../graphql``;
    GitHub Enterprise Server ``https://HOST/api/v3`` -> ``https://HOST/api/graphql``."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/v3")] + "/graphql"
    return base + "/graphql"


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (RFC 8288), or ``None``."""
    if not header:
        return None
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces or not (pieces[0].startswith("<") and pieces[0].endswith(">")):
            continue
        rels = {p.split("=", 1)[1].strip('"') for p in pieces[1:] if p.startswith("rel=")}
        if "next" in " ".join(rels).split():
            return pieces[0][1:-1]
    return None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class GitHubClient:
    """Requests against ``tracker.api_url`` with the token in ``tracker.api_key``.

    ``settings`` is called on every request so a reloaded WORKFLOW.md applies at once.
    ``transport`` replaces the network (tests); ``clock`` returns aware UTC datetimes.
    """

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._transport = transport
        self._clock = clock or _utcnow
        self._sleep = sleep
        self._monotonic = monotonic
        self._write_lock: asyncio.Lock | None = None
        self._last_write: float | None = None
        self._http: httpx.AsyncClient | None = None
        self._paused_until: datetime | None = None
        self._limits: dict[str, dict[str, Any]] = {}
        self._etags: OrderedDict[str, RestResponse] = OrderedDict()
        self.not_modified = 0
        """How many GETs GitHub answered 304 (the kept answer was reused)."""

    @property
    def paused_until(self) -> datetime | None:
        """End of the current rate-limit pause, or ``None`` when requests may be sent."""
        if self._paused_until is not None and self._clock() >= self._paused_until:
            self._paused_until = None
        return self._paused_until

    def rate_limit_status(self) -> dict[str, Any]:
        """Latest rate-limit values per resource (``core``, ``graphql``...; see
        :func:`ratelimit.read_headers`, plus ``observed_at``) and ``paused_until``."""
        out: dict[str, Any] = {k: dict(v) for k, v in self._limits.items()}
        out["paused_until"] = self.paused_until
        return out

    def redact(self, text: str) -> str:
        return redact(text, self._settings().tracker.api_key)

    # -- REST --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path_or_url: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
    ) -> RestResponse:
        """Send one REST request (``path_or_url`` relative to ``tracker.api_url``, or a full
        URL from a ``Link`` header). Raises :class:`TrackerError` with
        ``missing_github_token``, ``rate_limited`` (``retry_at`` set) or
        ``github_api_request``; any other answer, whatever its status, is returned."""
        tracker = self._settings().tracker
        url = self._url(path_or_url, tracker.api_url)
        request = self._client().build_request(
            method.upper(),
            url,
            params=_params(params),
            json=body if body is not None else None,
            headers=self._headers(),
            timeout=tracker.timeout_ms / 1000,
        )
        cache_key = str(request.url)
        kept = self._etags.get(cache_key) if request.method == "GET" else None
        if kept is not None and kept.headers.get("etag"):
            request.headers["If-None-Match"] = kept.headers["etag"]
        if request.method == "GET":
            response = await self._send(request)
        else:
            response = await self._paced(request)
        if response.status == 304 and kept is not None:
            self.not_modified += 1
            self._etags.move_to_end(cache_key)
            return RestResponse(kept.status, kept.body, kept.text, kept.headers, cached=True)
        if request.method == "GET" and response.status == 200 and response.headers.get("etag"):
            self._etags[cache_key] = response
            self._etags.move_to_end(cache_key)
            while len(self._etags) > ETAG_ENTRIES:
                self._etags.popitem(last=False)
        return response

    async def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET and return the body of a 2xx answer; ``github_api_status`` otherwise."""
        response = await self.request("GET", path, params=params)
        return self.ok_body(response, path)

    async def paged(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a list endpoint, following ``Link: rel="next"`` to the end."""
        items: list[Any] = []
        url: str | None = path
        query = params
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            if url is None:
                return items
            response = await self.request("GET", url, params=query)
            page = self.ok_body(response, path)
            if not isinstance(page, list):
                raise TrackerError("github_unknown_payload", f"{path} did not answer a list")
            items.extend(page)
            url, query = next_link(response.headers.get("link")), None
            if url is not None:
                if url in seen:
                    raise TrackerError("github_unknown_payload", f"{path}: Link next repeats")
                seen.add(url)
        raise TrackerError("github_unknown_payload", f"{path}: more than {MAX_PAGES} pages")

    def ok_body(self, response: RestResponse, what: str) -> Any:
        """The body of a 2xx answer; raises ``github_api_status`` for any other status."""
        if 200 <= response.status < 300:
            return response.body
        detail = ""
        if isinstance(response.body, dict) and isinstance(response.body.get("message"), str):
            detail = response.body["message"]
        detail = detail or response.text[:_MAX_DETAIL].strip()
        message = f"HTTP {response.status} from GitHub for {what}" + (
            f": {detail[:_MAX_DETAIL]}" if detail else ""
        )
        log.warning("github request failed status=%s what=%s", response.status, what)
        raise TrackerError(
            "github_api_status", self.redact(message), credentials_refused=response.status == 401
        )

    # -- GraphQL -----------------------------------------------------------------------

    async def graphql_raw(
        self, query: str, variables: dict[str, Any] | None = None
    ) -> RestResponse:
        """POST one GraphQL document; raises like :meth:`request`, returns any other answer."""
        tracker = self._settings().tracker
        request = self._client().build_request(
            "POST",
            graphql_url(tracker.api_url),
            json={"query": query, "variables": variables or {}},
            headers=self._headers(),
            timeout=tracker.timeout_ms / 1000,
        )
        if query.lstrip().startswith("mutation"):
            return await self._paced(request)
        return await self._send(request)

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict:
        """POST and return ``data``. Raises the :meth:`request` categories,
        ``github_api_status`` (non-200), ``github_graphql_errors`` (top-level ``errors``) and
        ``github_unknown_payload`` (no ``data`` object)."""
        response = await self.graphql_raw(query, variables)
        body = response.body
        if response.status != 200:
            self.ok_body(response, "GraphQL")
        if not isinstance(body, dict):
            raise TrackerError("github_unknown_payload", "GraphQL answer is not a JSON object")
        if body.get("errors"):
            raise TrackerError("github_graphql_errors", self.redact(_error_messages(body)))
        data = body.get("data")
        if not isinstance(data, dict):
            raise TrackerError("github_unknown_payload", "GraphQL answer has no data object")
        return data

    async def download_tail(self, url: str, max_bytes: int) -> str:
        """The last ``max_bytes`` of the file at ``url`` (a signed URL GitHub redirected
        to, on another host: sent without the token or GitHub's headers), decoded as UTF-8
        with bad bytes replaced. Raises ``github_api_request`` / ``github_api_status``."""
        timeout = self._settings().tracker.timeout_ms / 1000
        token = self._settings().tracker.api_key
        kept: list[bytes] = []
        size = 0
        try:
            async with self._client().stream("GET", url, timeout=timeout) as response:
                if response.status_code != 200:
                    raise TrackerError(
                        "github_api_status", f"HTTP {response.status_code} reading a job log"
                    )
                async for chunk in response.aiter_bytes():
                    kept.append(chunk)
                    size += len(chunk)
                    while size - len(kept[0]) >= max_bytes:
                        size -= len(kept.pop(0))
        except httpx.TimeoutException:
            raise self._request_error("timed out reading a job log", token) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            raise self._request_error(f"{type(exc).__name__}: {exc}", token) from None
        return b"".join(kept)[-max_bytes:].decode("utf-8", errors="replace")

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # -- internals ---------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        token = self._settings().tracker.api_key
        if not token:
            raise TrackerError("missing_github_token", "no GitHub token (tracker.token)")
        return {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }

    def _url(self, path_or_url: str, api_url: str) -> str:
        if path_or_url.startswith(("https://", "http://")):
            base, target = urlsplit(api_url), urlsplit(path_or_url)
            if (target.scheme, target.netloc) != (base.scheme, base.netloc):
                raise TrackerError("github_api_request", "Link points outside tracker.api_url")
            return path_or_url
        return api_url.rstrip("/") + "/" + path_or_url.lstrip("/")

    async def _paced(self, request: httpx.Request) -> RestResponse:
        """Send a write: after the previous one, :data:`WRITE_INTERVAL_S` after it at least."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            if self._last_write is not None:
                wait = self._last_write + WRITE_INTERVAL_S - self._monotonic()
                if wait > 0:
                    await self._sleep(wait)
            try:
                return await self._send(request)
            finally:
                self._last_write = self._monotonic()

    async def _send(self, request: httpx.Request) -> RestResponse:
        token = self._settings().tracker.api_key
        paused = self.paused_until
        if paused is not None:
            raise TrackerError(
                "rate_limited", f"GitHub rate limit: paused until {_iso(paused)}", retry_at=paused
            )
        try:
            response = await self._client().send(request)
        except httpx.TimeoutException:
            raise self._request_error("timed out", token) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            raise self._request_error(f"{type(exc).__name__}: {exc}", token) from None
        now = self._clock()
        headers = {k.lower(): v for k, v in response.headers.items()}
        values = ratelimit.read_headers(headers)
        if values:
            self._limits[values.get("resource", "core")] = {**values, "observed_at": now}
        text = redact(response.text, token)
        try:
            body = json.loads(response.text) if response.text else None
        except ValueError:
            body = None
        refused = ratelimit.refused_until(response.status_code, headers, body, now)
        if refused is not None:
            kind, until = refused
            self._paused_until = until
            log.warning("github %s rate limit paused_until=%s", kind, _iso(until))
            raise TrackerError(
                "rate_limited",
                f"GitHub {kind} rate limit (HTTP {response.status_code}): "
                f"paused until {_iso(until)}",
                retry_at=until,
            )
        exhausted = ratelimit.exhausted_until(values, now)
        if exhausted is not None and exhausted > now:
            self._paused_until = exhausted
            log.warning("github rate budget exhausted paused_until=%s", _iso(exhausted))
        return RestResponse(response.status_code, body, text, headers)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        return self._http

    def _request_error(self, detail: str, token: str | None) -> TrackerError:
        log.warning("github request failed: %s", redact(detail, token))
        return TrackerError(
            "github_api_request", redact(f"request to GitHub failed: {detail}", token)
        )


def _params(params: dict[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}


def _error_messages(body: dict) -> str:
    parts = [
        e["message"]
        for e in body.get("errors", [])[:3]
        if isinstance(e, dict) and isinstance(e.get("message"), str)
    ]
    return ("; ".join(parts) or "errors present").replace("\n", " ")[:_MAX_DETAIL]


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
