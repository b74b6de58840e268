"""Keys typed while the console starts, before its first frame.

Between ``symphony-tui`` starting and Textual taking the terminal there is most of a
second in which the terminal is still in its ordinary (cooked) mode: whatever the
operator types is echoed raw onto the shell's screen (``^[[A`` for an arrow key) and
left there after the console exits. :class:`HeldKeys` turns echo and line buffering off
on the controlling terminal as the first thing the console does, so those keys are held
unseen and reach the console as ordinary key presses once it reads the terminal (type-
ahead, as in an editor). ``ISIG`` stays on, so Ctrl-C ends the launch until Textual
takes the terminal; once the first frame is up, Ctrl-C is the console's key (Textual's
"press ctrl+q to quit" hint) and ``q`` quits, also while the scheduler is being built.

Textual saves the terminal's modes when it starts and puts them back on exit and on
``suspend()``; it would save the held ones, so the app hands Textual the modes from
before (:meth:`HeldKeys.before`), and :meth:`HeldKeys.release` restores them in any case
once the console is gone. Nothing here imports Textual.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

try:
    import termios
except ImportError:  # not a POSIX terminal: nothing to hold
    termios = None  # type: ignore[assignment]  # None stands for the missing module


class HeldKeys:
    """The terminal on ``stream`` (default stdin) with echo and canonical input off until
    :meth:`release`. Not a terminal, or ``termios`` unavailable: does nothing."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._fd: int | None = None
        self._before: list[Any] | None = None
        stream = sys.stdin if stream is None else stream
        if termios is None:
            return
        try:
            fd = stream.fileno()
            if not os.isatty(fd):
                return
            before = termios.tcgetattr(fd)
            held = termios.tcgetattr(fd)
            held[3] &= ~(termios.ECHO | termios.ICANON)  # lflag; ISIG kept
            held[6][termios.VMIN] = 1
            held[6][termios.VTIME] = 0
            termios.tcsetattr(fd, termios.TCSANOW, held)
        except (OSError, ValueError, AttributeError, termios.error):
            return  # no terminal to hold (a pipe, a closed stream)
        self._fd, self._before = fd, before

    def before(self) -> list[Any] | None:
        """The terminal's modes as they were before (``termios.tcgetattr`` list), or None
        when nothing was held."""
        return None if self._before is None else [*self._before[:6], list(self._before[6])]

    def release(self) -> None:
        """Put the terminal's modes back as they were (idempotent; a terminal that hung
        up meanwhile is left alone)."""
        if self._fd is None or self._before is None:
            return
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self._fd, termios.TCSANOW, self._before)
        self._fd = None
