"""The Textual operator console.

It reads immutable snapshots and events through a
:class:`~symphony_tui.scheduler.port.SchedulerPort` and sends commands; it never touches
scheduler objects (docs/architecture.md "Who owns which state"). The scheduler's main
coroutine runs on the same asyncio loop, in a worker of group ``scheduler``.

Rendering is driven by one steady timer (``REFRESH_HZ``), not by events, so a flood of
agent events costs one repaint per tick (a steady rate, never one repaint per event).

The app is composed of mixins, one concept each: ``app_lifecycle`` (signals, lost
terminal, quitting), ``app_refresh`` (snapshot refresh and render keys),
``app_enablement`` (what the selection allows), ``app_commands`` (sending and
confirming commands), ``app_approvals`` (answering approval requests) and ``app_tools``
(diff, audit, into the workspace, export).
"""

from __future__ import annotations

import signal
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.notifications import SeverityLevel
from textual.screen import Screen

from symphony_tui.console.app_approvals import ApprovalActionsMixin
from symphony_tui.console.app_commands import CommandsMixin
from symphony_tui.console.app_enablement import EnablementMixin
from symphony_tui.console.app_lifecycle import LifecycleMixin
from symphony_tui.console.app_refresh import RefreshMixin
from symphony_tui.console.app_tools import ToolsMixin
from symphony_tui.console.attention import ConsoleAttention
from symphony_tui.console.key_order import KeyOrderMixin
from symphony_tui.console.keymap import default_keymap_path, load_keymap
from symphony_tui.console.palette import ConsoleCommands
from symphony_tui.console.registry import (
    bindings_for,
)
from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.starting import Started, StartingPort, notify_of

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.console.messages import OpenWorker
    from symphony_tui.console.terminal_watch import TerminalWatch
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import (
        Snapshot,
    )
    from symphony_tui.scheduler.port import SchedulerPort

REFRESH_HZ = 4.0
# Streamed text (new event-log lines, the workers' last-activity cells) repaints at most once
# a second: under a flood every tick would otherwise scroll the whole log pane and rewrite
# every visible worker row (terminal bytes). Counts, statuses, approvals and every
# operator action still show on the next tick.
LIVE_TEXT_S = 1.0
# Toasts cover the bottom-right of the screen (the approvals "Selected" panel, help text,
# pane borders): routine confirmations go quickly, problems stay long enough to be read.
NOTIFY_TIMEOUT_S = {"information": 2.5, "warning": 6.0, "error": 10.0}


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SymphonyApp(
    KeyOrderMixin,
    LifecycleMixin,
    RefreshMixin,
    EnablementMixin,
    CommandsMixin,
    ApprovalActionsMixin,
    ToolsMixin,
    App[None],
):
    """The console. ``runner`` is the scheduler's main coroutine (started on mount);
    ``shutdown`` is awaited once before exit (quit, SIGHUP/SIGTERM/SIGINT, scheduler
    failure).

    ``clock`` supplies "now" for ages and countdowns (tests freeze it);
    ``cursor_blink=False`` makes text inputs deterministic for screenshots;
    ``live_text_s``: seconds between two repaints of streamed text (``LIVE_TEXT_S``; 0
    repaints it on every tick), timed by ``monotonic`` (seconds). Exit code:
    0 on quit / hangup / SIGTERM / SIGINT / lost terminal, 1 when the scheduler fails or
    ``shutdown`` raises.

    ``detach_only``: the scheduler runs elsewhere (``symphony-tui attach``), so quitting
    detaches, and stops workers only when ``q``'s "Stop N agents" sends the scheduler its
    stop command; defaults to the port's ``detach_only`` attribute. ``terminal_watch`` checks for a terminal that went away without SIGHUP
    (default: a :class:`TerminalWatch` of stdin/stdout; headless test runs watch nothing).
    ``notices`` are shown once as warnings when the console opens (the workflow's unread
    settings: ``Workflow.warnings``).
    """

    CSS_PATH = "console.tcss"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    def _write_terminal(self, text: str) -> None:
        """Raw output to the terminal (a desktop notification escape); none when headless
        or while another program has the terminal (``handed_over``)."""
        if not self.is_headless and self._driver is not None and not self.terminal_handed_over:
            self._driver.write(text)

    def bell(self) -> None:
        if not self.terminal_handed_over:  # Textual's writer is stopped meanwhile
            super().bell()

    def __init__(
        self,
        port: SchedulerPort | None = None,
        *,
        start: Callable[[], Awaitable[Started]] | None = None,
        runner: Callable[[], Awaitable[None]] | None = None,
        shutdown: Callable[[], Awaitable[None]] | None = None,
        title: str = "symphony",
        keymap_path: Path | None = None,
        clock: Callable[[], datetime] = _utc_now,
        cursor_blink: bool = True,
        refresh_hz: float = REFRESH_HZ,
        live_text_s: float = LIVE_TEXT_S,
        monotonic: Callable[[], float] = time.monotonic,
        detach_only: bool | None = None,
        terminal_watch: TerminalWatch | None = None,
        notices: Sequence[str] = (),
        notify: Callable[[], NotifySettings] | None = None,
        terminal_modes: list | None = None,
        detachable: bool = False,
    ) -> None:
        super().__init__()
        if (port is None) == (start is None):
            raise TypeError("SymphonyApp needs a port or a start, not both")
        self.port: SchedulerPort = port if port is not None else StartingPort()
        self._start_fn = start
        self._start_worker = None
        self.start_error: str | None = None
        self.title = title
        self.clock = clock
        self.cursor_blink = cursor_blink
        self._runner_fn = runner
        self._shutdown_fn = shutdown
        self._keymap_path = keymap_path if keymap_path is not None else default_keymap_path()
        self._user_keymap: dict[str, str] = {}
        self._refresh_hz = refresh_hz
        self.live_text_s = live_text_s
        self.monotonic = monotonic
        self._snapshot: Snapshot | None = None
        # what each screen last showed; weak, so closed screens (a worker screen per enter)
        # are not kept, and a new screen never inherits a dead one's key through its id
        self._render_keys: weakref.WeakKeyDictionary[Screen, tuple] = weakref.WeakKeyDictionary()
        self._tones: tuple[str, Tones] | None = None
        self._port_error: str | None = None
        self._stopping = False
        self._enabled_signature: tuple = ()
        self._signals_installed: list[signal.Signals] = []
        self.scheduler_stopped = False
        self._asked_stop = False  # an attached console sent stop_scheduler
        self.detach_only = (
            bool(getattr(port, "detach_only", False)) if detach_only is None else detach_only
        )
        self._terminal_watch = terminal_watch
        #: The scheduler this console embeds can outlive it (``cli`` runs it so): a lost
        #: terminal detaches, and ``q`` asks stop or detach (``console/app_lifecycle.py``).
        self.detachable = detachable
        #: Why the console left its scheduler running (None: it did not).
        self.detached: str | None = None
        self._notices = tuple(notices)
        # the terminal's modes from before the CLI held the keys typed during start-up
        # (console/typeahead.py): what Textual must put back on exit and suspend
        self._terminal_modes = terminal_modes
        self._notify = notify if notify is not None else notify_of(self.port)
        self.attention = ConsoleAttention(
            lambda: self._notify(), bell=self.bell, write=self._write_terminal
        )

    @property
    def starting(self) -> bool:
        """True until the scheduler is built (``start``; :mod:`console.starting`)."""
        return bool(getattr(self.port, "starting", False))

    @property
    def stopping(self) -> bool:
        """True once a quit or detach began (``shutdown_and_exit``): the screens are about
        to go, so no key but quit (which forces the exit) runs an action any more."""
        return self._stopping

    # -- lifecycle ------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def on_mount(self) -> None:
        if self._terminal_modes is not None and getattr(self._driver, "attrs_before", None):
            # Textual's Linux driver saved the held modes (no echo) when it started
            self._driver.attrs_before = self._terminal_modes
        loaded = load_keymap(self._keymap_path)
        self._user_keymap = loaded.keymap
        if loaded.keymap:
            self.set_keymap(loaded.keymap)
        for error in loaded.errors:
            self.notify(error, severity="warning", markup=False)
        for notice in self._notices:
            self.notify(notice, title="WORKFLOW.md", severity="warning", markup=False)
        self._install_signals()
        self._guard_sigcont()
        self._start_terminal_watch()
        if self._start_fn is not None:
            # after the first frame is on the screen: building the scheduler costs more
            # than the console
            self.call_after_refresh(self._begin_start)
        elif self._runner_fn is not None:
            self._start_runner()
        self.set_interval(1.0 / self._refresh_hz, self.tick, name="refresh")
        self.call_after_refresh(self.tick)
        self.call_after_refresh(self._fit_screen)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's ``notify`` with the default timeout by severity (``NOTIFY_TIMEOUT_S``)."""
        if timeout is None:
            timeout = NOTIFY_TIMEOUT_S.get(severity, NOTIFY_TIMEOUT_S["warning"])
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # -- screens ----------------------------------------------------------------------

    # Each screen's module is imported when it is first shown, not before the first frame
    # (launch to first frame); the main screen is the only one a launch needs.

    def action_show_approvals(self) -> None:
        from symphony_tui.console.screens.approvals import ApprovalsScreen

        if not isinstance(self.screen, ApprovalsScreen):
            self.push_screen(ApprovalsScreen())
            self.call_after_refresh(self.tick)

    def action_show_recovered(self) -> None:
        from symphony_tui.console.screens.recovered import RecoveredScreen

        if not isinstance(self.screen, RecoveredScreen):
            self.push_screen(RecoveredScreen())
            self.call_after_refresh(self.tick)

    def action_show_hosts(self) -> None:
        """The worker hosts screen; without hosts in the snapshot, one line saying so."""
        from symphony_tui.console.screens.hosts import NO_HOSTS, HostsScreen

        if isinstance(self.screen, HostsScreen):
            return
        if self._snapshot is None or not self._snapshot.hosts:
            self.notify(NO_HOSTS, title="hosts", markup=False)
            return
        self.push_screen(HostsScreen())
        self.call_after_refresh(self.tick)

    def open_worker(self, issue_id: str) -> None:
        """Push the worker detail screen of ``issue_id``."""
        from symphony_tui.console.screens.worker import WorkerScreen

        self.push_screen(WorkerScreen(issue_id))
        self.call_after_refresh(self.tick)

    # -- what screens ask (console.messages) ----------------------------------------------

    def on_open_worker(self, message: OpenWorker) -> None:
        self.open_worker(message.issue_id)

    def action_help(self) -> None:
        from symphony_tui.console.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.key_for))
