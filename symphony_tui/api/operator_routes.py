"""The operator's tool endpoints of the HTTP API (docs/http-api.md):

* ``GET  /metrics`` — Prometheus text format (:mod:`symphony_tui.api.metrics`).
* ``GET  /api/v1/audit?limit=N`` — ``{"entries": [...]}``, the newest ``N`` (1 to 1000,
  default 200) operator actions oldest first (:class:`~symphony_tui.domain.audit.AuditEntry`).
* ``POST /api/v1/audit`` — ``{"what", "issue"?, "detail"?, "ok"?, "message"?}``: an action an
  attached console did on its own machine (an export), audited here -> 201 the entry.
* ``GET  /api/v1/diff/<issue>`` — the :class:`~symphony_tui.domain.diff.WorkspaceDiff` of the
  issue's workspace (id or identifier); 404 ``no_workspace`` when it has none.
* ``GET  /api/v1/diff/<issue>/file?path=P&offset=N&limit=M`` — one
  :class:`~symphony_tui.domain.diff.DiffPage` (``limit`` 1 to 2000, default 400); 400
  ``invalid_query`` for a missing path or bad numbers.

Who did a command or an action: the ``X-Symphony-Operator`` header (``user@host``, which
``symphony-tui attach`` sends), else ``api``; ``via`` is ``HTTP API from <client>``, in
parentheses after the client's kind when it names one (``X-Symphony-Via: fleet`` ->
``fleet (HTTP API from ...)``).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from symphony_tui.api import metrics
from symphony_tui.api.limits import BadBody, read_json
from symphony_tui.scheduler.port import SchedulerPort

OPERATOR_HEADER = "X-Symphony-Operator"
#: What kind of client sends a request (``fleet``: ``symphony-tui fleet``), put first in the
#: audit log's ``via``; lowercase letters and ``-`` only, else ignored.
VIA_HEADER = "X-Symphony-Via"
_VIA = re.compile(r"[a-z][a-z-]{0,19}")
#: The client of a mutating request as the control check found it (``127.0.0.1 pid 4242
#: (python3) uid 1000 with the control token``), set by the server's ``control`` step.
#: (``web.RequestKey`` where this aiohttp has it; a plain key before.)
CLIENT: Any = web.RequestKey("client", str) if hasattr(web, "RequestKey") else "client"
AUDIT_LIMIT = 1_000
PAGE_LIMIT = 2_000


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def who_and_via(request: web.Request) -> tuple[str, str]:
    """``(who, via)`` of a request for the audit log: ``via`` says it came over the HTTP
    API and names the client process when the control check found it (``HTTP API from
    127.0.0.1 pid 4242 (python3) uid 1000 with the control token``), in parentheses after
    the client's own kind when it says one (``fleet (HTTP API from ...)``:
    :data:`VIA_HEADER`). Never a bare ``api ...``, which reads as a fleet project's name."""
    who = (request.headers.get(OPERATOR_HEADER) or "").strip()[:120] or "api"
    via = f"HTTP API from {request.get(CLIENT) or request.remote or '?'}"
    kind = (request.headers.get(VIA_HEADER) or "").strip()
    return who, f"{kind} ({via})" if _VIA.fullmatch(kind) else via


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    value = int(raw)  # ValueError: the caller answers 400
    if not low <= value <= high:
        raise ValueError(f"{name} must be {low} to {high}")
    return value


def operator_routes(port: SchedulerPort) -> web.RouteTableDef:
    """The routes above; added before ``/api/v1/{identifier}``, which would match
    ``/api/v1/audit``."""
    routes = web.RouteTableDef()

    @routes.get("/metrics")
    async def metrics_route(request: web.Request) -> web.Response:
        body = metrics.render(port.snapshot)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE_LATEST})

    @routes.get("/api/v1/audit")
    async def audit(request: web.Request) -> web.Response:
        try:
            limit = _int(request, "limit", 200, 1, AUDIT_LIMIT)
        except ValueError as exc:
            return _error(400, "invalid_query", f"limit: {exc}")
        entries = await port.audit_entries(limit)
        body = '{"entries":[' + ",".join(e.model_dump_json() for e in entries) + "]}"
        return web.Response(text=body, content_type="application/json")

    @routes.post("/api/v1/audit")
    async def note(request: web.Request) -> web.Response:
        try:
            body = await read_json(request)
        except BadBody as exc:
            return _error(exc.status, exc.code, str(exc))
        if not isinstance(body, dict) or not isinstance(body.get("what"), str) or not body["what"]:
            return _error(400, "invalid_body", "what (a non-empty string) is required")
        fields = {
            k: body[k]
            for k, kind in (("issue", str), ("detail", str), ("message", str), ("ok", bool))
            if isinstance(body.get(k), kind)
        }
        who, via = who_and_via(request)
        entry = await port.note_action(body["what"], who=who, via=via, **fields)
        if entry is None:
            return _error(409, "not_audited", "this scheduler keeps no audit log")
        return web.Response(text=entry.model_dump_json(), content_type="application/json",
                            status=201)  # fmt: skip

    @routes.get("/api/v1/diff/{issue}")
    async def diff(request: web.Request) -> web.Response:
        found = await port.diff(request.match_info["issue"])
        status = 404 if found.error and not found.workspace_path else 200
        if status == 404:
            return _error(404, "no_workspace", found.error or "no workspace")
        return web.Response(text=found.model_dump_json(), content_type="application/json")

    @routes.get("/api/v1/diff/{issue}/file")
    async def diff_file(request: web.Request) -> web.Response:
        path = request.query.get("path")
        if not path:
            return _error(400, "invalid_query", "path (the file, relative) is required")
        try:
            offset = _int(request, "offset", 0, 0, 10**9)
            limit = _int(request, "limit", 400, 1, PAGE_LIMIT)
        except ValueError as exc:
            return _error(400, "invalid_query", str(exc))
        page = await port.diff_file(request.match_info["issue"], path, offset=offset, limit=limit)
        return web.Response(text=page.model_dump_json(), content_type="application/json")

    return routes
