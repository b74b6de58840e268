"""The event history file: JSONL, one event per line, rotated by size, whose sequence
numbers continue across restarts.

``events.jsonl`` is renamed ``events.jsonl.1`` once it would grow past ``max_bytes``
(``.1`` becomes ``.2`` and so on; the oldest past ``backups`` is deleted), like
:class:`logging.handlers.RotatingFileHandler`. On open, :attr:`RotatingJsonl.last_seq` is
the ``seq`` of the newest event on disk (the current file, else its newest backup), so a
restarted scheduler numbers on from there and a reader can page through every run's events
by ``seq``. A failing disk never raises into the caller: the file is dropped with one
warning and the in-memory history goes on.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

MAX_BYTES = 20 * 1024 * 1024
BACKUPS = 5
_TAIL_BYTES = 64 * 1024  # enough for the last line (messages are capped at 16 KiB)


def last_seq_in(path: Path) -> int:
    """The ``seq`` of the last event line of ``path``; 0 when the file is missing, empty or
    its last line is not an event (a torn write)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            tail = f.read()
    except OSError:
        return 0
    for line in reversed(tail.splitlines()):
        if not line.strip():
            continue
        try:
            seq = json.loads(line).get("seq")
        except (ValueError, AttributeError):
            continue  # a torn last line: the one before it counts
        if isinstance(seq, int) and not isinstance(seq, bool):
            return seq
    return 0


class RotatingJsonl:
    """An append-only JSONL file at ``path`` with size-based rotation."""

    def __init__(self, path: Path, *, max_bytes: int = MAX_BYTES, backups: int = BACKUPS):
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._file: IO[str] | None = None
        self._size = 0
        self.last_seq = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.last_seq = max(last_seq_in(path), last_seq_in(path.with_name(f"{path.name}.1")))
            self._open()
        except OSError as exc:
            log.warning("event file unavailable: %s", exc)
            self._file = None

    @property
    def writable(self) -> bool:
        return self._file is not None

    def _open(self) -> None:
        self._file = self.path.open("a", encoding="utf-8")
        self._size = self._file.tell()

    def write(self, line: str) -> None:
        """Append ``line`` (one JSON object, no newline) and flush; rotate first when it
        would take the file past ``max_bytes``."""
        if self._file is None:
            return
        data = line + "\n"
        size = len(data.encode("utf-8"))
        try:
            if self._size and self._size + size > self.max_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(data)
            self._file.flush()
            self._size += size
        except (OSError, ValueError) as exc:
            log.warning("event file write failed: %s", exc)
            self.close()

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._file = None
        if self.backups > 0:
            for n in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._open()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
