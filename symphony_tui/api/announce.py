"""Where a serving scheduler says its API is: ``<user state dir>/symphony-tui/api/<pid>.json``.

The state dir is ``platformdirs.user_state_dir`` (``$XDG_STATE_HOME`` or ``~/.local/state``
on Linux, ``~/Library/Application Support`` on macOS). The file holds ``{"pid", "host",
"port", "token_required", "started_at", "control_token_file"}`` (no token: the
control token's file is readable by the user only, :mod:`symphony_tui.api.auth`), is written after the server bound and
removed when it stops; one left by a process that died is recognised by its pid
(``attach ssh://`` only reads notes of live processes, see :mod:`symphony_tui.api.ssh`).
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import platformdirs

APP_NAME = "symphony-tui"


def default_dir() -> Path:
    """``<user state dir>/symphony-tui/api``."""
    return Path(platformdirs.user_state_dir(APP_NAME)) / "api"


def write(
    directory: Path, *, host: str, port: int, token: bool, control_file: Path | None = None
) -> Path:
    """Write this process's note (owner-only permissions); returns its path. An ``OSError``
    is the caller's: the API still serves, only ``attach ssh://`` cannot find it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{os.getpid()}.json"
    note = {
        "pid": os.getpid(),
        "host": host,
        "port": port,
        "token_required": token,
        "started_at": datetime.now(UTC).isoformat(),
    }
    if control_file is not None:
        note["control_token_file"] = str(control_file)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(note) + "\n")
    os.replace(tmp, path)
    return path


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def parse_notes(text: str) -> list[dict]:
    """Notes printed one JSON object a line (what the remote discovery prints); lines that
    are not a note with an integer ``port`` are skipped."""
    notes = []
    for line in text.splitlines():
        try:
            note = json.loads(line)
        except ValueError:
            continue
        if isinstance(note, dict) and isinstance(note.get("port"), int):
            notes.append(note)
    return notes
