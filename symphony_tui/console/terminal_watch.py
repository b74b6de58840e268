"""Notice a terminal that went away without a SIGHUP (pure; no Textual).

Over SSH the usual end is SIGHUP, but not always: a pty whose master closed (the SSH
client vanished, ``sshd`` killed) is hung up, and every ioctl on it fails with EIO, so
``isatty`` turns false; stdin at EOF makes Textual's input thread spin; a dead parent
(the login shell, tmux/screen's pane process) re-parents us. Each is checked cheaply once a
second by the app, which then takes the same shutdown path as SIGHUP (after dolphie).

Only descriptors that were terminals when the watch started are watched, so a console
under a test harness or with redirected output is never judged lost.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Sequence


def _stdin_at_eof(fd: int) -> bool:
    """True when ``fd`` polls as hung up or errored (``POLLHUP``/``POLLERR``/``POLLNVAL``).
    A readable byte waiting is not EOF: the input thread reads it."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        events = poller.poll(0)
    except (OSError, ValueError):
        return True
    bad = select.POLLHUP | select.POLLERR | select.POLLNVAL
    return any(mask & bad for _, mask in events)


class TerminalWatch:
    """``lost()`` names why the terminal is gone, or returns ``None`` while all is well.

    ``fds``: descriptors to watch (default stdin, stdout); ``isatty``, ``getppid`` and
    ``hung_up`` are injectable for tests.
    """

    def __init__(
        self,
        fds: Sequence[int] = (0, 1),
        *,
        isatty: Callable[[int], bool] = os.isatty,
        getppid: Callable[[], int] = os.getppid,
        hung_up: Callable[[int], bool] = _stdin_at_eof,
    ) -> None:
        self._isatty = isatty
        self._getppid = getppid
        self._hung_up = hung_up
        self.fds = tuple(fd for fd in fds if _safe(isatty, fd))
        self.parent = getppid()

    @property
    def active(self) -> bool:
        """Whether anything is watched (some descriptor was a terminal)."""
        return bool(self.fds)

    def lost(self) -> str | None:
        for fd in self.fds:
            if not _safe(self._isatty, fd):
                return f"terminal lost (fd {fd} is no longer a terminal)"
            if fd == 0 and self._hung_up(fd):
                return "terminal lost (input hung up)"
        if self.fds and self.parent > 1 and self._getppid() != self.parent:
            return f"terminal lost (parent process {self.parent} exited)"
        return None


def _safe(isatty: Callable[[int], bool], fd: int) -> bool:
    try:
        return bool(isatty(fd))
    except (OSError, ValueError):
        return False


class Forgiving:
    """A text stream whose writes and flushes fail silently: what is written after the
    terminal hung up (EIO) reaches no one, and must not turn a clean exit into a traceback
    and exit 1 (the exit message, a last line on stderr). It writes to ``stream``, by
    default whatever ``sys.stderr`` is at the time (Textual swaps it while it runs); other
    attributes are that stream's."""

    def __init__(self, stream=None) -> None:
        self._fixed = stream

    @property
    def _stream(self):
        return self._fixed if self._fixed is not None else sys.stderr

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
