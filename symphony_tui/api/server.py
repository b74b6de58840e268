"""HTTP API over a :class:`~symphony_tui.scheduler.port.SchedulerPort` (spec §13.7, extension).

Endpoints (JSON; errors are ``{"error": {"code", "message"}}``; a wrong method is 405):

* ``GET  /api/v1/state`` — the spec's state summary (``Snapshot.state_payload``).
  This and ``/api/v1/snapshot`` are serialized once per snapshot and carry an ``ETag``
  (``If-None-Match`` -> 304; :mod:`symphony_tui.api.bodies`).
* ``GET  /api/v1/<identifier>`` — one issue: running / retry / tracker rows, its newest 50
  events newest first (``recent_events``, ``symphony_tui.domain.activity``);
  404 ``issue_not_found`` when the scheduler does not know it.
* ``POST /api/v1/refresh`` — queue a poll + reconcile; 202 ``{queued, coalesced,
  requested_at, operations}``.
* ``GET  /api/v1/snapshot`` — the whole :class:`Snapshot` (what the console renders).
* ``GET  /api/v1/events?since=N&issue_id=&limit=`` — events after ``seq`` N (``limit`` 1 to
  10000, default 2000; 400 ``invalid_query`` otherwise). With ``issue_id``, the headers
  ``X-Transcript-Dropped-Events`` / ``-Bytes`` and ``X-Event-File`` (when events are
  written) say what that issue's transcript dropped under the memory budget.
* ``GET  /api/v1/stream`` — the snapshot, then its changes and the events, pushed as
  Server-Sent Events with ``Last-Event-ID`` resume (:mod:`symphony_tui.api.stream`).
* ``GET /metrics``, ``/api/v1/audit``, ``/api/v1/diff/<issue>``: the operator's read views
  (:mod:`symphony_tui.api.operator_routes`).
* ``POST /api/v1/commands`` — a command body (``{"type": "approve", "approval_id": ...}``, the
  ``Command`` union) -> 200 ``{ok: true, message}``; 409 ``command_rejected`` (with ``ok:
  false`` and the message) when it does not apply now, e.g. no such pending approval; 400
  ``invalid_command`` on a bad body.

Every mutating request (any method but GET, HEAD, OPTIONS) needs the control token
(``X-Symphony-Control``) or the server's bearer token, and is refused (403
``control_refused``, audited) when its client process is an agent's, a hook's or works in
a workspace (:mod:`symphony_tui.api.peers`, docs/security.md). Bodies, headers, identifiers
and streams are bounded (:mod:`symphony_tui.api.limits`, :mod:`symphony_tui.api.stream`).

The server binds 127.0.0.1 unless told otherwise (``server.host``); ``--port`` beats
``server.port``; port 0 picks a free port (see :attr:`ApiServer.port`). A non-loopback
address needs a bearer token on every request (:mod:`symphony_tui.api.auth`); without one
:meth:`ApiServer.start` refuses to bind. Requests whose ``Host`` is not one of the server's
names, and writes from a foreign ``Origin``, are refused (403) before the token is looked at.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from symphony_tui.api import announce
from symphony_tui.api.auth import (
    CONTROL_HEADER,
    LOOPBACK_NAMES,
    TokenError,
    control_matches,
    is_loopback,
    log_refusal,
    new_control_token,
    token_matches,
    write_control_token,
)
from symphony_tui.api.bodies import SnapshotBodies
from symphony_tui.api.limits import (
    KEEPALIVE_S,
    MAX_BODY_BYTES,
    BadBody,
    HeaderDeadline,
    control_character,
    control_in,
    read_json,
)
from symphony_tui.api.operator_routes import CLIENT, operator_routes, who_and_via
from symphony_tui.api.peers import Peer, PeerGuard, Verdict
from symphony_tui.api.stream import StreamHub
from symphony_tui.domain.activity import recent_events
from symphony_tui.domain.commands import Command, Refresh
from symphony_tui.scheduler.port import SchedulerPort
from symphony_tui.scheduler.posture import ControlSurface

_COMMAND: TypeAdapter[Command] = TypeAdapter(Command)
STREAM = web.AppKey("stream", StreamHub)
log = logging.getLogger(__name__)
EVENTS_LIMIT = 10_000  # the most /api/v1/events serves; transcripts keep fewer
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def _issue_payload(port: SchedulerPort, identifier: str) -> dict[str, Any] | None:
    snap = port.snapshot()
    row = next((r for r in snap.issues if r.identifier == identifier), None)
    running = next((r for r in snap.running if r.issue_identifier == identifier), None)
    retry = next((r for r in snap.retrying if r.issue_identifier == identifier), None)
    recovered = next((w for w in snap.recovered if w.issue_identifier == identifier), None)
    if row is None and running is None and retry is None and recovered is None:
        return None
    issue_id = (
        (row.issue_id if row else None)
        or (running.issue_id if running else None)
        or (retry.issue_id if retry else None)
        or (recovered.issue_id if recovered else None)
    )
    status = "running" if running else "retrying" if retry else (row.claim.value if row else "idle")
    # the whole kept transcript of the issue, then its newest events (domain.activity)
    events = port.events_since(0, limit=EVENTS_LIMIT, issue_id=issue_id) if issue_id else []
    return {
        "issue_identifier": identifier,
        "issue_id": issue_id,
        "status": status,
        "issue": row.model_dump(mode="json") if row else None,
        "workspace": {
            "path": running.workspace_path if running else (recovered.path if recovered else None),
            # The worker host holding it (None: this machine).
            "host": running.host if running else (recovered.host if recovered else None),
        },
        "running": running.model_dump(mode="json") if running else None,
        # what the live run can reach: secrets withheld, sandbox, network, transport, API
        "posture": (
            running.posture.model_dump(mode="json") if running and running.posture else None
        ),
        "retry": retry.model_dump(mode="json") if retry else None,
        "last_run": recovered.model_dump(mode="json") if recovered else None,
        "approvals": [
            a.model_dump(mode="json") for a in snap.approvals if a.issue_identifier == identifier
        ],
        "recent_events": [
            {"at": e.at.isoformat() if e.at else None, "event": e.kind.value, "message": e.message}
            for e in recent_events(events)
        ],
        "last_error": retry.error if retry else None,
        # its pull request (GitHub), as the last read found it; None: none found
        "pull_request": (
            snap.pull_requests[identifier].public() if identifier in snap.pull_requests else None
        ),
    }


def _host_name(host: str | None) -> str:
    """``host[:port]`` -> host (IPv6 brackets kept off), lowercased."""
    if not host:
        return ""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_host(origin: str) -> str:
    return origin.split("://", 1)[-1].split("/", 1)[0]


def create_app(
    port: SchedulerPort,
    *,
    hosts: frozenset[str] = frozenset(),
    token: str | None = None,
    stream: StreamHub | None = None,
    control_token: str,
    guard: PeerGuard | None = None,
) -> web.Application:
    """The aiohttp application; also usable with aiohttp's test client. ``hosts`` are extra
    names (besides loopback) that clients may use in ``Host`` / ``Origin``; ``token``, when
    set, is required as ``Authorization: Bearer`` on every request; ``control_token`` (or
    ``token``) on every mutating one, whose client ``guard`` judges (default: a
    :class:`PeerGuard` over :func:`workspace_roots`); ``stream`` carries the event
    stream's rates (defaults: :class:`StreamHub`)."""
    allowed_hosts = LOOPBACK_NAMES | {h.lower() for h in hosts}
    hub = stream or StreamHub(port)
    guard = guard or PeerGuard(lambda: workspace_roots(port))

    routes = web.RouteTableDef()

    def only(*methods: str) -> Callable:
        def wrap(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Callable:
            async def guarded(request: web.Request) -> web.StreamResponse:
                if request.method not in methods:
                    return _error(
                        405, "method_not_allowed", f"{request.method} is not allowed here"
                    )
                return await handler(request)

            return guarded

        return wrap

    bodies = SnapshotBodies()

    def stopping() -> web.Response | None:
        """A poll while the scheduler shuts down: 503 ``scheduler_stopping`` with the
        stream's ``stopping`` frame (``at``, ``reason``), so a polling console can tell a
        stopped scheduler from a link that went quiet. None otherwise (and the poll is noted)."""
        if hub.final is None:
            hub.last_poll = time.monotonic()
            return None
        hub.poller_told.set()
        frame = json.loads(hub.final)
        return web.json_response(
            {
                "error": {
                    "code": "scheduler_stopping",
                    "message": frame["reason"],
                    "at": frame["at"],
                }
            },
            status=503,
        )

    def snapshot_response(request: web.Request, body: Callable[[Any], bytes]) -> web.Response:
        if (ending := stopping()) is not None:
            return ending
        snap = port.snapshot()
        tag = bodies.etag(snap)
        headers = {"ETag": tag}
        asked = request.headers.get("If-None-Match", "")
        if asked and tag in (t.strip().removeprefix("W/") for t in asked.split(",")):
            return web.Response(status=304, headers=headers)
        return web.Response(
            body=body(snap), content_type="application/json", charset="utf-8", headers=headers
        )

    @routes.route("*", "/api/v1/state")
    @only("GET")
    async def state(request: web.Request) -> web.Response:
        return snapshot_response(request, bodies.state)

    @routes.route("*", "/api/v1/snapshot")
    @only("GET")
    async def snapshot(request: web.Request) -> web.Response:
        return snapshot_response(request, bodies.full)

    @routes.route("*", "/api/v1/events")
    @only("GET")
    async def events(request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
            limit = int(request.query.get("limit", "2000"))
        except ValueError:
            return _error(400, "invalid_query", "since and limit must be integers")
        if limit < 1:
            return _error(400, "invalid_query", "limit must be at least 1 (at most 10000 kept)")
        if (ending := stopping()) is not None:
            return ending
        limit = min(limit, EVENTS_LIMIT)
        issue_id = request.query.get("issue_id") or None
        found = port.events_since(since, limit=limit, issue_id=issue_id)
        body = "[" + ",".join(e.model_dump_json() for e in found) + "]"
        headers: dict[str, str] = {}
        if issue_id is not None:
            gap = port.transcript_gap(issue_id)
            headers["X-Transcript-Dropped-Events"] = str(gap.events)
            headers["X-Transcript-Dropped-Bytes"] = str(gap.bytes)
            if gap.event_file:
                headers["X-Event-File"] = gap.event_file
        return web.Response(text=body, content_type="application/json", headers=headers)

    @routes.route("*", "/api/v1/stream")
    @only("GET")
    async def stream_route(request: web.Request) -> web.StreamResponse:
        return await hub.handle(request)

    @routes.route("*", "/api/v1/refresh")
    @only("POST")
    async def refresh(request: web.Request) -> web.Response:
        who, via = who_and_via(request)
        result = await port.send(Refresh(), who=who, via=via)
        return web.json_response(
            {
                "queued": result.ok,
                "coalesced": False,
                "requested_at": datetime.now(UTC).isoformat(),
                "operations": ["poll", "reconcile"],
            },
            status=202,
        )

    @routes.route("*", "/api/v1/commands")
    @only("POST")
    async def commands(request: web.Request) -> web.Response:
        who, via = who_and_via(request)
        body: Any = None
        try:
            body = await read_json(request)
            bad = control_in(body)
            if bad is not None:
                await _audit_refusal(body, f"control character in {bad}", who, via)
                return _error(400, "invalid_identifier", f"control character in {bad}")
            command = _COMMAND.validate_python(body)
        except BadBody as exc:
            await _audit_refusal(None, str(exc), who, via)
            return _error(exc.status, exc.code, str(exc))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
                for err in exc.errors()[:3]
            )
            await _audit_refusal(body, problems, who, via)
            return _error(400, "invalid_command", problems)
        result = await port.send(command, who=who, via=via)
        if not result.ok:
            # valid, but it does not apply now (no such pending approval, not running, ...)
            return web.json_response(
                {
                    "ok": False,
                    "message": result.message,
                    "error": {"code": "command_rejected", "message": result.message},
                },
                status=409,
            )
        return web.json_response({"ok": True, "message": result.message})

    async def _audit_refusal(body: object, problem: str, who: str, via: str) -> None:
        # A command refused before it reached the scheduler is an operator action too: a
        # script sending a wrong field name leaves a trace of what it tried.
        kind = body.get("type") if isinstance(body, dict) else None
        what = kind if isinstance(kind, str) and kind else "command"
        issue = body.get("issue_id") if isinstance(body, dict) else None
        await port.note_action(
            what,
            who=who,
            via=via,
            issue=issue if isinstance(issue, str) else None,
            ok=False,
            message=f"refused: {problem}",
        )

    @routes.route("*", "/api/v1/{identifier}")
    @only("GET")
    async def issue(request: web.Request) -> web.Response:
        identifier = request.match_info["identifier"]
        bad = control_character(identifier)
        if bad is not None:
            return _error(400, "invalid_identifier", f"control character in the issue ({bad})")
        payload = _issue_payload(port, identifier)
        if payload is None:
            return _error(404, "issue_not_found", f"unknown issue {identifier}")
        return web.json_response(payload)

    @web.middleware
    async def local_only(request: web.Request, handler: Callable) -> web.StreamResponse:
        # A web page in the operator's browser can reach 127.0.0.1: refuse requests whose
        # Host is not this machine's name for itself (DNS rebinding) and cross-site writes
        # (an Origin from elsewhere; a body that is not JSON needs no CORS preflight).
        if _host_name(request.host) not in allowed_hosts:
            return _error(
                403,
                "forbidden_host",
                f"Host {request.host!r} is not allowed (add it to server.allowed_hosts)",
            )
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("Origin")
            if origin is not None and _host_name(_origin_host(origin)) not in allowed_hosts:
                return _error(403, "forbidden_origin", f"Origin {origin!r} is not allowed")
            if request.can_read_body and request.content_type != "application/json":
                return _error(415, "unsupported_media_type", "send the body as application/json")
        return await handler(request)

    @web.middleware
    async def bearer(request: web.Request, handler: Callable) -> web.StreamResponse:
        if token is None:
            return await handler(request)
        header = request.headers.get("Authorization")
        if not token_matches(header, token):
            log_refusal(request.remote, request.method, request.path, header)
            response = _error(401, "unauthorized", "send the API token as Authorization: Bearer")
            response.headers["WWW-Authenticate"] = 'Bearer realm="symphony-tui"'
            return response
        return await handler(request)

    @web.middleware
    async def control(request: web.Request, handler: Callable) -> web.StreamResponse:
        # The controls (docs/security.md): a credential an agent is not given, then the
        # client process judged; every refusal is audited with the client it names.
        if request.method in SAFE_METHODS:
            return await handler(request)
        if control_matches(request.headers.get(CONTROL_HEADER), control_token):
            credential = "control token"
        elif token is not None:
            credential = "bearer token"  # checked by ``bearer`` before this
        else:
            credential = None
        if credential is None:  # refused anyway: no process lookup for it (cheap to send)
            verdict = Verdict(Peer(request.remote or "?"))
        else:
            sock = request.transport.get_extra_info("socket") if request.transport else None
            verdict = await guard.judge(sock, request.remote or "?")
        request[CLIENT] = f"{verdict.peer.describe()} with the {credential or 'no credential'}"
        who, via = who_and_via(request)
        if credential is None or verdict.refusal is not None:
            why = verdict.refusal or (
                f"no control token: send {CONTROL_HEADER} (the operator's console reads it "
                "from the file its API note names, readable by this user only)"
            )
            log.warning("HTTP API: %s %s refused for %s: %s", request.method, request.path,
                        verdict.peer.describe(), why)  # fmt: skip
            await port.note_action(
                f"{request.method} {request.path}", who=who, via=via, ok=False,
                message=f"refused: {why}",
            )  # fmt: skip
            if credential is None:
                return _error(401, "control_token_required", why)
            return _error(403, "control_refused", why)
        return await handler(request)

    async def end_streams(_app: web.Application) -> None:
        hub.closing.set()

    async def open_streams(_app: web.Application) -> None:
        # A server started again with the same hub (stop, then start): streams served from
        # now on run until this server shuts down, not only to their first frame.
        hub.closing.clear()
        hub.final = None
        hub.poller_told.clear()

    @web.middleware
    async def json_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
        # aiohttp's own 404/405 pages are plain text; every error here is the JSON envelope.
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "http_error")
            return _error(exc.status, code, f"{request.method} {request.path}: {exc.reason}")
        except BadBody as exc:
            return _error(exc.status, exc.code, str(exc))
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:  # one line for the client and the log, never a traceback
            log.error("HTTP API: %s %s failed: %s: %s", request.method, request.path,
                      type(exc).__name__, str(exc)[:300])  # fmt: skip
            return _error(500, "internal_error", f"{type(exc).__name__}: {str(exc)[:300]}")

    app = web.Application(
        middlewares=[json_errors, local_only, bearer, control], client_max_size=MAX_BODY_BYTES
    )
    app.add_routes(operator_routes(port))  # before /api/v1/{identifier}
    app.add_routes(routes)
    app.on_startup.append(open_streams)
    app.on_shutdown.append(end_streams)
    app[STREAM] = hub
    return app


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def workspace_roots(port: SchedulerPort) -> list[str]:
    """Where agents work on this machine: the workflow's workspace root (a port that has
    settings) and every local running or recovered workspace."""
    roots: list[str] = []
    settings = port.settings
    root = settings.workspace.root if settings is not None else None
    if isinstance(root, str) and root:
        roots.append(root)
    snap = port.snapshot()
    roots += [r.workspace_path for r in snap.running if r.host is None and r.workspace_path]
    roots += [w.path for w in snap.recovered if w.host is None and w.path]
    return roots


class _GuardedSite(web.TCPSite):
    """``TCPSite`` whose connections must send their first request's headers in time
    (:class:`~symphony_tui.api.limits.HeaderDeadline`)."""

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: HeaderDeadline(server()),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


def serving_names(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names (besides loopback) a server bound to ``host`` answers to: ``host``
    itself and ``extra`` (``server.allowed_hosts``); bound to every address (``0.0.0.0``,
    ``::``), also this machine's host name, its fully qualified name and the addresses that
    name resolves to, so ``http://<machine>:PORT`` works from the network."""
    names = {host, *extra}
    if host in WILDCARD_HOSTS:
        machine = socket.gethostname()
        names |= {machine, socket.getfqdn()}
        with contextlib.suppress(OSError):
            names |= {str(info[4][0]) for info in socket.getaddrinfo(machine, None)}
    return frozenset(n.lower() for n in names if n)


class ApiServer:
    """Runs :func:`create_app` on the current event loop until :meth:`stop`.

    ``token``: the bearer token (see :func:`~symphony_tui.api.auth.resolve_token`); required
    when ``host`` is not loopback. ``announce_dir``: where to leave a small JSON note of the
    address while serving (:mod:`symphony_tui.api.announce`; ``attach ssh://`` reads it),
    and the control token's file beside it (:mod:`symphony_tui.api.auth`).
    ``control_token``: this server's (default: a fresh one); ``guard``: who may use the
    controls (default :class:`PeerGuard` over :func:`workspace_roots`)."""

    def __init__(
        self,
        port: SchedulerPort,
        *,
        host: str = "127.0.0.1",
        bind_port: int = 0,
        token: str | None = None,
        announce_dir: Path | None = None,
        stream: StreamHub | None = None,
        allowed_hosts: Iterable[str] = (),
        control_token: str | None = None,
        guard: PeerGuard | None = None,
        announce_extra: dict | None = None,
    ) -> None:
        self._port = port
        self.control_token = control_token or new_control_token()
        self.control_file: Path | None = None
        self._guard = guard
        self.host = host
        self.allowed_hosts = serving_names(host, allowed_hosts)
        self._bind_port = bind_port
        self.token = token
        self._announce_dir = announce_dir
        self._announced: Path | None = None
        #: More members for the note (``project``, ``workflow``, ``token_file``).
        self.announce_extra: dict = dict(announce_extra or {})
        self._stream = stream
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve. Raises :class:`~symphony_tui.api.auth.TokenError` (before
        binding) for a non-loopback ``host`` without a token, ``OSError`` when the address
        is taken."""
        if not is_loopback(self.host) and not self.token:
            raise TokenError(
                f"refusing to serve the HTTP API on {self.host} without a token "
                "(anyone who reaches it could approve agent commands)"
            )
        app = create_app(
            self._port,
            hosts=self.allowed_hosts,
            token=self.token,
            stream=self._stream,
            control_token=self.control_token,
            guard=self._guard,
        )
        self._runner = web.AppRunner(app, access_log=None, keepalive_timeout=KEEPALIVE_S)
        await self._runner.setup()
        site = _GuardedSite(self._runner, self.host, self._bind_port)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._bind_port
        # Runs' postures say the API can be reached (docs/security.md).
        self._port.serve_controls(
            ControlSurface(self.url, is_loopback(self.host), bool(self.token))
        )
        if self._announce_dir is not None:
            try:
                self.control_file = write_control_token(self._announce_dir, self.control_token)
                self._announced = announce.write(
                    self._announce_dir,
                    host=self.host,
                    port=self.port,
                    token=bool(self.token),
                    control_file=self.control_file,
                    extra=self.announce_extra,
                )
            except OSError as exc:
                log.warning("HTTP API: cannot note the address for attach ssh://: %s", exc)

    def control_headers(self) -> dict[str, str]:
        """The header carrying this server's control token (for an in-process client)."""
        return {CONTROL_HEADER: self.control_token}

    async def stop(self, *, ending: str | None = None) -> None:
        """Stop serving and remove the note and token files. ``ending``: the scheduler is
        shutting down (why, one line): each open event stream first gets its last
        ``stopping`` frame, so attached consoles show it stopped instead of reconnecting."""
        if ending is not None and self._runner is not None:
            hub = self._runner.app[STREAM]
            hub.stopping(ending)
            await hub.linger_for_pollers()
        if self.port is not None:
            self._port.serve_controls(None)
        if self._announced is not None:
            announce.remove(self._announced)
            self._announced = None
        if self.control_file is not None:
            announce.remove(self.control_file)
            self.control_file = None
        token_file = self.announce_extra.pop("token_file", None)
        if isinstance(token_file, str):
            announce.remove(Path(token_file))
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
