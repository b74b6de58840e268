"""The audit log: every operator action, who did it, when and how it went.

One JSON object a line (:class:`~symphony_tui.domain.audit.AuditEntry`) in the project's
``audit.jsonl`` beside its ``events.jsonl`` (``symphony-tui paths``), rotated by size the
same way (:class:`~symphony_tui.scheduler.history.event_file.RotatingJsonl`: 5 MB, five backups).
The newest :data:`KEEP` entries are also held in memory (read back from the file's tail
on start), for the console's audit screen and ``GET /api/v1/audit``.

Operator actions are rare (a person pressing keys), so each is written and flushed at
once, on the caller's task. A failing disk drops the file with one warning; the memory
copy goes on.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import socket
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from symphony_tui.domain.audit import AuditEntry
from symphony_tui.domain.commands import Command
from symphony_tui.scheduler.history.event_file import RotatingJsonl
from symphony_tui.text import one_line

log = logging.getLogger(__name__)

MAX_BYTES = 5 * 1024 * 1024
BACKUPS = 5
KEEP = 1_000
_TAIL_BYTES = 512 * 1024


def local_operator() -> str:
    """``user@host`` of this process's user (``$USER`` when the password database has no
    entry for the uid, as in some containers)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER") or str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def describe(command: Command) -> tuple[str | None, str]:
    """``(issue, detail)`` of a command for its audit entry: the issue (or approval) it
    names, and its other fields as one ``key=value`` line."""
    fields = command.model_dump(mode="json", exclude={"type"}, exclude_none=True)
    issue = fields.pop("issue_id", None) or fields.pop("issue_identifier", None)
    detail = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in fields.items())
    return issue, one_line(detail, 300)


def _tail(path: Path, keep: int) -> list[AuditEntry]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    entries: list[AuditEntry] = []
    for line in data.splitlines()[-keep:]:
        try:
            entries.append(AuditEntry.model_validate_json(line))
        except ValidationError:
            continue  # a torn or foreign line
    return entries


class AuditLog:
    """Append :class:`AuditEntry` records to ``path`` (``None``: memory only) and keep the
    newest ``keep``. ``now`` supplies the time of an entry (UTC)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        max_bytes: int = MAX_BYTES,
        backups: int = BACKUPS,
        keep: int = KEEP,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.path = path
        self._now = now
        self._recent: deque[AuditEntry] = deque(maxlen=keep)
        self._file: RotatingJsonl | None = None
        if path is not None:
            self._recent.extend(_tail(path, keep))
            self._file = RotatingJsonl(path, max_bytes=max_bytes, backups=backups)

    def record(
        self,
        what: str,
        *,
        who: str,
        via: str = "console",
        issue: str | None = None,
        detail: str = "",
        ok: bool = True,
        message: str = "",
    ) -> AuditEntry:
        """Keep and write one entry; returns it."""
        entry = AuditEntry(
            at=self._now(),
            who=one_line(who, 120) or "unknown",
            via=one_line(via, 120),
            what=one_line(what, 60),
            issue=one_line(issue, 120) if issue else None,
            detail=one_line(detail, 300),
            ok=ok,
            message=one_line(message, 300),
        )
        self._recent.append(entry)
        if self._file is not None:
            self._file.write(entry.model_dump_json())
        return entry

    def record_command(
        self,
        command: Command,
        ok: bool,
        message: str,
        *,
        who: str,
        via: str,
        label: Callable[[str], str] = str,
        issue: str | None = None,
    ) -> AuditEntry:
        """Keep and write a command's entry; ``label`` turns the issue it names (an id or
        an identifier, as sent) into what the log shows: the identifier, like the
        console's own actions. ``issue``: the identifier of the issue of a command that
        names none itself (an approval's owner, from its ``CommandResult``)."""
        named, detail = describe(command)
        issue = label(named) if named else issue
        return self.record(
            command.type, who=who, via=via, issue=issue, detail=detail, ok=ok, message=message
        )

    def recent(self, limit: int = KEEP) -> list[AuditEntry]:
        """The newest ``limit`` entries, oldest first."""
        if limit <= 0:
            return []
        return list(self._recent)[-limit:]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
