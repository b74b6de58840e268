"""A workspace's manifests as a :class:`~symphony_tui.domain.RecoveredWorkspace` (spec §9
recovery; the layout is ``manifest.py``'s). Shared by the local and remote workspaces."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from symphony_tui.domain import RecoveredWorkspace
from symphony_tui.observability.logs import log_kv

log = logging.getLogger(__name__)

# RecoveredWorkspace fields read from the session section first, then from the run section.
_SESSION_FIRST = (
    "backend",
    "session_id",
    "thread_id",
    "conversation_id",
    "server_url",
    "tokens",
    "last_event",
)
_RUN_ONLY = (
    "attempt",
    "status",
    "error",
    "started_at",
    "ended_at",
    "hooks",
    "held",
    "held_updated_at",
    "budget_extra",
    "budget_extra_usd",
    "usage_reported",
)
_ISSUE_FIELDS = {
    "issue_id": "id",
    "issue_identifier": "identifier",
    "issue_title": "title",
    "issue_state": "state",
}

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(field.annotation)
    for name, field in RecoveredWorkspace.model_fields.items()
    if field.annotation is not None  # every declared field has one
}


def recovered_from(ws: Path, manifest: dict[str, dict[str, Any]]) -> RecoveredWorkspace | None:
    """The recovered view of workspace ``ws`` from its ``manifest`` sections; None when it
    has none. Bad values are skipped with a warning."""
    if not manifest:
        return None
    issue = manifest.get("issue", {})
    run = manifest.get("run", {})
    session = manifest.get("session", {})
    raw: dict[str, Any] = {}
    for field, key in _ISSUE_FIELDS.items():
        raw[field] = issue.get(key)
    for field in _SESSION_FIRST:
        raw[field] = session.get(field, run.get(field))
    for field in _RUN_ONLY:
        raw[field] = run.get(field)
    if isinstance(raw.get("hooks"), dict):
        raw["hooks"] = {str(k): str(v) for k, v in raw["hooks"].items()}
    values: dict[str, Any] = {"key": ws.name, "path": str(ws)}
    for field, value in raw.items():
        if value is None:
            continue
        try:
            values[field] = _ADAPTERS[field].validate_python(value)
        except ValidationError:
            log_kv(log, "WARNING", "ignoring bad manifest value", path=str(ws), field=field)
    return RecoveredWorkspace(**values)
