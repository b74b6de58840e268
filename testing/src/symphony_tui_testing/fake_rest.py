"""The common part of the fake REST trackers (:mod:`.fake_jira`, :mod:`.fake_gitlab`,
:mod:`.fake_asana`): a real HTTP server on 127.0.0.1, the record of what it received, checks
of every request and answer against the vendor's published API description, and the knobs
every vendor shares.

**Contracts**: with ``validate=True`` (the default) every request is checked against the
vendor's description (operation, path and query parameters, JSON body) and every answer
against the operation's response schema (:mod:`.openapi_contract`); each problem is a line in
:attr:`FakeRest.violations` (tests assert it stays empty). Rate-limit refusals (429) and
outages (5xx) are vendor-wide behaviours the descriptions do not list per operation: they are
produced, not checked.

Knobs: :meth:`FakeRest.rate_limit` (the next requests get ``429`` with ``Retry-After`` until
the fake's clock passes it), :meth:`FakeRest.fail_next` (one canned answer, e.g. a 502),
``requests`` (everything seen, with the answer's status).

A subclass sets :attr:`vendor`, implements :meth:`contract`, :meth:`authorized` and
:meth:`route` (``method, path, query, body -> (status, body, headers)``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from symphony_tui_testing.openapi_contract import OpenApiContract

Answer = tuple[int, Any, dict[str, str]]


@dataclass(frozen=True)
class FakeRequest:
    """One request the fake received: ``path`` without the query or the API prefix (as sent,
    percent-encoded),
    ``query`` parsed, ``body`` parsed JSON (or None), ``headers`` lowercase, the answer's
    ``status``."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]
    status: int
    at: datetime


class FakeRest:
    """A vendor's REST API over fixture data (see the module docstring). ``clock`` (aware UTC
    datetimes) drives timestamps and rate-limit windows: share it with the tracker under
    test. Thread-safe: server and test threads share one lock."""

    vendor = "vendor"
    prefix = ""
    """Path prefix of the API on the server (GitLab's ``/api/v4``); :attr:`url` includes it."""

    def __init__(
        self, *, clock: Callable[[], datetime] | None = None, validate: bool = True
    ) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))
        self._validate = validate
        self._lock = threading.RLock()
        self._failures: list[Answer] = []
        self._limited_until: datetime | None = None
        self._limit_status = 429
        self.requests: list[FakeRequest] = []
        self.violations: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        if validate:
            self.contract()  # load once up front, not inside the first request's timeout

    # -- what a vendor gives ---------------------------------------------------------

    def contract(self) -> OpenApiContract:
        raise NotImplementedError

    def authorized(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def unauthorized(self) -> Answer:
        return 401, {"message": "401 Unauthorized"}, {}

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeRest:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                args=(0.05,),
                name=f"fake-{self.vendor.lower()}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        if self._server is None:
            raise RuntimeError(f"fake {self.vendor} is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        """The API base the tracker is configured with."""
        return self.origin + self.prefix

    def now(self) -> datetime:
        return self._clock()

    # -- knobs -------------------------------------------------------------------------

    def rate_limit(self, seconds: float, *, status: int = 429) -> None:
        """Refuse every request with ``status`` and ``Retry-After: seconds`` until the fake's
        clock has moved ``seconds`` on."""
        with self._lock:
            self._limited_until = self._clock() + timedelta(seconds=seconds)
            self._limit_status = status

    def fail_next(
        self, status: int, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        """Answer the next request with ``status`` / ``body`` whatever it asks."""
        with self._lock:
            self._failures.append((status, body, dict(headers or {})))

    def seen(self, method: str | None = None, path: str | None = None) -> list[FakeRequest]:
        """Requests received, optionally only of ``method`` and with ``path`` in their path."""
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or path in r.path)
            ]

    # -- serving -----------------------------------------------------------------------

    def _handle(
        self, method: str, target: str, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], Any]:
        split = urlsplit(target)
        path = split.path
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix) :] or "/"
        query = parse_qs(split.query, keep_blank_values=True)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = ...
        with self._lock:
            now = self._clock()
            status, out_headers, payload = self._answer(
                method, path, query, body, raw, headers, now
            )
            self.requests.append(
                FakeRequest(
                    method, path, query, None if body is ... else body, headers, status, now
                )
            )
            return status, out_headers, payload

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any,
        raw: bytes, headers: dict[str, str], now: datetime,
    ) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        if self._failures:
            status, payload, extra = self._failures.pop(0)
            return status, extra, payload
        if self._limited_until is not None and now < self._limited_until:
            wait = max(1, int((self._limited_until - now).total_seconds() + 0.999))
            return self._limit_status, {"retry-after": str(wait)}, {"message": "Too Many Requests"}
        if not self.authorized(headers):
            status, payload, extra = self.unauthorized()
            return status, extra, payload
        if body is ...:
            return 400, {}, {"message": "request body is not JSON"}
        if self._validate:
            self.violations.extend(
                self.contract().validate_request(method, path, query, body, bool(raw))
            )
        status, payload, extra = self.route(method, path, query, body)
        if self._validate:
            self.violations.extend(self.check_answer(method, path, status, payload))
        return status, extra, payload

    def check_answer(self, method: str, path: str, status: int, payload: Any) -> list[str]:
        """Problems of one answer against the description (a vendor may refine this)."""
        return self.contract().validate_response(method, path, status, payload)


def http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC), usegmt=True)


def _make_handler(fake: FakeRest) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = fake._handle(self.command, self.path, raw, headers)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            if payload is not None:
                self.send_header("Content-Type", "application/json")
            for key, value in extra.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data:
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    return Handler
