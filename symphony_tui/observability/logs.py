"""Structured ``key=value`` log lines in a rotating file (spec §13.1, §17.6).

One line per record::

    ts=2026-11-30T06:57:00.123Z level=INFO logger=symphony_tui.scheduler msg="dispatch" \
issue_id=abc issue_identifier=ABC-1 session_id=t1-u1

Values are quoted when they contain spaces, quotes or ``=``; newlines and other control
characters are escaped so one record is always one line. Every line goes through
:func:`~symphony_tui.observability.redact.redact` before it is written. A failing sink
(disk full, file removed) never raises into the caller and never writes to the terminal,
which belongs to the console.
"""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import re
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from symphony_tui.observability.redact import redact

LOG_FILE_NAME = "symphony.log"
MAX_BYTES = 10 * 1024 * 1024
BACKUP_COUNT = 5
_KV_ATTR = "_symphony_kv"
_HANDLER_MARK = "_symphony_handler"

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
) | {"message", "asctime", "taskName", _KV_ATTR}

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def _escape(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def format_value(value: Any) -> str:
    """One log value: ``null`` for None, bare when safe, otherwise double-quoted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        value = value.isoformat()
    text = str(value)
    escaped = _escape(text)
    needs_quotes = (
        not text or escaped != text or any(c in text for c in ' "=') or text.strip() != text
    )
    return f'"{escaped}"' if needs_quotes else text


def _format_key(key: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in str(key))
    return cleaned or "_"


class KeyValueFormatter(logging.Formatter):
    """Formats a record as one redacted ``key=value`` line (see module docstring).
    ``context``: fields every line ends with (which scheduler wrote it, when several
    share a log folder)."""

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._context = " ".join(
            f"{_format_key(k)}={format_value(v)}" for k, v in (context or {}).items()
        )

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC)
        parts = [
            f"ts={ts.strftime('%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z",
            f"level={record.levelname}",
            f"logger={format_value(record.name)}",
            f"msg={format_value(record.getMessage())}",
        ]
        fields: dict[str, Any] = {}
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                fields[key] = value
        fields.update(getattr(record, _KV_ATTR, None) or {})
        parts.extend(f"{_format_key(k)}={format_value(v)}" for k, v in fields.items())
        if record.exc_info:
            exc = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            parts.append(f"exc={format_value(exc)}")
        elif record.exc_text:
            parts.append(f"exc={format_value(record.exc_text)}")
        if self._context:
            parts.append(self._context)
        return redact(" ".join(parts))


class _Quiet(logging.StreamHandler):
    """A file handler's failures counted, never printed or raised (mixed in before the
    handler class)."""

    failures = 0

    def handleError(self, record: logging.LogRecord) -> None:
        # The default prints a traceback to stderr, which would tear the console's screen.
        self.failures += 1

    def flush(self) -> None:
        try:
            super().flush()
        except (OSError, ValueError):
            self.failures += 1

    def close(self) -> None:
        try:
            super().close()
        except (OSError, ValueError):
            self.failures += 1


class _QuietRotatingFileHandler(_Quiet, logging.handlers.RotatingFileHandler):
    """A rotating file handler whose failures are counted, never printed or raised."""


class _QuietWatchedFileHandler(_Quiet, logging.handlers.WatchedFileHandler):
    """A file handler that reopens its file when another process rotated it, and never
    rotates it itself; its failures are counted, never printed or raised."""


def log_kv(logger: logging.Logger, level: int | str, msg: str, **fields: Any) -> None:
    """Log ``msg`` with ``fields`` as ``key=value`` pairs (spec §13.1 context fields such as
    ``issue_id``, ``issue_identifier``, ``session_id``). ``level`` is a number or a name."""
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(lvl, int):
        lvl = logging.INFO
    if logger.isEnabledFor(lvl):
        logger.log(lvl, msg, extra={_KV_ATTR: fields})


def default_log_dir() -> Path:
    return Path(platformdirs.user_log_dir("symphony-tui"))


def workflow_log_name(workflow: Path) -> str:
    """The log file name of the scheduler of ``workflow`` (an absolute, resolved path) in
    the log folder every scheduler of a user shares: ``symphony-<folder>-<hash>.log``, the
    workflow's folder name made file-name safe (at most 40 characters) and 8 hex digits of
    the SHA-256 of the path, so two projects whose folders share a name never share a file
    (each rotates its own: one file rotated by two processes loses lines)."""
    digest = hashlib.sha256(str(workflow).encode("utf-8")).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", workflow.parent.name).strip("-.")[:40]
    return f"symphony-{name or 'project'}-{digest}.log"


def configure_logging(
    log_dir: Path | None = None,
    level: int | str = "INFO",
    context: dict[str, Any] | None = None,
    *,
    file_name: str = LOG_FILE_NAME,
) -> Path:
    """Send all logging to ``<log_dir>/<file_name>`` (rotating, 10 MB x 5) and return that
    path. ``log_dir`` defaults to ``platformdirs.user_log_dir("symphony-tui")``; ``context``
    ends every line (:class:`KeyValueFormatter`). Calling it again replaces the handler
    installed by the previous call; other handlers are kept."""
    directory = Path(log_dir) if log_dir is not None else default_log_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name
    handler = _QuietRotatingFileHandler(
        path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8"
    )
    handler.setFormatter(KeyValueFormatter(context))
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False):
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    root.setLevel(lvl if isinstance(lvl, int) else logging.INFO)
    return path


def leave_rotation() -> None:
    """Go on writing the file :func:`configure_logging` opened, but leave its rotation to
    the process that owns it (the project's scheduler, which this console attached to):
    the file is reopened when that process rotated it, never rotated from here, so no two
    processes rotate one file. Nothing happens without such a file."""
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False) and isinstance(old, _QuietRotatingFileHandler):
            handler = _QuietWatchedFileHandler(old.baseFilename, encoding="utf-8")
            handler.setFormatter(old.formatter)
            setattr(handler, _HANDLER_MARK, True)
            root.removeHandler(old)
            old.close()
            root.addHandler(handler)
