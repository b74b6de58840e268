"""Workspace manifests: what a workspace's last run looked like, on disk (spec §9).

Files live in ``<workspace>/.symphony/<section>.json``, one JSON object per section:

- ``issue``: the issue the workspace belongs to (``id``, ``identifier``, ``title``,
  ``state``, ``url``, ``workspace_key``, ``created_at``, ``updated_at``), written by the
  workspace manager;
- ``run``: the current or last attempt (``attempt``, ``status``, ``error``,
  ``started_at``, ``ended_at``, ``backend``, ``hooks`` = hook name -> summary), written by
  the scheduler (the manager records ``hooks``);
- ``session``: the agent session (``backend``, ``session_id``, ``thread_id``,
  ``conversation_id``, ``server_url``, ``tokens``, ``last_event``, and for a local run
  ``agent_group``: its agent's process group, ``{pgid, started, boot_id, adoptable}``;
  ``terminal_groups``: those of an ACP agent's live terminals, ``[{pgid, started,
  boot_id}]``), written by the scheduler.

Field names match :class:`~symphony_tui.domain.RecoveredWorkspace` so recovery is a
lookup. Every write is atomic (temp file in the same folder + ``os.replace``), so a crash
leaves the old or the new file, never half of one. Reads never raise: a missing, corrupt
or foreign file reads as ``{}`` (with a logged warning when it was there but unreadable).
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import date, datetime
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel

from symphony_tui.observability.logs import log_kv
from symphony_tui.workspaces.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

MANIFEST_DIR = ".symphony"
SECTIONS = ("issue", "run", "session")
# Keeps ``git status`` in a repository workspace clean, so agents do not commit manifests.
_GITIGNORE = "*\n"


def manifest_dir(ws: Path) -> Path:
    return Path(ws) / MANIFEST_DIR


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def read_section(ws: Path, section: str) -> dict[str, Any]:
    """One section as a dict; ``{}`` when absent or unreadable (never raises)."""
    path = manifest_dir(ws) / f"{section}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as err:
        log_kv(log, "WARNING", "manifest unreadable", path=str(path), error=str(err))
        return {}
    try:
        data = json.loads(text)
    except ValueError as err:
        log_kv(log, "WARNING", "manifest corrupt; ignoring it", path=str(path), error=str(err))
        return {}
    if not isinstance(data, dict):
        log_kv(log, "WARNING", "manifest is not a JSON object; ignoring it", path=str(path))
        return {}
    return data


def read_manifest(ws: Path) -> dict[str, dict[str, Any]]:
    """All sections present, keyed by section name: ``{"issue": {...}, "run": {...}}``.
    Missing or corrupt sections are left out. Never raises."""
    out: dict[str, dict[str, Any]] = {}
    for section in SECTIONS:
        data = read_section(ws, section)
        if data:
            out[section] = data
    return out


def merge_section(ws: Path, section: str, fields: dict[str, Any]) -> None:
    """Merge ``fields`` into ``.symphony/<section>.json`` and write it atomically (fsynced).

    Values are made JSON-safe (datetimes as ISO strings, pydantic models dumped, enums by
    value, anything else by ``str``). Raises ``OSError`` when the file could not be written
    and ``ValueError`` for an unknown section (a programming error).
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown manifest section {section!r} (use one of {SECTIONS})")
    directory = manifest_dir(ws)
    merged = {**read_section(ws, section), **fields}
    payload = json.dumps(merged, default=_json_default, indent=2, sort_keys=True) + "\n"
    directory.mkdir(exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text(_GITIGNORE, encoding="utf-8")
    atomic_write_bytes(directory / f"{section}.json", payload.encode("utf-8"), 0o644)


def update_manifest(ws: Path, section: str, **fields: Any) -> bool:
    """:func:`merge_section`, now, in the caller's thread. Returns False (and logs a
    warning) when the file could not be written, so a full disk degrades recovery rather
    than failing a run. Raises ``ValueError`` for an unknown section (a programming error).
    The scheduler queues its writes instead (``manifest_writer.ManifestWriter``).
    """
    try:
        merge_section(ws, section, fields)
        return True
    except OSError as err:
        log_kv(
            log,
            "WARNING",
            "manifest write failed",
            path=str(manifest_dir(ws)),
            section=section,
            error=str(err),
        )
        return False


def manifest_mtime(ws: Path) -> float:
    """Latest modification time of any section file (0.0 when there is none)."""
    latest = 0.0
    for section in SECTIONS:
        with contextlib.suppress(OSError):
            latest = max(latest, (manifest_dir(ws) / f"{section}.json").stat().st_mtime)
    return latest
