"""The console's lifecycle: signals, a lost terminal, the scheduler worker, quitting.

SIGTERM and SIGINT stop the workers once, then exit. SIGHUP and a terminal that went away
never stop agents: a console whose scheduler can outlive it (``detachable``, the CLI's
``symphony-tui WORKFLOW.md``) leaves it running headless, and an attached one only detaches.
``q`` asks: stop the running agents, or leave them running and detach
(docs/architecture.md "Detaching"); an attached console stops them by sending the
scheduler a ``stop_scheduler`` command. Once an attached console's scheduler has stopped
(``RemotePort.stopped``), ``q`` just quits.
"""

from __future__ import annotations

import contextlib
import signal

from rich.text import Text
from textual.worker import Worker, WorkerState

from symphony_tui.console.sanitize import one_line
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.starting import StartFailed, notify_of
from symphony_tui.console.terminal_watch import Forgiving, TerminalWatch

TERMINAL_CHECK_S = 1.0


class LifecycleMixin:
    """Signals, the terminal watch, the scheduler worker's outcome and ``q``.

    A mixin of :class:`~symphony_tui.console.app.SymphonyApp` (it uses the App's API and
    the attributes set in ``SymphonyApp.__init__``); it never imports the app."""

    def on_unmount(self) -> None:
        if self.detached is not None:
            # the process goes on as a headless scheduler: a SIGHUP arriving before it
            # installs its own handlers must still find one (this one does nothing now)
            return
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
        """SIGHUP (a dropped SSH session) is a lost terminal (:meth:`terminal_lost`);
        SIGTERM (``kill``, ``symphony-tui stop``, a service manager) and SIGINT (``kill
        -INT``; ctrl+c is a key in raw mode) stop the workers and leave with exit 0, the
        terminal restored (main screen, mouse off, cursor shown)."""
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
        loop (and the shutdown of the workers) forever. The exit message and last lines
        on stderr go nowhere instead of failing with EIO (a traceback, exit 1)."""
        writer = getattr(self._driver, "_writer_thread", None)
        if writer is not None:
            writer.write = lambda text: None
            writer.stop = lambda: None
        self.error_console.file = Forgiving()

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
        """The operator's terminal is gone (SIGHUP, hung-up tty, dead parent): exit 0 and
        never spin. A detachable console leaves its scheduler running (the agents go on);
        an attached one detaches; only a console that cannot detach stops its workers."""
        if self._stopping:
            return
        self._mute_terminal()
        if self.detachable and not self.detach_only and not self.starting:
            self.detach_and_exit(reason)
            return
        done = "detached" if self.detach_only else "workers stopped"
        self.run_worker(
            self.shutdown_and_exit(0, f"{reason}: {done}"),
            group="lifecycle",
            exit_on_error=False,
        )

    def detach_and_exit(self, reason: str) -> None:
        """Leave the embedded scheduler running and exit 0 (``detached`` says why); the
        CLI carries the scheduler on headless once the app is gone."""
        if self._stopping:
            return
        self._stopping = True
        self.detached = reason
        self.exit(return_code=0)

    def _begin_start(self) -> None:
        """Build the scheduler (``start``, docs/architecture.md "Start-up"): called once
        the first frame is painted. Keys pressed meanwhile meet :class:`StartingPort`."""
        if self._stopping or self._start_worker is not None:
            return
        self._start_worker = self.run_worker(
            self._start_scheduler(), name="start", group="start", exit_on_error=False
        )

    async def _start_scheduler(self) -> None:
        """Await ``start``; adopt what it built (port, runner, shutdown, notices) and run
        the scheduler, or leave with its one-line reason (``start_error``, exit 1). A quit
        while it builds is finished by :meth:`shutdown_and_exit`, which waits for this."""
        assert self._start_fn is not None
        try:
            started = await self._start_fn()
        except StartFailed as exc:
            self.start_error = one_line(str(exc), 2000)
            self._stopping = True
            self.exit(return_code=1)
            return
        self.port = started.port
        self._runner_fn = started.runner
        self._shutdown_fn = started.shutdown
        self._notify = started.notify if started.notify is not None else notify_of(self.port)
        self.detach_only = bool(getattr(self.port, "detach_only", False))
        if self._stopping:
            return  # quit while starting: shutdown_and_exit shuts it down
        for title, text in started.messages:
            self.notify(text, title=title, timeout=60, markup=False)
        for notice in started.notices:
            self.notify(notice, title="WORKFLOW.md", severity="warning", markup=False)
        if self._runner_fn is not None:
            self._start_runner()
        self.tick()

    def _start_runner(self) -> None:
        self.run_worker(
            self._run_scheduler(), name="scheduler", group="scheduler", exit_on_error=False
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
        building = self._start_worker
        if building is not None and not building.is_finished:
            self.notify("stopping…", timeout=30)
            with contextlib.suppress(Exception):
                await building.wait()  # then its scheduler (if built) is shut down below
        if self.start_error is not None:
            return  # the start failed and already exited with its reason
        if self._shutdown_fn is not None:
            if not self.attached_scheduler_stopped:
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
            if worker.group in ("scheduler", "start"):
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
            if not self.attached_scheduler_stopped:  # attached: the alert line says when
                self.notify("the scheduler stopped", severity="warning", timeout=30)
            self.tick()

    @property
    def attached_scheduler_stopped(self) -> bool:
        """An attached console whose scheduler has shut down (``RemotePort.stopped``)."""
        return bool(getattr(self.port, "stopped", False))

    async def action_quit(self) -> None:
        if self._stopping:
            await self.shutdown_and_exit(1)
            return
        if self.attached_scheduler_stopped:  # nothing runs there any more: just leave
            await self.shutdown_and_exit(0, "the scheduler had stopped")
            return
        running = self._snapshot.running if self._snapshot else ()
        message = "detached; the scheduler keeps running" if self.detach_only else None
        if self.starting:  # nothing runs yet; the build is awaited off the key handler
            self.run_worker(
                self.shutdown_and_exit(0, message), group="lifecycle", exit_on_error=False
            )
            return
        if not running:
            await self.shutdown_and_exit(0, message)
            return
        if self.detachable and not self.detach_only:
            self._ask_stop_or_detach(len(running))
            return
        if self.detach_only and hasattr(self.port, "wait_stopped"):
            self._ask_stop_or_detach(len(running), attached=True)
            return
        if self.detach_only:
            # a port that cannot carry a stop: the scheduler and its workers go on
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

    def _ask_stop_or_detach(self, count: int, *, attached: bool = False) -> None:
        """``q`` with agents running under a scheduler that can outlive the console (the
        embedded one, or the one ``attached`` to): stop them (``s``), or leave them running
        and detach (``d``)."""
        from symphony_tui.console.screens.modals import StopOrDetach

        def decided(answer: str | None) -> None:
            if answer == "stop" and attached:
                self.run_worker(
                    self.stop_scheduler_and_exit(), group="lifecycle", exit_on_error=False
                )
            elif answer == "stop":
                self.run_worker(self.shutdown_and_exit(0), group="lifecycle", exit_on_error=False)
            elif answer == "detach" and attached:
                message = "detached; the scheduler keeps running"
                self.run_worker(
                    self.shutdown_and_exit(0, message), group="lifecycle", exit_on_error=False
                )
            elif answer == "detach":
                self.detach_and_exit("q")

        self.push_screen(StopOrDetach(count, attached=attached), decided)

    async def stop_scheduler_and_exit(self) -> None:
        """Attached: send the scheduler ``stop_scheduler`` (it needs the control token, and
        the scheduler's audit log names this operator), wait until it has stopped (its
        stream's last frame; on this machine, its process gone), then exit saying so. A
        refusal is one line and the console stays. ``q`` meanwhile just quits."""
        from symphony_tui.domain.commands import StopScheduler

        if self._stopping or self._asked_stop:
            return
        self._asked_stop = True
        result = await self.port.send(StopScheduler())
        if not result.ok:
            self._asked_stop = False
            self.notify(
                one_line(f"stop refused: {result.message}", 300), severity="error", markup=False
            )
            return
        self.notify(one_line(result.message, 300) + "…", timeout=120, markup=False)
        wait = getattr(self.port, "wait_stopped", None)
        ended = await wait() if wait is not None else False
        if self._stopping:
            return  # q while it stopped
        done = (
            "the scheduler stopped; its agents have ended"
            if ended
            else "the scheduler is stopping: its agents end with their hooks' grace"
        )
        await self.shutdown_and_exit(0, done)
