"""The Textual operator console.

It reads immutable snapshots and events through a
:class:`~symphony_tui.scheduler.port.SchedulerPort` and sends commands; it never touches
scheduler objects (docs/architecture.md "Who owns which state"). The scheduler's main
coroutine runs on the same asyncio loop, in a worker of group ``scheduler``.

Rendering is driven by one steady timer (``REFRESH_HZ``), not by events, so a flood of
agent events costs one repaint per tick (a steady rate, never one repaint per event).

:class:`SymphonyApp` is the one place Textual calls into: its bindings, actions, message
handlers and hooks. It resolves what is selected and hands the work to helpers, plain
classes it builds with their collaborators (:class:`~symphony_tui.console.state.ConsoleState`,
the app itself typed as :class:`~symphony_tui.console.ui.Ui`, the command sender):

- ``sender``, ``issue_actions``, ``approval_actions`` (``console/actions.py``): sending
  commands (confirming first; audit notes) and the commands on the selected issue or
  approval request;
- ``workspace_actions``, ``exports``: into the workspace; export and screenshots;
- ``enablement`` (``console/enablement.py``): which commands apply (``check_action``);
- ``refresher`` (``console/refresh.py``): reading the port, painting screens;
- ``lifecycle``, ``signals``: start, run, quit, detach; signals and a lost terminal;
- ``key_order`` (``console/key_order.py``): keys handled in the order they were typed.

Helpers reach the app only as :class:`~symphony_tui.console.ui.Ui` (the lifecycle also
gets ``repaint``, the refresh tick); they depend on one another one way (``signals`` on
``lifecycle``, the actions on ``sender``), never in a circle.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import RenderableType
from textual import events
from textual.app import App, SystemCommand
from textual.notifications import Notification, SeverityLevel
from textual.screen import Screen

from symphony_tui.console.actions import ApprovalActions, CommandSender, IssueActions
from symphony_tui.console.attention import ConsoleAttention
from symphony_tui.console.enablement import Enablement, selected_approval, selected_issue
from symphony_tui.console.exports import Exports
from symphony_tui.console.fleet import is_fleet
from symphony_tui.console.key_order import KeyHandled, KeyOrder
from symphony_tui.console.keymap import Keys, default_keymap_path, load_keymap
from symphony_tui.console.lifecycle import Lifecycle
from symphony_tui.console.palette import ConsoleCommands
from symphony_tui.console.refresh import Refresher
from symphony_tui.console.registry import APP_BY_ACTION, ConsoleCommand, bindings_for
from symphony_tui.console.repaint import ShownLines, cropped_update
from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.screens.too_small import TooSmallScreen, too_small
from symphony_tui.console.signals import TERMINAL_CHECK_S, Signals
from symphony_tui.console.starting import Started, StartingPort, notify_of
from symphony_tui.console.state import ConsoleState
from symphony_tui.console.tones import Tones
from symphony_tui.console.workspace_actions import WorkspaceActions, run_in_terminal

if TYPE_CHECKING:
    from textual.worker import Worker

    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.console.messages import ConfirmCommand, OpenWorker, SendCommand
    from symphony_tui.console.terminal_watch import TerminalWatch
    from symphony_tui.domain import ApprovalRequest, Snapshot
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


class SymphonyApp(App[None]):
    """The console. ``port``: the scheduler's port, or ``start``: how to build the
    scheduler after the first frame (``console.starting``); ``runner`` is the scheduler's
    main coroutine (started on mount); ``shutdown`` is awaited once before exit (quit,
    SIGHUP/SIGTERM/SIGINT, scheduler failure).

    ``clock`` supplies "now" for ages and countdowns (tests freeze it);
    ``cursor_blink=False`` makes text inputs deterministic for screenshots;
    ``live_text_s``: seconds between two repaints of streamed text (``LIVE_TEXT_S``; 0
    repaints it on every tick), timed by ``monotonic`` (seconds). Exit code:
    0 on quit / hangup / SIGTERM / SIGINT / lost terminal, 1 when the scheduler fails or
    ``shutdown`` raises.

    ``detach_only``: the scheduler runs elsewhere (``symphony-tui attach``), so quitting
    detaches, and stops workers only when ``q``'s "Stop N agents" sends the scheduler its
    stop command; defaults to the port's ``detach_only`` attribute. ``detachable``: the
    embedded scheduler can outlive the console (``cli`` runs it so): a lost terminal
    detaches, and ``q`` asks stop or detach. ``terminal_watch`` checks for a terminal that
    went away without SIGHUP (default: a ``TerminalWatch`` of stdin/stdout; headless test
    runs watch nothing). ``notices`` are shown once as warnings when the console opens (the
    workflow's unread settings: ``Workflow.warnings``; a fleet's skipped fleet-file lines),
    titled ``notices_title``. ``notify``: what decides the bells
    and desktop alerts (default: the port's live settings). ``terminal_modes``: the
    terminal's modes from before the CLI held the keys typed during start-up
    (``console/typeahead.py``), what Textual must put back on exit and suspend.
    """

    CSS_PATH = "console.tcss"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    #: How a shell or an editor runs on the terminal (``workspace_actions``; tests
    #: replace it).
    launch = staticmethod(run_in_terminal)

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
        notices_title: str = "WORKFLOW.md",
        notify: Callable[[], NotifySettings] | None = None,
        terminal_modes: list | None = None,
        detachable: bool = False,
    ) -> None:
        super().__init__()
        if (port is None) == (start is None):
            raise TypeError("SymphonyApp needs a port or a start, not both")
        port = port if port is not None else StartingPort()
        self.title = title
        self.clock = clock
        self.cursor_blink = cursor_blink
        self.live_text_s = live_text_s
        self.monotonic = monotonic
        self._refresh_hz = refresh_hz
        self._keymap_path = keymap_path if keymap_path is not None else default_keymap_path()
        self._notices = tuple(notices)
        #: what the terminal shows, line by line, so a frame writes only what changed
        self._shown = ShownLines()
        self._notices_title = notices_title
        self._terminal_modes = terminal_modes
        self._tones: tuple[str, Tones] | None = None
        self._enabled_signature: tuple = ()
        #: True while a shell or an editor has the terminal (:meth:`handed_over`).
        self.terminal_handed_over = False
        #: The toast last shown under each ``notify(key=...)``.
        self._keyed_toasts: dict[str, Notification] = {}

        state = ConsoleState(
            port,
            detach_only=(port.detach_only if detach_only is None else detach_only),
            notify=notify if notify is not None else notify_of(port),
        )
        self.state = state
        self.attention = ConsoleAttention(
            lambda: state.notify(), bell=self.bell, write=self._write_terminal
        )
        self.keys = Keys()
        self.sender = CommandSender(state, self)
        self.issue_actions = IssueActions(state, self, self.sender)
        self.approval_actions = ApprovalActions(self, self.sender)
        self.workspace_actions = WorkspaceActions(state, self, self.sender)
        self.exports = Exports(state, self, self.sender, clock)
        self.enablement = Enablement(state, self.keys)
        self.refresher = Refresher(state, self, self.attention)
        self.lifecycle = Lifecycle(
            state,
            self,
            start=start,
            runner=runner,
            shutdown=shutdown,
            detachable=detachable,
            repaint=self.tick,
        )
        self.signals = Signals(state, self.lifecycle, terminal_watch)
        self.key_order = KeyOrder(
            super().on_event, lambda: self.focused or self.screen, self.set_timer
        )

    # -- what screens and the CLI read (console.messages.ConsoleApp) --------------------

    @property
    def port(self) -> SchedulerPort:
        """The scheduler's port (a ``StartingPort`` until the scheduler is built)."""
        return self.state.port

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot shown last (``None`` before the first tick)."""
        return self.state.snapshot

    @property
    def project_filter(self) -> str | None:
        """A fleet console's project filter: the project whose rows every pane shows
        (``None``: every project's; ``console/fleet.py``)."""
        return self.state.project_filter

    @property
    def starting(self) -> bool:
        """True until the scheduler is built (``start``; :mod:`console.starting`)."""
        return self.state.starting

    @property
    def stopping(self) -> bool:
        """True once a quit or detach began (``shutdown_and_exit``): the screens are about
        to go, so no key but quit (which forces the exit) runs an action any more."""
        return self.state.stopping

    @property
    def fleet(self) -> bool:
        """A fleet console: several schedulers' merged snapshot (``console/fleet.py``)."""
        return is_fleet(self.state.fleet_snapshot)

    @property
    def detach_only(self) -> bool:
        """The scheduler runs elsewhere: quitting detaches."""
        return self.state.detach_only

    @property
    def detached(self) -> str | None:
        """Why the console left its scheduler running (None: it did not)."""
        return self.lifecycle.detached

    @property
    def failed(self) -> BaseException | None:
        """The unhandled error that ended the console (Textual keeps the first one in
        ``App._exception``; Textual is pinned), or None."""
        return self._exception

    @property
    def stop_cause(self) -> str | None:
        """What made the console stop its scheduler (``Lifecycle.stop_cause``)."""
        return self.lifecycle.stop_cause

    @property
    def start_error(self) -> str | None:
        """The one-line reason the scheduler could not be built (the CLI prints it)."""
        return self.lifecycle.start_error

    @property
    def scheduler_stopped(self) -> bool:
        """The scheduler's main coroutine returned while the console was not quitting."""
        return self.lifecycle.scheduler_stopped

    @property
    def tones(self) -> Tones:
        """Styles of the current theme."""
        if self._tones is None or self._tones[0] != self.theme:
            self._tones = (self.theme, Tones.from_variables(self.get_css_variables()))
        return self._tones[1]

    def key_for(self, cmd: ConsoleCommand) -> str:
        """The key(s) that run ``cmd`` now, after keymap remapping, for display."""
        return self.keys.display(cmd)

    # -- the terminal -------------------------------------------------------------------

    def _write_terminal(self, text: str) -> None:
        """Raw output to the terminal (a desktop notification escape); none when headless
        or while another program has the terminal (``handed_over``)."""
        if not self.is_headless and self._driver is not None and not self.terminal_handed_over:
            self._driver.write(text)

    def bell(self) -> None:
        if not self.terminal_handed_over:  # Textual's writer is stopped meanwhile
            super().bell()

    @contextlib.contextmanager
    def handed_over(self) -> Iterator[None]:
        """``App.suspend`` for a program that runs while the event loop goes on (the
        scheduler keeps working): nothing is painted or written to the terminal meanwhile.
        Textual's output thread is stopped while suspended, so a repaint would fill its
        queue and block the loop for good (the console and its scheduler would hang once
        the shell exits). Raises ``SuspendNotSupported`` like ``App.suspend``."""
        self.terminal_handed_over = True
        try:
            with self.batch_update(), self.suspend():
                yield
        finally:
            self.terminal_handed_over = False

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
        key: str | None = None,
    ) -> None:
        """Textual's ``notify`` with the default timeout by severity (``NOTIFY_TIMEOUT_S``).
        ``key``: the toast replaces the one shown under the same key (the newest says it)."""
        if timeout is None:
            timeout = NOTIFY_TIMEOUT_S.get(severity, NOTIFY_TIMEOUT_S["warning"])
        if key is None:
            super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
            return
        toast = Notification(message, title, severity, timeout, markup=markup)
        # after the messages queued before it (an earlier notify's toast is shown by then)
        self.call_later(self._replace_toast, key, toast)

    def _replace_toast(self, key: str, toast: Notification) -> None:
        """Show ``toast`` in place of the one ``key`` showed (Textual has no public call
        that removes one toast: its own toasts use ``_unnotify`` when dismissed)."""
        shown = self._keyed_toasts.get(key)
        if shown is not None and shown in self._notifications:
            self._unnotify(shown, refresh=False)
        self._keyed_toasts[key] = toast
        self._notifications.add(toast)
        self._refresh_notifications()

    # -- lifecycle ------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def _display(self, screen: Screen, renderable: RenderableType | None) -> None:
        # every frame goes through here to the terminal; a partial one is written over its
        # dirty spans only, and only where it differs from what the terminal shows (see
        # ``cropped_update``); a full one records what it shows
        super()._display(screen, cropped_update(renderable, self._shown, screen))

    def on_mount(self) -> None:
        if self._terminal_modes is not None and getattr(self._driver, "attrs_before", None):
            # Textual's Linux driver saved the held modes (no echo) when it started
            self._driver.attrs_before = self._terminal_modes
        loaded = load_keymap(self._keymap_path)
        self.keys.keymap = loaded.keymap
        if loaded.keymap:
            self.set_keymap(loaded.keymap)
        for error in loaded.errors:
            self.notify(error, severity="warning", markup=False)
        for notice in self._notices:
            self.notify(notice, title=self._notices_title, severity="warning", markup=False)
        self.signals.install(self._driver, self.error_console)
        # back from a shell or ctrl+z: the terminal was another program's meanwhile
        self.app_resume_signal.subscribe(self, lambda _app: self._shown.clear())
        if self.signals.watch_terminal(headless=self.is_headless):
            self.set_interval(TERMINAL_CHECK_S, self.check_terminal, name="terminal-watch")
        if self.lifecycle.builds:
            # after the first frame is on the screen: building the scheduler costs more
            # than the console
            self.call_after_refresh(self.lifecycle.begin_start)
        else:
            self.lifecycle.run()
        self.set_interval(1.0 / self._refresh_hz, self.tick, name="refresh")
        self.call_after_refresh(self.tick)
        self.call_after_refresh(self._fit_screen)

    def on_unmount(self) -> None:
        self.signals.remove()

    def check_terminal(self) -> None:
        """Called once a second: a lost terminal takes the SIGHUP path."""
        self.signals.check_terminal()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.lifecycle.worker_changed(event)

    async def shutdown_and_exit(self, return_code: int = 0, message: str | None = None) -> None:
        """Await ``shutdown`` once, then exit (``Lifecycle.shutdown_and_exit``)."""
        await self.lifecycle.shutdown_and_exit(return_code, message)

    async def action_quit(self) -> None:
        # every project's workers in a fleet console, whatever the project filter shows
        snapshot = self.state.fleet_snapshot or self.state.snapshot
        running = snapshot.running if snapshot else ()
        await self.lifecycle.quit(len(running))

    # -- keys -------------------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            await self.key_order.arrived(event)
        else:
            await super().on_event(event)

    async def on_key_handled(self, message: KeyHandled) -> None:
        await self.key_order.handled(message)

    def on_key(self, event: events.Key) -> None:
        """A key that answers approvals, pressed where the selection has none while others
        wait: say where they are instead of doing nothing (the binding itself is disabled,
        so the key reaches here; text inputs consume their keys before)."""
        said = self.enablement.misplaced_approval_key(event.key, self._acting_screen(), self.screen)
        if said is not None:
            self.notify(said, severity="warning", markup=False)

    # -- the refresh ----------------------------------------------------------------------

    def tick(self) -> None:
        """Read the port and repaint what is visible: the top screen and, through modal
        dialogs, the screens under them. Unchanged input skips the repaint.

        Once quitting (the workers stop, ``stopping``) nothing is repainted: the screen
        holds its last frame under the "stopping workers…" notice, and the loop's time goes
        to the shutdown instead of re-laying out tables whose rows all end at once (with 50
        workers that repaint is a large share of the quit's loop time)."""
        if self._exit or not self.is_running or self.state.stopping:
            return
        self._fit_screen()
        if self.state.starting:
            return  # nothing to show before the scheduler is built (console.starting)
        snapshot = self.refresher.read()
        if snapshot is None:
            return
        now = self.clock()
        tones = self.tones
        now_link = self.state.port.link()  # attached: a lost link repaints at once
        self.lifecycle.link_read(now_link)
        link = now_link.state if now_link is not None else None
        key = (id(snapshot), snapshot.generated_at, int(now.timestamp()), self.theme, link)
        self.refresher.paint(self.screen_stack, snapshot, now, tones, key)
        signature = tuple(self.check_action(name, ()) for name in APP_BY_ACTION)
        if signature != self._enabled_signature:
            self._enabled_signature = signature
            self.refresh_bindings()

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit_screen)

    def _fit_screen(self) -> None:
        """Swap :class:`TooSmallScreen` in while the terminal is below 80x24 and out
        again once it is large enough (the screens under it are kept as they were)."""
        if self._exit or not self.is_running:
            return
        width, height = self.size
        shown = next((s for s in self.screen_stack if isinstance(s, TooSmallScreen)), None)
        if too_small(width, height):
            if shown is None:
                self.push_screen(TooSmallScreen())
                self.call_after_refresh(self._fit_screen)  # fill in the size once mounted
            elif shown.is_mounted:
                shown.show_size(width, height)
        elif shown is not None and shown is self.screen:
            # a dialog opened on top of it (q asks first) is left to close by itself
            self.pop_screen()
            self.call_after_refresh(self.tick)

    # -- what the app commands act on -----------------------------------------------------

    def _acting_screen(self) -> Screen:
        """The screen whose selection the commands act on: the active one, or, while the
        command palette is open, the screen it was opened from (its row actions apply to
        that screen's selected row)."""
        from textual.command import CommandPalette

        stack = self.screen_stack
        if len(stack) > 1 and isinstance(stack[-1], CommandPalette):
            return stack[-2]
        return self.screen

    def _issue(self) -> str | None:
        return selected_issue(self._acting_screen())

    def _approval(self) -> ApprovalRequest | None:
        return selected_approval(self._acting_screen())

    def _project(self) -> str | None:
        """Where a command that names no issue goes in a fleet console: the acting
        screen's selected project or host row's project, the selected row's, the filter's
        (``ConsoleState.project_for``); ``None`` outside a fleet or when none says."""
        screen = self._acting_screen()
        chosen = getattr(screen, "selected_project", None)
        return self.state.project_for(self._issue(), chosen() if callable(chosen) else None)

    def _focused_project(self) -> str | None:
        """The project the operator's focused selection names in a fleet console: the
        acting screen's selected project or host row's, else its selected row's; on the
        main screen only while the focus is on the issues or workers table
        (``MainScreen.focused_issue_id``). ``None`` outside a fleet or when none says."""
        screen = self._acting_screen()
        chosen = getattr(screen, "selected_project", None)
        focused = getattr(screen, "focused_issue_id", None)
        issue = focused() if callable(focused) else self._issue()
        project = chosen() if callable(chosen) else None
        from symphony_tui.console.fleet import is_fleet, project_of

        if not is_fleet(self.state.fleet_snapshot):
            return None
        return project or project_of(self.state.fleet_snapshot, issue)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.enablement.allows(action, self._acting_screen())

    # -- actions: the selected issue or worker (issue_actions) ------------------------------

    def action_interrupt(self) -> None:
        self.issue_actions.interrupt(self._issue())

    def action_stop(self) -> None:
        self.issue_actions.stop(self._issue())

    def action_steer(self) -> None:
        self.issue_actions.steer(self._issue())

    def action_budget(self) -> None:
        self.issue_actions.budget(self._issue())

    def action_rerun(self) -> None:
        self.issue_actions.rerun(self._issue())

    def action_move(self) -> None:
        self.issue_actions.move(self._issue())

    def action_refresh(self) -> None:
        self.issue_actions.refresh(self._project())

    def action_toggle_pause(self) -> None:
        self.issue_actions.toggle_pause(self._focused_project())

    # -- actions: the fleet (console/fleet.py) ----------------------------------------------

    def action_cycle_project(self) -> None:
        """Filter by the next project (in the projects table's order), after the last
        one every project again."""
        snapshot = self.state.fleet_snapshot
        if snapshot is None or not snapshot.projects:
            return
        names = [p.name for p in snapshot.projects]
        current = self.state.project_filter
        if current not in names:
            self.set_project_filter(names[0])
        else:
            i = names.index(current) + 1
            self.set_project_filter(names[i] if i < len(names) else None)

    def set_project_filter(self, project: str | None) -> None:
        """Show only ``project``'s rows in every pane (``None``: every project's)."""
        self.state.project_filter = project
        shown = f"showing project {project} only" if project else "showing every project"
        self.notify(shown, title="fleet", markup=False)
        self.tick()

    def action_show_projects(self) -> None:
        from symphony_tui.console.screens.projects import ProjectsScreen

        if not isinstance(self.screen, ProjectsScreen):
            self.push_screen(ProjectsScreen())
            self.call_after_refresh(self.tick)

    # -- actions: the selected approval (approval_actions) ----------------------------------

    def action_approve(self) -> None:
        self.approval_actions.approve(self._approval())

    def action_approve_session(self) -> None:
        self.approval_actions.approve_session(self._approval())

    def action_deny(self) -> None:
        self.approval_actions.deny(self._approval())

    def action_deny_message(self) -> None:
        self.approval_actions.deny_message(self._approval())

    def action_cancel_turn(self) -> None:
        self.approval_actions.cancel_turn(self._approval())

    def action_grant(self) -> None:
        self.approval_actions.grant(self._approval())

    def action_answer(self) -> None:
        self.approval_actions.answer(self._approval())

    # -- actions: the workspace, export, screenshots ---------------------------------------

    def action_workspace(self) -> None:
        self.workspace_actions.open(self._issue())

    def action_export(self) -> None:
        self.exports.ask(self.screen)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.exports.save_screenshot(Path(path) if path else None, filename)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, less its Quit (the console's own ``Quit`` asks first
        while workers run) and with a Screenshot that saves where ``paths`` says."""
        for command in super().get_system_commands(screen):
            if command.title == "Quit":
                continue
            if command.title == "Screenshot":
                from symphony_tui.paths import screenshots_dir

                help_ = f"Save an SVG picture of the screen in {screenshots_dir()}"
                # After the palette has closed, so the picture shows the screen under it.
                later = lambda: self.set_timer(0.1, self.exports.save_screenshot)  # noqa: E731
                yield SystemCommand("Screenshot", help_, later)
                continue
            yield command

    # -- actions: screens -------------------------------------------------------------------

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
        snapshot = self.state.snapshot
        if snapshot is None or not snapshot.hosts:
            self.notify(NO_HOSTS, title="hosts", markup=False)
            return
        self.push_screen(HostsScreen())
        self.call_after_refresh(self.tick)

    def action_show_diff(self) -> None:
        found = self.state.workspace_of(self._issue())
        if found is None:
            self.notify("no workspace for the selection", severity="warning")
            return
        from symphony_tui.console.screens.diff import DiffScreen

        if isinstance(self.screen, DiffScreen):
            return
        self.push_screen(DiffScreen(found[0], found[1]))

    def action_show_audit(self) -> None:
        from symphony_tui.console.screens.audit import AuditScreen

        if not isinstance(self.screen, AuditScreen):
            self.push_screen(AuditScreen())

    def action_help(self) -> None:
        """Show the help screen. It is built once (keys are remapped only at start) and kept
        installed, so an opening lays out and draws it but composes nothing."""
        from symphony_tui.console.screens.help import HelpScreen

        fleet = self.fleet
        name = "help-fleet" if fleet else "help"
        if not self.is_screen_installed(name):
            self.install_screen(HelpScreen(self.key_for, fleet=fleet), name)
        self.push_screen(name)

    def open_worker(self, issue_id: str) -> None:
        """Push the worker detail screen of ``issue_id``."""
        from symphony_tui.console.screens.worker import WorkerScreen

        self.push_screen(WorkerScreen(issue_id))
        self.call_after_refresh(self.tick)

    # -- what screens ask (console.messages) ------------------------------------------------

    def on_open_worker(self, message: OpenWorker) -> None:
        self.open_worker(message.issue_id)

    def on_send_command(self, message: SendCommand) -> None:
        self.sender.send(message.command)

    def on_confirm_command(self, message: ConfirmCommand) -> None:
        self.sender.confirm_then(message.title, message.body, message.command, message.yes)
