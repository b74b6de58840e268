"""The Textual operator console.

It reads immutable snapshots and events through a
:class:`~symphony_tui.scheduler.port.SchedulerPort` and sends commands; it never touches
scheduler objects (docs/architecture.md "Who owns which state"). The scheduler's main
coroutine runs on the same asyncio loop, in a worker of group ``scheduler``.

Rendering is driven by one steady timer (``REFRESH_HZ``), not by events, so a flood of
agent events costs one repaint per tick (a steady rate, never one repaint per event).
"""

from __future__ import annotations

import signal
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.app import App
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from symphony_tui.console.approval_text import asked, permission_choices
from symphony_tui.console.keymap import default_keymap_path, load_keymap
from symphony_tui.console.messages import ConfirmCommand, OpenWorker, SendCommand
from symphony_tui.console.palette import ConsoleCommands
from symphony_tui.console.registry import (
    APP_BY_ACTION,
    ConsoleCommand,
    bindings_for,
    display_key,
)
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.screens.approvals import ApprovalsScreen
from symphony_tui.console.screens.help import HelpScreen
from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.screens.modals import AskText, Choose, Confirm
from symphony_tui.console.screens.recovered import RecoveredScreen
from symphony_tui.console.screens.too_small import TooSmallScreen, too_small
from symphony_tui.console.screens.worker import WorkerScreen
from symphony_tui.console.selection import Selection
from symphony_tui.console.terminal_watch import TerminalWatch
from symphony_tui.console.tones import Tones
from symphony_tui.domain import (
    Answer,
    ApprovalDecision,
    ApprovalRequest,
    Approve,
    Deny,
    Interrupt,
    MoveIssue,
    PauseDispatch,
    Refresh,
    Rerun,
    Snapshot,
    Stop,
)
from symphony_tui.domain.commands import Command
from symphony_tui.scheduler.port import CommandResult, SchedulerPort

REFRESH_HZ = 4.0
TERMINAL_CHECK_S = 1.0
# Toasts cover the bottom-right of the screen (the approvals "Selected" panel, help text,
# pane borders): routine confirmations go quickly, problems stay long enough to be read.
NOTIFY_TIMEOUT_S = {"information": 2.5, "warning": 6.0, "error": 10.0}


def _utc_now() -> datetime:
    return datetime.now(UTC)


# What the approval-answering commands need selected (registry ``requires``).
_ANSWER_REQUIRES = frozenset({"accept", "decline", "cancel", "question"})


class SymphonyApp(App[None]):
    """The console. ``runner`` is the scheduler's main coroutine (started on mount);
    ``shutdown`` is awaited once before exit (quit, SIGHUP/SIGTERM/SIGINT, scheduler
    failure).

    ``clock`` supplies "now" for ages and countdowns (tests freeze it);
    ``cursor_blink=False`` makes text inputs deterministic for screenshots. Exit code:
    0 on quit / hangup / SIGTERM / SIGINT / lost terminal, 1 when the scheduler fails or
    ``shutdown`` raises.

    ``detach_only``: the scheduler runs elsewhere (``symphony-tui attach``), so quitting
    only detaches and never stops workers; defaults to the port's ``detach_only``
    attribute. ``terminal_watch`` checks for a terminal that went away without SIGHUP
    (default: a :class:`TerminalWatch` of stdin/stdout; headless test runs watch nothing).
    """

    CSS_PATH = "console.tcss"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    def __init__(
        self,
        port: SchedulerPort,
        *,
        runner: Callable[[], Awaitable[None]] | None = None,
        shutdown: Callable[[], Awaitable[None]] | None = None,
        title: str = "symphony",
        keymap_path: Path | None = None,
        clock: Callable[[], datetime] = _utc_now,
        cursor_blink: bool = True,
        refresh_hz: float = REFRESH_HZ,
        detach_only: bool | None = None,
        terminal_watch: TerminalWatch | None = None,
    ) -> None:
        super().__init__()
        self.port = port
        self.title = title
        self.clock = clock
        self.cursor_blink = cursor_blink
        self._runner_fn = runner
        self._shutdown_fn = shutdown
        self._keymap_path = keymap_path if keymap_path is not None else default_keymap_path()
        self._user_keymap: dict[str, str] = {}
        self._refresh_hz = refresh_hz
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
        self.detach_only = (
            bool(getattr(port, "detach_only", False)) if detach_only is None else detach_only
        )
        self._terminal_watch = terminal_watch

    # -- lifecycle ------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def on_mount(self) -> None:
        loaded = load_keymap(self._keymap_path)
        self._user_keymap = loaded.keymap
        if loaded.keymap:
            self.set_keymap(loaded.keymap)
        for error in loaded.errors:
            self.notify(error, severity="warning", markup=False)
        self._install_signals()
        self._guard_sigcont()
        self._start_terminal_watch()
        if self._runner_fn is not None:
            self.run_worker(
                self._run_scheduler(), name="scheduler", group="scheduler", exit_on_error=False
            )
        self.set_interval(1.0 / self._refresh_hz, self.tick, name="refresh")
        self.call_after_refresh(self.tick)
        self.call_after_refresh(self._fit_screen)

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

    def on_unmount(self) -> None:
        for sig in self._signals_installed:
            try:
                self._event_loop().remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        self._signals_installed = []

    def _event_loop(self):
        import asyncio

        return asyncio.get_running_loop()

    def _install_signals(self) -> None:
        """SIGHUP (a dropped SSH session), SIGTERM (``kill``, a service manager) and
        SIGINT (``kill -INT``; ctrl+c is a key in raw mode) all stop the workers and
        leave with exit 0. SIGHUP means the terminal is gone; the other two leave it
        working, so Textual restores it (main screen, mouse off, cursor shown)."""
        handlers = {
            signal.SIGHUP: self._on_sighup,
            signal.SIGTERM: lambda: self._on_stop_signal("terminated"),
            signal.SIGINT: lambda: self._on_stop_signal("interrupted"),
        }
        for sig, handler in handlers.items():
            try:
                self._event_loop().add_signal_handler(sig, handler)
            except (NotImplementedError, RuntimeError, ValueError, AttributeError):
                continue
            self._signals_installed.append(sig)

    def _on_sighup(self) -> None:
        self.terminal_lost("hangup")

    def _on_stop_signal(self, reason: str) -> None:
        """SIGTERM / SIGINT: the quit path without asking. A second signal while the
        workers stop forces the exit, as a second ``q`` does."""
        done = "detached" if self.detach_only else "workers stopped"
        self.run_worker(
            self.shutdown_and_exit(0, f"{reason}: {done}"),
            group="lifecycle",
            exit_on_error=False,
        )

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

        def on_sigcont(signum: int, frame: object) -> None:
            if getattr(driver, "_must_signal_resume", False):
                textual_handler(signum, frame)

        try:
            signal.signal(signal.SIGCONT, on_sigcont)
        except ValueError:  # not the main thread
            pass

    def _mute_terminal(self) -> None:
        """The terminal is gone: drop output instead of queueing it. Textual's writer
        thread dies on the first EIO, and its bounded queue would then block the event
        loop (and the shutdown of the workers) forever."""
        writer = getattr(self._driver, "_writer_thread", None)
        if writer is not None:
            writer.write = lambda text: None
            writer.stop = lambda: None

    def _start_terminal_watch(self) -> None:
        if self._terminal_watch is None and not self.is_headless:
            self._terminal_watch = TerminalWatch()
        if self._terminal_watch is not None and self._terminal_watch.active:
            self.set_interval(TERMINAL_CHECK_S, self.check_terminal, name="terminal-watch")

    def check_terminal(self) -> None:
        """Called once a second: a lost terminal takes the SIGHUP path."""
        watch = self._terminal_watch
        reason = watch.lost() if watch is not None else None
        if reason is not None and not self._stopping:
            self.terminal_lost(reason)

    def terminal_lost(self, reason: str) -> None:
        """The operator's terminal is gone (SIGHUP, hung-up tty, dead parent): stop the
        workers (or detach) and exit 0, never spin or leave workers behind silently."""
        if self._stopping:
            return
        self._mute_terminal()
        done = "detached" if self.detach_only else "workers stopped"
        self.run_worker(
            self.shutdown_and_exit(0, f"{reason}: {done}"),
            group="lifecycle",
            exit_on_error=False,
        )

    async def _run_scheduler(self) -> None:
        assert self._runner_fn is not None
        await self._runner_fn()

    async def shutdown_and_exit(self, return_code: int = 0, message: str | None = None) -> None:
        """Await ``shutdown`` once, then exit. A second call while stopping forces the
        exit (a hung shutdown must not trap the operator)."""
        if self._stopping:
            self.exit(return_code=1, message="forced quit while stopping workers")
            return
        self._stopping = True
        if self._shutdown_fn is not None:
            self.notify("detaching…" if self.detach_only else "stopping workers…", timeout=30)
            try:
                await self._shutdown_fn()
            except Exception as exc:
                return_code = 1
                message = f"shutdown failed: {one_line(exc, 200)}"
        self.exit(return_code=return_code, message=message)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker outcomes are routed (harlequin style)."""
        worker = event.worker
        if event.state == WorkerState.ERROR:
            error = worker.error
            text = one_line(f"{type(error).__name__}: {error}", 300)
            if worker.group == "scheduler":
                self.run_worker(
                    self.shutdown_and_exit(1, f"scheduler failed: {text}"),
                    group="lifecycle",
                    exit_on_error=False,
                )
            else:
                self.notify(text, title=f"{worker.group} failed", severity="error", markup=False)
        elif (
            event.state == WorkerState.SUCCESS
            and worker.group == "scheduler"
            and not self._stopping
        ):
            self.scheduler_stopped = True
            self.notify("the scheduler stopped", severity="warning", timeout=30)

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

    # -- rendering ------------------------------------------------------------------

    @property
    def tones(self) -> Tones:
        if self._tones is None or self._tones[0] != self.theme:
            self._tones = (self.theme, Tones.from_variables(self.get_css_variables()))
        return self._tones[1]

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot shown last (``None`` before the first tick)."""
        return self._snapshot

    def tick(self) -> None:
        """Read the port and repaint what is visible: the top screen and, through modal
        dialogs, the screens under them. Unchanged input skips the repaint."""
        if self._exit or not self.is_running:
            return
        self._fit_screen()
        try:
            snapshot = self.port.snapshot()
        except Exception as exc:
            text = one_line(f"{type(exc).__name__}: {exc}", 300)
            if text != self._port_error:
                self._port_error = text
                self.notify(text, title="snapshot failed", severity="error", markup=False)
            return
        self._port_error = None
        self._snapshot = snapshot
        now = self.clock()
        tones = self.tones
        key = (id(snapshot), snapshot.generated_at, int(now.timestamp()), self.theme)
        for screen in reversed(self.screen_stack):
            self._paint(screen, snapshot, now, tones, key)
            if not screen.is_modal:
                break
        self._refresh_bindings_if_changed()

    def _paint(self, screen: Screen, snapshot: Snapshot, now: datetime, tones: Tones, key) -> None:
        show = getattr(screen, "show", None)
        if show is None or not screen.is_mounted:
            return  # a screen still composing is painted by the next tick
        try:
            if self._render_keys.get(screen) != key:
                show(snapshot, now, tones)
                self._render_keys[screen] = key
            elif (pull := getattr(screen, "pull", None)) is not None:
                pull(tones)
        except NoMatches:
            pass  # widgets come and go while a screen is built or torn down
        except Exception as exc:  # a bad value must not kill the console
            self.notify(
                one_line(f"render failed: {type(exc).__name__}: {exc}", 300),
                severity="error",
                markup=False,
            )

    def _refresh_bindings_if_changed(self) -> None:
        signature = tuple(self.check_action(name, ()) for name in APP_BY_ACTION)
        if signature != self._enabled_signature:
            self._enabled_signature = signature
            self.refresh_bindings()

    # -- selection and enablement --------------------------------------------------

    def _selection(self) -> Selection | None:
        screen = self.screen
        return screen if isinstance(screen, Selection) else None

    def _selected_issue(self) -> str | None:
        sel = self._selection()
        return sel.selected_issue_id() if sel else None

    def _selected_approval(self) -> ApprovalRequest | None:
        sel = self._selection()
        return sel.selected_approval() if sel else None

    def _running_ids(self) -> set[str]:
        return {r.issue_id for r in self._snapshot.running} if self._snapshot else set()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        cmd = APP_BY_ACTION.get(action)
        if cmd is None or cmd.requires is None:
            return True
        if self._selection() is None:
            return False
        requires = cmd.requires
        # Textual 8: False hides the key from the footer (None would show it dimmed, which
        # reads as an offer); what does not apply to the selected row is hidden
        if requires in ("issue", "running", "rerun"):
            issue = self._selected_issue()
            if issue is None:
                return False
            running = issue in self._running_ids()
            if requires == "running":
                return running
            if requires == "rerun":
                if isinstance(self.screen, (RecoveredScreen, WorkerScreen)):
                    return False  # these screens own "r" (re-attach / rerun, with reasons)
                return not running
            return True
        # approval commands hide when nothing applies, keeping the footer short
        approval = self._selected_approval()
        if approval is None:
            return False
        if requires == "cancel":
            return ApprovalDecision.CANCEL in approval.available
        if requires == "question":
            return bool(approval.questions)
        if action == "grant":
            return bool(permission_choices(approval))
        if approval.questions:
            return requires == "decline"
        if requires == "accept":
            wanted = (
                ApprovalDecision.ACCEPT_FOR_SESSION
                if action == "approve_session"
                else ApprovalDecision.ACCEPT
            )
            return wanted in approval.available
        return bool({ApprovalDecision.DECLINE, ApprovalDecision.CANCEL} & set(approval.available))

    def on_key(self, event: events.Key) -> None:
        """A key that answers approvals, pressed where the selection has none while others
        wait: say where they are instead of doing nothing (the binding itself is disabled,
        so the key reaches here; text inputs consume their keys before)."""
        snapshot = self._snapshot
        if snapshot is None or not snapshot.approvals:
            return
        cmd = next(
            (
                c
                for c in APP_BY_ACTION.values()
                if c.requires in _ANSWER_REQUIRES
                and event.key in self._user_keymap.get(c.id, c.key).split(",")
            ),
            None,
        )
        if cmd is None or self.check_action(cmd.action_name, ()):
            return
        approval = self._selected_approval()
        issue = self._selected_issue()
        if approval is not None:
            what = "this request does not offer that"
        else:
            name = next((r.identifier for r in snapshot.issues if r.issue_id == issue), None)
            what = f"{name or 'the selection'} has nothing waiting for you"
        where = sorted({a.issue_identifier or a.issue_id for a in snapshot.approvals})
        self.notify(
            one_line(f"{what}; waiting: {', '.join(where)} (v opens the approvals)", 200),
            severity="warning",
            markup=False,
        )

    def key_for(self, cmd: ConsoleCommand) -> str:
        """The key(s) that run ``cmd`` now, after keymap remapping, for display."""
        return display_key(self._user_keymap.get(cmd.id, cmd.key))

    # -- sending --------------------------------------------------------------------

    def send(self, command: Command) -> None:
        """Send ``command`` in a worker; its result becomes a notification."""
        self.run_worker(self._send(command), group="commands", exit_on_error=False)

    async def _send(self, command: Command) -> CommandResult:
        result = await self.port.send(command)
        message = (
            one_line(result.message, 300) or f"{command.type}: {'ok' if result.ok else 'failed'}"
        )
        # a confirmation is one line ("accept sent for DEMO-3"); a failure names its command
        self.notify(
            message,
            title="" if result.ok else command.type.replace("_", " "),
            severity="information" if result.ok else "error",
            markup=False,
        )
        return result

    def _ident(self, issue_id: str) -> str:
        if self._snapshot is not None:
            for r in self._snapshot.running:
                if r.issue_id == issue_id:
                    return r.issue_identifier
            for i in self._snapshot.issues:
                if i.issue_id == issue_id:
                    return i.identifier
        return issue_id

    # -- actions ------------------------------------------------------------------------

    def confirm_then(self, title: str, body: Text, command: Command, yes: str) -> None:
        """Ask (``Confirm``), then send ``command`` if the operator says yes."""

        def decided(ok: bool | None) -> None:
            if ok:
                self.send(command)

        self.push_screen(Confirm(title, body, yes=yes), decided)

    def action_interrupt(self) -> None:
        issue = self._selected_issue()
        if issue is None or issue not in self._running_ids():
            return
        body = Text("Interrupt the running turn of ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        body.append("? The run ends as cancelled.")
        self.confirm_then("Interrupt worker", body, Interrupt(issue_id=issue), "Interrupt")

    def action_stop(self) -> None:
        issue = self._selected_issue()
        if issue is None or issue not in self._running_ids():
            return
        body = Text("Stop the worker of ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        body.append("? Its workspace is kept and the claim released.")
        self.confirm_then("Stop worker", body, Stop(issue_id=issue), "Stop")

    def action_approve(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(Approve(approval_id=approval.id))

    def action_approve_session(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(Approve(approval_id=approval.id, for_session=True))

    def action_deny(self) -> None:
        approval = self._selected_approval()
        if approval is not None:
            self.send(Deny(approval_id=approval.id))

    def action_cancel_turn(self) -> None:
        approval = self._selected_approval()
        if approval is None or ApprovalDecision.CANCEL not in approval.available:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, "bold", limit=80)
        )
        body.append(" and end the turn of ")
        body.append_text(inert(approval.issue_identifier or approval.issue_id, "bold"))
        body.append("? The agent stops working on this turn.")
        self.confirm_then(
            "Cancel turn", body, Deny(approval_id=approval.id, cancel=True), "Cancel turn"
        )

    @work(group="dialogs", exclusive=True, exit_on_error=False)
    async def action_grant(self) -> None:
        """Grant one part of a permissions request (or all of it), then pick the scope."""
        approval = self._selected_approval()
        parts = permission_choices(approval) if approval is not None else []
        if approval is None or not parts:
            return
        everything = "everything asked"
        body = Text("Grant which part of ", end="")
        body.append_text(inert(asked(approval, 60), "bold"))
        body.append("?")
        choices = [(label, None) for label, _ in parts] + [(everything, None)]
        picked = await self.push_screen_wait(Choose("Grant permissions", body, choices))
        if picked is None:
            return
        scopes = [("this turn", None), ("the rest of the session", None)]
        scope = await self.push_screen_wait(Choose("For how long", Text(picked), scopes))
        if scope is None:
            return
        grant = dict(parts).get(picked)  # None: everything asked
        self.send(
            Approve(approval_id=approval.id, for_session=scope != "this turn", permissions=grant)
        )

    def action_deny_message(self) -> None:
        approval = self._selected_approval()
        if approval is None:
            return
        body = Text("Deny ", end="")
        body.append_text(
            inert(approval.summary or approval.command or approval.kind.value, limit=80)
        )
        body.append("\nwith this message to the agent:")

        def entered(message: str | None) -> None:
            if message is not None:
                self.send(Deny(approval_id=approval.id, message=message))

        self.push_screen(AskText("Deny with a message", body, placeholder="reason"), entered)

    def action_answer(self) -> None:
        approval = self._selected_approval()
        if approval is not None and approval.questions:
            self._ask_questions(approval)

    @work(group="dialogs", exclusive=True, exit_on_error=False)
    async def _ask_questions(self, approval: ApprovalRequest) -> None:
        answers: dict[str, tuple[str, ...]] = {}
        for n, q in enumerate(approval.questions, 1):
            title = f"Question {n}/{len(approval.questions)}"
            body = inert(q.header, "bold") if q.header else Text("", end="")
            if q.question:
                if body.plain:
                    body.append("\n")
                body.append_text(inert(q.question, multiline=True))
            if q.options:
                choices = [(o.label, o.description) for o in q.options]
                value = await self.push_screen_wait(Choose(title, body, choices, allow_text=True))
            else:
                value = await self.push_screen_wait(AskText(title, body, placeholder="answer"))
            if value is None:
                self.notify("answer cancelled", severity="warning")
                return
            answers[q.id] = (value,)
        self.send(Answer(approval_id=approval.id, answers=answers))

    def action_rerun(self) -> None:
        issue = self._selected_issue()
        if issue is not None:
            self.send(Rerun(issue_id=issue))

    def action_move(self) -> None:
        """Offer the workflow's states (``Snapshot.tracker_states``: active, then terminal)
        as a list, with free text for any other state the tracker knows. A scheduler
        that does not report them (an older one behind ``attach``) gets a text box that
        suggests the states its issues are in."""
        issue = self._selected_issue()
        if issue is None or self._snapshot is None:
            return
        snapshot = self._snapshot
        current = next((i.state for i in snapshot.issues if i.issue_id == issue), None)
        body = Text("Move ", end="")
        body.append_text(inert(self._ident(issue), "bold"))
        if current:
            body.append(" (now ")
            body.append_text(inert(current, limit=40))
            body.append(")")
        body.append(" to tracker state:")

        known = {s.casefold(): s for s in snapshot.tracker_states}

        def entered(state: str | None) -> None:
            if not state:
                return
            if state.casefold() in known:
                state = known[state.casefold()]  # the tracker's spelling: "todo" -> "Todo"
            if state == current:
                self.notify(f"{self._ident(issue)} is already in {one_line(state, 40)}")
                return
            move = MoveIssue(issue_id=issue, state=state)
            if not known or state in known.values():
                self.send(move)
                return
            # A typo, or a state outside the workflow: the scheduler would stop tracking
            # the issue and it would leave this list, with no row left to move it back.
            warning = Text("", end="")
            warning.append_text(inert(state, "bold", limit=40))
            warning.append(" is not one of this workflow's active or terminal states. ")
            warning.append_text(inert(self._ident(issue), "bold"))
            warning.append(" will leave the scheduler's issue list (the tracker keeps it).")
            self.confirm_then("Move issue", warning, move, "Move anyway")

        if snapshot.tracker_states:
            choices = [
                (state, "current" if state == current else None)
                for state in dict.fromkeys(snapshot.tracker_states)
            ]
            dialog = Choose(
                "Move issue", body, choices, allow_text=True, text_placeholder="or type a state"
            )
            self.push_screen(dialog, entered)
            return
        states = sorted({i.state for i in snapshot.issues})
        if states:
            body.append(f"\nknown: {one_line(', '.join(states), 200)}", style="dim")
        self.push_screen(
            AskText("Move issue", body, placeholder="state", suggestions=states), entered
        )

    def action_refresh(self) -> None:
        self.send(Refresh())

    def action_toggle_pause(self) -> None:
        paused = bool(self._snapshot and self._snapshot.dispatch_paused)
        self.send(PauseDispatch(paused=not paused))

    def action_show_approvals(self) -> None:
        if not isinstance(self.screen, ApprovalsScreen):
            self.push_screen(ApprovalsScreen())
            self.call_after_refresh(self.tick)

    def action_show_recovered(self) -> None:
        if not isinstance(self.screen, RecoveredScreen):
            self.push_screen(RecoveredScreen())
            self.call_after_refresh(self.tick)

    def open_worker(self, issue_id: str) -> None:
        """Push the worker detail screen of ``issue_id``."""
        self.push_screen(WorkerScreen(issue_id))
        self.call_after_refresh(self.tick)

    # -- what screens ask (console.messages) ----------------------------------------------

    def on_send_command(self, message: SendCommand) -> None:
        self.send(message.command)

    def on_confirm_command(self, message: ConfirmCommand) -> None:
        self.confirm_then(message.title, message.body, message.command, message.yes)

    def on_open_worker(self, message: OpenWorker) -> None:
        self.open_worker(message.issue_id)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_for))

    async def action_quit(self) -> None:
        if self._stopping:
            await self.shutdown_and_exit(1)
            return
        running = self._snapshot.running if self._snapshot else ()
        message = "detached; the scheduler keeps running" if self.detach_only else None
        if not running:
            await self.shutdown_and_exit(0, message)
            return
        if self.detach_only:
            # an attached console only detaches: the scheduler and its workers go on
            body = Text(
                f"Detach from the scheduler? Its {len(running)} worker(s) keep running "
                "there; attach again any time.",
                end="",
            )
            title, yes, danger = "Detach", "Detach", False
        else:
            body = Text(f"{len(running)} worker(s) running. Quit and stop them?", end="")
            title, yes, danger = "Quit", "Quit", True

        def decided(ok: bool | None) -> None:
            if ok:
                self.run_worker(
                    self.shutdown_and_exit(0, message), group="lifecycle", exit_on_error=False
                )

        self.push_screen(Confirm(title, body, yes=yes, danger=danger), decided)
