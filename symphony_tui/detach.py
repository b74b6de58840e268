"""The console's scheduler outlives its terminal (docs/architecture.md "Detaching").

``symphony-tui WORKFLOW.md`` forks once, before anything is built (no thread exists yet, so
the fork is safe): the **holder** (the parent) stays the shell's foreground job and only
waits; the **child** runs the console and the scheduler it embeds, in the same process
group, so the terminal's signals (SIGWINCH, SIGHUP) reach it directly. When the console
leaves while its agents run (``q`` then detach, SIGHUP, a hung-up tty, the holder gone),
the child tells the holder through a pipe (:meth:`TerminalHolder.release`), leaves the
terminal's session (``setsid``, SIGHUP ignored), points its standard streams at the log,
and runs on as a headless scheduler; the holder exits 0 and the shell prompt comes back.
Otherwise the holder exits with the child's exit code.

The holder forwards SIGTERM and SIGHUP to the child (``kill`` of the pid the shell knows
reaches the scheduler) and ignores the keyboard's SIGINT / SIGQUIT (the child has the
terminal in raw mode; a shell opened from the console gets them itself). ``ctrl+z`` stops
the child (Textual's suspend); the holder then stops itself too, so the shell sees the job
stopped, and ``fg`` continues both (one process group).

Only POSIX: elsewhere :func:`hold_terminal` returns None and the console embeds its
scheduler without a holder.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from pathlib import Path

#: What the child writes to the holder once it leaves the terminal running on.
DETACHED = b"d"
_POLL_S = 0.2


class TerminalHolder:
    """The child's end of the pipe to the holder (see the module doc)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self, log_file: Path | None) -> None:
        """The console is gone and the scheduler runs on: let the holder exit (the shell
        prompt comes back), leave the terminal's session, ignore SIGHUP from now on, and
        send stdout / stderr to ``log_file`` (stdin from ``/dev/null``). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(fd, DETACHED)
        with contextlib.suppress(OSError):
            os.close(fd)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with contextlib.suppress(OSError):
            os.setsid()  # no controlling terminal: a hang-up or the shell's exit is not ours
        redirect_streams(log_file)

    def close(self) -> None:
        """The child ends without detaching: the holder sees it exit."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def redirect_streams(log_file: Path | None) -> None:
    """Point fds 0, 1, 2 away from a terminal: stdin at ``/dev/null``, stdout and stderr
    appended to ``log_file`` (``/dev/null`` without one)."""
    with contextlib.suppress(OSError, ValueError):
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
    null = os.open(os.devnull, os.O_RDWR)
    try:
        out = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if log_file else null
    except OSError:
        out = null
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    if out != null:
        os.close(out)
    os.close(null)


def hold_terminal() -> TerminalHolder | int | None:
    """Fork: in the child, return its :class:`TerminalHolder`; in the holder, wait and
    return the exit code it must leave with (0 once the child detached). None where
    ``fork`` is missing (the caller then embeds without detaching)."""
    if not hasattr(os, "fork"):
        return None
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, False)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        return TerminalHolder(write_end)
    os.close(write_end)
    try:
        return _hold(pid, read_end)
    finally:
        os.close(read_end)


def _hold(child: int, read_end: int) -> int:
    """The holder's loop: forward SIGTERM / SIGHUP, follow the child's stops, and return
    0 once it detached or its exit code once it exited."""
    hung_up = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal hung_up
        if signum == signal.SIGHUP:
            hung_up = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    open_pipe = True
    while True:
        if hung_up:
            return 0  # no terminal, no shell: the child carries on without us
        if open_pipe:
            try:
                ready, _, _ = select.select([read_end], [], [], _POLL_S)
            except InterruptedError:
                ready = []
            if ready:
                data = os.read(read_end, 1)
                if data == DETACHED:
                    return 0
                open_pipe = False  # EOF: the child closed it (ending); reap it below
        else:
            select.select([], [], [], _POLL_S)
        try:
            pid, status = os.waitpid(child, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            return 1
        if pid == 0:
            continue
        if os.WIFSTOPPED(status):
            os.kill(os.getpid(), signal.SIGSTOP)  # the shell sees the job stopped; fg: both go on
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGCONT)
            continue
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            _reset_terminal(child, os.WTERMSIG(status))
            return 128 + os.WTERMSIG(status)


#: Modes the console turns on that a killed child cannot turn off: the alternate screen,
#: mouse reporting (every protocol), focus events, bracketed paste, the kitty keyboard
#: protocol; then the cursor shown again. Each is harmless where it was never on.
TERMINAL_RESET = (
    "\x1b[?1049l"
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"
    "\x1b[?1004l\x1b[?2004l"
    "\x1b[<u"
    "\x1b[?25h"
)


def _reset_terminal(child: int, signum: int) -> None:
    """The child died by a signal (``kill -9``) with the terminal in the console's modes:
    turn them off and say what happened (one line). The key modes (echo, line input) come
    back when :func:`symphony_tui.cli.main` returns."""
    try:
        if not os.isatty(1):
            return
        os.write(1, TERMINAL_RESET.encode())
    except OSError:
        return
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    with contextlib.suppress(OSError):
        os.write(
            2,
            f"symphony-tui: the console and its scheduler (pid {child}) were ended by {name}; "
            "`symphony-tui WORKFLOW.md` starts it again and takes up its issues\n".encode(),
        )
