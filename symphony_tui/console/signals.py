"""The stop signals and a terminal that went away, routed to the console's lifecycle.

SIGHUP (a dropped SSH session) and a terminal found gone without one (hung-up tty, stdin
at EOF, dead parent: ``console/terminal_watch.py``, checked once a second) are a lost
terminal: the output is muted first (the terminal cannot take it), then
``Lifecycle.terminal_lost``. SIGTERM (``kill``, ``symphony-tui stop``, a service manager)
and SIGINT (``kill -INT``; ctrl+c is a key in raw mode) are ``Lifecycle.stop_signal``.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Any

from symphony_tui.console.terminal_watch import Forgiving, TerminalWatch

if TYPE_CHECKING:
    from rich.console import Console
    from textual.driver import Driver

    from symphony_tui.console.lifecycle import Lifecycle
    from symphony_tui.console.state import ConsoleState

TERMINAL_CHECK_S = 1.0


class Signals:
    """Signal handlers on the running event loop, the SIGCONT guard and the terminal
    watch, for one console; what they mean is ``lifecycle``'s. ``watch``: the terminal
    check (default, once :meth:`watch_terminal` runs with a terminal: a
    :class:`TerminalWatch` of stdin/stdout)."""

    def __init__(
        self, state: ConsoleState, lifecycle: Lifecycle, watch: TerminalWatch | None
    ) -> None:
        self._state = state
        self._lifecycle = lifecycle
        self._watch = watch
        self._installed: list[signal.Signals] = []
        self._driver: Driver | None = None
        self._error_console: Console | None = None

    def install(self, driver: Driver | None, error_console: Console) -> None:
        """Handle SIGHUP, SIGTERM and SIGINT on the running loop (the terminal restored
        on exit: main screen, mouse off, cursor shown); ``driver`` is Textual's, whose
        output :meth:`terminal_lost` mutes along with ``error_console``."""
        self._driver = driver
        self._error_console = error_console
        handlers = {
            signal.SIGHUP: lambda: self.terminal_lost("hangup"),
            signal.SIGTERM: lambda: self._lifecycle.stop_signal("terminated", "SIGTERM"),
            signal.SIGINT: lambda: self._lifecycle.stop_signal("interrupted", "SIGINT"),
        }
        for sig, handler in handlers.items():
            try:
                asyncio.get_running_loop().add_signal_handler(sig, handler)
            except (NotImplementedError, RuntimeError, ValueError, AttributeError):
                continue
            self._installed.append(sig)
        self._guard_sigcont()

    def remove(self) -> None:
        """Take the handlers off the loop, unless the console detached: the process goes
        on as a headless scheduler, and a SIGHUP arriving before it installs its own
        handlers must still find one (this one does nothing now)."""
        if self._lifecycle.detached is not None:
            return
        for sig in self._installed:
            try:
                asyncio.get_running_loop().remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        self._installed = []

    def _guard_sigcont(self) -> None:
        """Let SIGCONT resume the screen only after our own suspend (ctrl+z).

        A hung-up terminal sends SIGHUP *and* SIGCONT. Textual's driver answers every
        SIGCONT by restarting application mode inside the signal handler, which writes to
        the output queue from within the main thread's own (possibly interrupted) write:
        the process deadlocks and outlives its terminal. Textual is pinned; the private
        ``_must_signal_resume`` flag is set by its SIGTSTP handler just before stopping.
        """
        driver = self._driver
        if driver is None or not hasattr(driver, "_must_signal_resume"):
            return
        try:
            textual_handler = signal.getsignal(signal.SIGCONT)
        except (ValueError, AttributeError):
            return
        if not callable(textual_handler):
            return

        def on_sigcont(signum: int, frame: Any) -> None:
            if getattr(driver, "_must_signal_resume", False):
                textual_handler(signum, frame)

        try:
            signal.signal(signal.SIGCONT, on_sigcont)
        except ValueError:  # not the main thread
            pass

    def watch_terminal(self, *, headless: bool) -> bool:
        """Start watching the terminal (not when ``headless``); True when the app must
        call :meth:`check_terminal` every ``TERMINAL_CHECK_S``."""
        if self._watch is None and not headless:
            self._watch = TerminalWatch()
        return self._watch is not None and self._watch.active

    def check_terminal(self) -> None:
        """Called once a second: a lost terminal takes the SIGHUP path."""
        reason = self._watch.lost() if self._watch is not None else None
        if reason is not None and not self._state.stopping:
            self.terminal_lost(reason)

    def terminal_lost(self, reason: str) -> None:
        """The operator's terminal is gone: mute the output, then leave
        (``Lifecycle.terminal_lost``)."""
        if self._state.stopping:
            return
        self._mute_terminal()
        self._lifecycle.terminal_lost(reason)

    def _mute_terminal(self) -> None:
        """Drop output instead of queueing it. Textual's writer thread dies on the first
        EIO, and its bounded queue would then block the event loop (and the shutdown of
        the workers) forever. The exit message and last lines on stderr go nowhere instead
        of failing with EIO (a traceback, exit 1)."""
        writer = getattr(self._driver, "_writer_thread", None)
        if writer is not None:
            writer.write = lambda text: None
            writer.stop = lambda: None
        if self._error_console is not None:
            self._error_console.file = Forgiving()
