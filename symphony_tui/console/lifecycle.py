"""The console's lifecycle: building and running the scheduler, quitting, detaching.

SIGTERM and SIGINT stop the workers once, then exit. SIGHUP and a terminal that went away
(``console/signals.py``) never stop agents: a console whose scheduler can outlive it
(``detachable``, the CLI's ``symphony-tui WORKFLOW.md``) leaves it running headless, and
an attached one only detaches. ``q`` asks: stop the running agents, or leave them running
and detach (docs/architecture.md "Detaching"); an attached console stops them by sending
the scheduler a ``stop_scheduler`` command. Once an attached console's scheduler has
stopped (``RemotePort.stopped``), ``q`` just quits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual.worker import Worker, WorkerState

from symphony_tui.console.sanitize import one_line
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.starting import ATTACHED, Started, StartFailed, notify_of
from symphony_tui.console.widgets.status import GONE_AGENTS

if TYPE_CHECKING:
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.console.ui import Ui


class Lifecycle:
    """The scheduler's start, run and shutdown as the console drives them, and how the
    console leaves (exit code, ``detached``, ``start_error``).

    ``start`` builds the scheduler (``console.starting``), or ``runner`` is its main
    coroutine (run in the worker group ``scheduler``); ``shutdown`` is awaited once before
    exit. ``state``'s port, ``detach_only`` and ``stopping`` are written here; dialogs,
    workers and the exit go through ``ui``; ``repaint`` shows what changed at once (the
    app's refresh tick).
    """

    def __init__(
        self,
        state: ConsoleState,
        ui: Ui,
        *,
        start: Callable[[], Awaitable[Started]] | None,
        runner: Callable[[], Awaitable[None]] | None,
        shutdown: Callable[[], Awaitable[None]] | None,
        detachable: bool,
        repaint: Callable[[], None],
    ) -> None:
        self._state = state
        self._ui = ui
        self._start_fn = start
        self._runner_fn = runner
        self._shutdown_fn = shutdown
        self._repaint = repaint
        self._start_worker: Worker | None = None
        self._asked_stop = False  # an attached console sent stop_scheduler
        self._moved_said: str | None = None  # the last re-attach a toast said (link.moved)
        #: The scheduler this console embeds can outlive it (``cli`` runs it so): a lost
        #: terminal detaches, and ``q`` asks stop or detach.
        self.detachable = detachable
        #: Why the console left its scheduler running (None: it did not).
        self.detached: str | None = None
        #: The one-line reason the scheduler could not be built (exit 1).
        self.start_error: str | None = None
        #: The scheduler's main coroutine returned while the console was not quitting.
        self.scheduler_stopped = False
        #: What made this console stop its scheduler: ``q``, a stop signal's name
        #: (``SIGTERM``, ``SIGINT``) or ``terminal lost: <why>``; None until then.
        self.stop_cause: str | None = None

    @property
    def attached_scheduler_stopped(self) -> bool:
        """An attached console whose scheduler has shut down (``RemotePort.stopped``)."""
        return self._state.port.stopped

    # -- start and run ----------------------------------------------------------------

    @property
    def builds(self) -> bool:
        """The scheduler is built here (``start``): :meth:`begin_start` once the first
        frame is painted."""
        return self._start_fn is not None

    def run(self) -> None:
        """Run the scheduler given (``runner``), if any."""
        if self._runner_fn is not None:
            self._start_runner()

    def begin_start(self) -> None:
        """Build the scheduler (``start``, docs/architecture.md "Start-up"): called once
        the first frame is painted. Keys pressed meanwhile meet ``StartingPort``."""
        if self._state.stopping or self._start_worker is not None or self._start_fn is None:
            return
        self._start_worker = self._ui.run_worker(
            self._start_scheduler(), name="start", group="start", exit_on_error=False
        )

    async def _start_scheduler(self) -> None:
        """Await ``start``; adopt what it built (port, runner, shutdown, notices) and run
        the scheduler, or leave with its one-line reason (``start_error``, exit 1). A quit
        while it builds is finished by :meth:`shutdown_and_exit`, which waits for this."""
        assert self._start_fn is not None
        state = self._state
        try:
            started = await self._start_fn()
        except StartFailed as exc:
            self.start_error = one_line(str(exc), 2000)
            state.stopping = True
            self._ui.exit(return_code=1)
            return
        state.port = started.port
        self._runner_fn = started.runner
        self._shutdown_fn = started.shutdown
        state.notify = started.notify if started.notify is not None else notify_of(state.port)
        state.detach_only = state.port.detach_only
        if state.stopping:
            return  # quit while starting: shutdown_and_exit shuts it down
        for title, text in started.messages:
            key = ATTACHED if title == ATTACHED else None  # a re-attach's toast replaces it
            self._ui.notify(text, title=title, timeout=60, markup=False, key=key)
        for notice in started.notices:
            self._ui.notify(notice, title="WORKFLOW.md", severity="warning", markup=False)
        if self._runner_fn is not None:
            self._start_runner()
        self._repaint()

    def link_read(self, link) -> None:
        """``link`` as the refresh read it (None: a scheduler in this process). An attached
        console that followed its scheduler to a new process (``link.moved``, as
        ``FollowingPort.link`` says) says so once, in place of the toast that named the
        process it was attached to before (the start's, or the last re-attach's)."""
        moved = getattr(link, "moved", None)
        if not moved or moved == self._moved_said:
            return
        self._moved_said = moved
        self._ui.notify(
            f"the scheduler was started again; {one_line(moved, 200)}",
            title=ATTACHED,
            timeout=60,
            markup=False,
            key=ATTACHED,
        )

    def _start_runner(self) -> None:
        self._ui.run_worker(
            self._run_scheduler(), name="scheduler", group="scheduler", exit_on_error=False
        )

    async def _run_scheduler(self) -> None:
        assert self._runner_fn is not None
        await self._runner_fn()

    def worker_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker outcomes are routed (harlequin style): a failed scheduler
        (or its build) ends the console with exit 1; another failed worker is a
        notification; a scheduler that returned on its own is said once."""
        worker = event.worker
        if event.state == WorkerState.ERROR:
            error = worker.error
            text = one_line(f"{type(error).__name__}: {error}", 300)
            if worker.group in ("scheduler", "start"):
                self._in_worker(self.shutdown_and_exit(1, f"scheduler failed: {text}"))
            else:
                self._ui.notify(
                    text, title=f"{worker.group} failed", severity="error", markup=False
                )
        elif (
            event.state == WorkerState.SUCCESS
            and worker.group == "scheduler"
            and not self._state.stopping
        ):
            self.scheduler_stopped = True
            # On whatever screen is open (the main screen's alert line also says when).
            link = self._state.port.link()
            why = link.error if link is not None else None
            said = "the scheduler stopped"
            if link is not None and getattr(link, "gone", False):
                said = "the scheduler is gone; its agents may still run"
            self._ui.notify(
                f"{said}: {one_line(why, 160)}" if why else said,
                severity="warning",
                timeout=30,
            )
            self._repaint()

    # -- leaving ------------------------------------------------------------------------

    def _in_worker(self, leaving: Awaitable[None]) -> None:
        self._ui.run_worker(leaving, group="lifecycle", exit_on_error=False)

    async def shutdown_and_exit(self, return_code: int = 0, message: str | None = None) -> None:
        """Await ``shutdown`` once, then exit. A second call while stopping forces the
        exit (a hung shutdown must not trap the operator)."""
        state = self._state
        if state.stopping:
            self._ui.exit(return_code=1, message="forced quit while stopping workers")
            return
        state.stopping = True
        building = self._start_worker
        if building is not None and not building.is_finished:
            self._ui.notify("stopping…", timeout=30)
            with contextlib.suppress(Exception):
                await building.wait()  # then its scheduler (if built) is shut down below
        if self.start_error is not None:
            return  # the start failed and already exited with its reason
        if self._shutdown_fn is not None:
            if not self.attached_scheduler_stopped:
                self._ui.notify(
                    "detaching…" if state.detach_only else "stopping workers…", timeout=30
                )
            try:
                await self._shutdown_fn()
            except Exception as exc:
                return_code = 1
                message = f"shutdown failed: {one_line(exc, 200)}"
        self._ui.exit(return_code=return_code, message=message)

    def stop_signal(self, reason: str, signal_name: str | None = None) -> None:
        """SIGTERM / SIGINT (``signal_name``): the quit path without asking. A second
        signal while the workers stop forces the exit, as a second ``q`` does."""
        if not self._state.stopping:
            self.stop_cause = signal_name or reason
        done = "detached" if self._state.detach_only else "workers stopped"
        self._in_worker(self.shutdown_and_exit(0, f"{reason}: {done}"))

    def terminal_lost(self, reason: str) -> None:
        """The operator's terminal is gone (SIGHUP, hung-up tty, dead parent): exit 0 and
        never spin. A detachable console leaves its scheduler running (the agents go on);
        an attached one detaches; only a console that cannot detach stops its workers."""
        state = self._state
        if state.stopping:
            return
        if self.detachable and not state.detach_only and not state.starting:
            self.detach_and_exit(reason)
            return
        done = "detached" if state.detach_only else "workers stopped"
        self.stop_cause = self.stop_cause or f"terminal lost: {reason}"
        self._in_worker(self.shutdown_and_exit(0, f"{reason}: {done}"))

    def detach_and_exit(self, reason: str) -> None:
        """Leave the embedded scheduler running and exit 0 (``detached`` says why); the
        CLI carries the scheduler on headless once the app is gone."""
        if self._state.stopping:
            return
        self._state.stopping = True
        self.detached = reason
        self._ui.exit(return_code=0)

    async def quit(self, running: int) -> None:
        """``q`` with ``running`` workers: leave at once when nothing runs (or the attached
        scheduler has stopped), else ask (quit and stop them, detach, or stop or detach);
        a second ``q`` while stopping forces the exit."""
        state = self._state
        if state.stopping:
            await self.shutdown_and_exit(1)
            return
        if self.attached_scheduler_stopped:  # nothing to stop or detach from: just leave
            link = state.port.link()
            if link is not None and getattr(link, "gone", False):
                await self.shutdown_and_exit(0, f"the scheduler was gone; {GONE_AGENTS}")
            else:
                await self.shutdown_and_exit(0, "the scheduler had stopped")
            return
        message = self._detached_line() if state.detach_only else None
        if state.starting:  # nothing runs yet; the build is awaited off the key handler
            self._in_worker(self._stop_by_q(message))
            return
        if not running:
            await self._stop_by_q(message)
            return
        if self.detachable and not state.detach_only:
            self._ask_stop_or_detach(running)
            return
        if state.detach_only and state.port.carries_stop:
            self._ask_stop_or_detach(running, attached=True)
            return
        detach_only = state.detach_only

        def body_for(count: int) -> Text:
            if detach_only and self._is_fleet():
                # a fleet: every project's scheduler and its workers go on
                return Text(
                    f"Detach from the fleet? Its schedulers and their {count} worker(s) "
                    "keep running; open the fleet again any time.",
                    end="",
                )
            if detach_only:
                # a port that cannot carry a stop: the scheduler and its workers go on
                return Text(
                    f"Detach from the scheduler? Its {count} worker(s) keep running "
                    "there; attach again any time.",
                    end="",
                )
            return Text(f"{count} worker(s) running. Quit and stop them?", end="")

        body = body_for(running)
        title, yes, danger = ("Detach", "Detach", False) if detach_only else ("Quit", "Quit", True)

        def decided(ok: bool | None) -> None:
            if ok:
                self._in_worker(self._stop_by_q(message))

        self._ui.push_screen(
            Confirm(
                title,
                body,
                yes=yes,
                danger=danger,
                # a fleet console's every project, whatever its project filter shows
                body_of=lambda snapshot: body_for(
                    len((self._state.fleet_snapshot or snapshot).running)
                ),
            ),
            decided,
        )

    def _is_fleet(self) -> bool:
        from symphony_tui.console.fleet import is_fleet

        return is_fleet(self._state.fleet_snapshot)

    def _detached_line(self) -> str:
        """What the terminal says after a detach: one scheduler, or a fleet's several."""
        if self._is_fleet():
            return "detached; the schedulers keep running"
        return "detached; the scheduler keeps running"

    def _ask_stop_or_detach(self, count: int, *, attached: bool = False) -> None:
        """``q`` with agents running under a scheduler that can outlive the console (the
        embedded one, or the one ``attached`` to): stop them (``s``), or leave them running
        and detach (``d``)."""
        from symphony_tui.console.screens.modals import StopOrDetach

        def decided(answer: str | None) -> None:
            if answer == "stop" and attached:
                self._in_worker(self.stop_scheduler_and_exit())
            elif answer == "stop":
                self._in_worker(self._stop_by_q(None))
            elif answer == "detach" and attached:
                self._in_worker(self.shutdown_and_exit(0, self._detached_line()))
            elif answer == "detach":
                self.detach_and_exit("q")

        self._ui.push_screen(StopOrDetach(count, attached=attached), decided)

    async def _stop_by_q(self, message: str | None) -> None:
        """``q`` stops (or, attached, leaves) the scheduler: :attr:`stop_cause` ``q``."""
        if not self._state.stopping:
            self.stop_cause = "q"
        await self.shutdown_and_exit(0, message)

    async def stop_scheduler_and_exit(self) -> None:
        """Attached: send the scheduler ``stop_scheduler`` (it needs the control token, and
        the scheduler's audit log names this operator), wait until it has stopped (its
        stream's last frame; on this machine, its process gone), then exit saying so. A
        refusal is one line and the console stays. ``q`` meanwhile just quits."""
        from symphony_tui.domain.commands import StopScheduler

        state = self._state
        if state.stopping or self._asked_stop:
            return
        self._asked_stop = True
        result = await state.port.send(StopScheduler())
        if not result.ok:
            self._asked_stop = False
            self._ui.notify(
                one_line(f"stop refused: {result.message}", 300), severity="error", markup=False
            )
            return
        self._ui.notify(one_line(result.message, 300) + "…", timeout=120, markup=False)
        ended = await state.port.wait_stopped()
        if state.stopping:
            return  # q while it stopped
        done = (
            "the scheduler stopped; its agents have ended"
            if ended
            else "the scheduler is stopping: its agents end with their hooks' grace"
        )
        await self.shutdown_and_exit(0, done)
