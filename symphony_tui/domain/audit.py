"""One operator action as the audit log keeps it (``audit.jsonl``, one object a line).

Written by :mod:`symphony_tui.scheduler.audit`; served at ``GET /api/v1/audit``
(docs/http-api.md) and shown in the console's audit screen.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class AuditEntry(BaseModel):
    """``who`` did ``what`` ``at`` (UTC) and how it went.

    ``who`` is ``user@host`` of the operator (for the HTTP API: what the client says,
    ``X-Symphony-Operator``, else ``api``); ``via`` is ``console`` (this process),
    ``HTTP API from <address>`` (a request; ``fleet (HTTP API from <address>)`` from
    ``symphony-tui fleet``) or ``attached console <address>``; ``what`` is the
    command type (``interrupt``, ``approve``...) or a console action (``shell``,
    ``editor``, ``export``, ``copy``); ``issue`` the issue id or identifier acted on;
    ``detail`` the command's other fields, one line; ``ok`` and ``message`` its result;
    ``project``: in a fleet console, the project whose scheduler recorded it (as every
    fleet row carries it; ``None`` in a scheduler's own log).
    """

    model_config = ConfigDict(frozen=True)

    v: int = 1
    at: datetime
    who: str
    via: str = "console"
    what: str
    issue: str | None = None
    detail: str = ""
    ok: bool = True
    message: str = ""
    #: Set by a fleet console on the entries it reads; never written or served.
    project: str | None = Field(default=None, exclude=True)
