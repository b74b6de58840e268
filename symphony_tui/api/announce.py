"""Where a serving scheduler says its API is: ``<user state dir>/symphony-tui/api/<pid>.json``.

The state dir is ``platformdirs.user_state_dir`` (``$XDG_STATE_HOME`` or ``~/.local/state``
on Linux, ``~/Library/Application Support`` on macOS). The file holds ``{"pid", "host",
"port", "token_required", "started_at"}`` (no token) plus ``control_token_file`` (the
control token's file, readable by the user only, :mod:`symphony_tui.api.auth`) and what the
scheduler adds (``project``, ``workflow``, ``token_file``: ``symphony-tui ps`` and a second
console read them), is written after the server bound and removed when it stops (a headless
scheduler without an API leaves one with ``port`` null, for ``ps`` and ``stop``); one left by
a process that died is recognised by its pid, and removed when the next one is written (``attach ssh://`` only reads notes of live
processes, see :mod:`symphony_tui.api.ssh`). The folder is the user's own (0700): a console
trusts the address and token files it finds here, never ones written in a shared lock file.

The console's scheduler keeps its API token in ``<pid>.token`` beside the note (0600,
removed with it): the operator's console reads it; agents and hooks, whose environment and
arguments never carry it, are not told where it is.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

APP_NAME = "symphony-tui"


def default_dir() -> Path:
    """``<user state dir>/symphony-tui/api``."""
    return Path(platformdirs.user_state_dir(APP_NAME)) / "api"


def write(
    directory: Path,
    *,
    host: str,
    port: int | None,
    token: bool,
    control_file: Path | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write this process's note (owner-only permissions), with ``extra`` members; returns
    its path. An ``OSError`` is the caller's: the API still serves, only ``attach ssh://``
    and ``ps`` cannot find it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    prune(directory)
    path = directory / f"{os.getpid()}.json"
    note = {
        "pid": os.getpid(),
        "host": host,
        "port": port,
        "token_required": token,
        "started_at": datetime.now(UTC).isoformat(),
        **(extra or {}),
    }
    if control_file is not None:
        note["control_token_file"] = str(control_file)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(note) + "\n")
    os.replace(tmp, path)
    return path


#: The files a scheduler keeps here, each named by its pid.
NOTE_SUFFIXES = (".json", ".token", ".control", ".tmp", ".stop")


def prune(directory: Path) -> list[Path]:
    """Remove what schedulers that died without stopping (``kill -9``, a crash) left in
    ``directory``: each ``<pid>.json`` / ``.token`` / ``.control`` / ``.tmp`` / ``.stop`` whose process
    is gone. Returns the removed paths; never raises."""
    removed: list[Path] = []
    try:
        paths = list(directory.iterdir())
    except OSError:
        return removed
    for path in paths:
        if path.suffix in NOTE_SUFFIXES and path.stem.isdigit() and not pid_alive(int(path.stem)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


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


def write_token(directory: Path, token: str) -> Path:
    """Keep this process's API token in ``<directory>/<pid>.token`` (0600); returns the path.
    Raises ``OSError``."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{os.getpid()}.token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return path


def request_stop(directory: Path, pid: int, by: str) -> Path | None:
    """Say who asks process ``pid`` to stop, in ``<directory>/<pid>.stop`` (0600:
    ``{"by", "at"}``), just before the SIGTERM that asks it (``symphony-tui stop``); the
    process reads it when the signal arrives (:func:`take_stop_request`). None when it
    cannot be written (the stop then reads as a plain SIGTERM)."""
    path = directory / f"{pid}.stop"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps({"by": by, "at": datetime.now(UTC).isoformat()}) + "\n")
    except OSError:
        return None
    return path


#: Seconds a stop request stays this process's reason: the SIGTERM follows it at once.
STOP_REQUEST_S = 60.0


def take_stop_request(directory: Path, pid: int | None = None) -> str | None:
    """Who asked process ``pid`` (default: this one) to stop (:func:`request_stop`), or
    None: no request, an unreadable one, or one older than :data:`STOP_REQUEST_S`. The
    file is removed."""
    path = directory / f"{pid if pid is not None else os.getpid()}.stop"
    try:
        request = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        remove(path)
    if not isinstance(request, dict) or not isinstance(request.get("by"), str):
        return None
    try:
        age = (datetime.now(UTC) - datetime.fromisoformat(str(request.get("at")))).total_seconds()
    except (TypeError, ValueError):
        return None
    return request["by"] if -5.0 <= age <= STOP_REQUEST_S else None


def read_note(directory: Path, pid: int) -> dict[str, Any] | None:
    """The note of live process ``pid`` in ``directory``, or None (none, unreadable, or its
    process is gone)."""
    if not pid_alive(pid):
        return None
    try:
        note = json.loads((directory / f"{pid}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and note.get("pid") == pid else None


def live_notes(directory: Path) -> list[dict[str, Any]]:
    """Every note in ``directory`` whose process still lives, oldest first."""
    notes = []
    try:
        names = sorted(directory.glob("*.json"))
    except OSError:
        return []
    for path in names:
        try:
            pid = int(path.stem)
        except ValueError:
            continue
        note = read_note(directory, pid)
        if note is not None:
            notes.append(note)
    return sorted(notes, key=lambda n: str(n.get("started_at", "")))


def read_token(note: Mapping[str, Any]) -> str | None:
    """The token a note's ``token_file`` holds (None without one or when unreadable)."""
    path = note.get("token_file")
    if not isinstance(path, str):
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ended(pid: int) -> bool:
    """True when process ``pid`` is gone or a zombie (exited, not yet reaped)."""
    if not pid_alive(pid):
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


@dataclass(frozen=True)
class Owner:
    """A scheduler process on this machine, as a console attached to it watches it: its
    ``pid`` and its ``note`` (removed when its API stops)."""

    pid: int
    note: Path

    @classmethod
    def of(cls, directory: Path, pid: int) -> Owner:
        return cls(pid, directory / f"{pid}.json")

    def serving(self) -> bool:
        """Its process runs and its API still serves. A stopped (``SIGSTOP``) process still
        serves: an attached console sees it stale, not gone."""
        return not ended(self.pid) and self.note.exists()

    def ended(self) -> bool:
        """Its process is gone (:func:`ended`)."""
        return ended(self.pid)


def note_for_port(directory: Path, port: int) -> dict[str, Any] | None:
    """The live note in ``directory`` of the scheduler serving on ``port``, or None."""
    return next((n for n in live_notes(directory) if n.get("port") == port), None)
