"""The operator's tools: the diff and audit screens, into the workspace (a shell or
``$EDITOR`` there, copying ids, the path or a command) and exporting the event log or a
transcript to a file.

A shell or an editor runs with the console suspended (``App.suspend``) in its own process
group, given the terminal's foreground (so ``ctrl+c`` there never reaches the console or
the scheduler, which keep running on the event loop meanwhile), and the console comes back
when it exits. An attached console (``detach_only``) does not offer them: the workspace is
on the scheduler's machine. Each action is audited (``SchedulerPort.note_action``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import SuspendNotSupported, SystemCommand

from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.screens.modals import AskText, Choose
from symphony_tui.console.widgets.event_log import EventLogView

if TYPE_CHECKING:
    from collections.abc import Iterable

    from textual.screen import Screen

    from symphony_tui.domain import AgentEvent

EXPORT_LIMIT = 10_000  # events asked of the scheduler (what its ring still holds)


def _tty_fd() -> int | None:
    stream = sys.__stdin__
    try:
        return stream.fileno() if stream is not None and stream.isatty() else None
    except (OSError, ValueError):
        return None


def _foreground_child(fd: int | None) -> Callable[[], None]:
    """The child's set-up before exec: its own process group, given the terminal."""

    def setup() -> None:
        os.setpgid(0, 0)
        if fd is not None:
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            with contextlib.suppress(OSError):
                os.tcsetpgrp(fd, os.getpid())
            signal.signal(signal.SIGTTOU, signal.SIG_DFL)

    return setup


async def run_in_terminal(argv: Sequence[str], cwd: str, suspend) -> tuple[bool, str]:
    """Run ``argv`` in ``cwd`` on the terminal, inside ``suspend()`` (``App.suspend``);
    ``(ok, what happened)``. The event loop keeps running while it does."""
    fd = _tty_fd()
    try:
        with suspend():
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=cwd, preexec_fn=_foreground_child(fd)
                )
            except OSError as exc:
                return False, f"cannot start {argv[0]}: {exc.strerror or exc}"
            try:
                code = await proc.wait()
            finally:
                if fd is not None:  # the terminal back to the console's process group
                    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
                    with contextlib.suppress(OSError):
                        os.tcsetpgrp(fd, os.getpgrp())
                    signal.signal(signal.SIGTTOU, previous)
    except SuspendNotSupported:
        return False, "this terminal cannot hand itself to another program"
    return code == 0, f"{Path(argv[0]).name} exited with {code}"


def export_lines(events: list[AgentEvent], path: Path) -> str:
    """The text of an export: JSON lines (every field, as the API serves them) for
    ``.jsonl`` / ``.json``; else one line an event, ``time issue kind message``, with the
    message made inert (no escape sequences reach whoever reads the file later)."""
    if path.suffix in (".jsonl", ".json"):
        return "".join(e.model_dump_json() + "\n" for e in events)
    out = []
    for e in events:
        at = e.at.isoformat(timespec="seconds") if e.at else "-"
        ident = one_line(e.issue_identifier or e.issue_id or "-", 40)
        out.append(f"{at} {ident} {e.kind.value} {one_line(e.message)}\n")
    return "".join(out)


class ToolsMixin:
    """Diff, audit, into the workspace, export. A mixin of
    :class:`~symphony_tui.console.app.SymphonyApp`; it never imports the app.

    ``launch``: how a shell or an editor runs (default :func:`run_in_terminal`; tests
    replace it)."""

    #: True while a shell or an editor has the terminal (:meth:`handed_over`).
    terminal_handed_over = False

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

    launch = staticmethod(run_in_terminal)

    # -- what is selected ------------------------------------------------------------------
    def _workspace(self) -> tuple[str, str | None, str] | None:
        """``(issue_id, identifier, path)`` of the selected issue's workspace."""
        issue = self._selected_issue()
        if issue is None or self._snapshot is None:
            return None
        from symphony_tui.scheduler.workspace_view import locate  # after the first snapshot

        found = locate(self._snapshot, issue)
        return (found[0], found[1], found[2]) if found else None

    def _workspace_host(self) -> str | None:
        issue = self._selected_issue()
        if not issue or self._snapshot is None:
            return None
        from symphony_tui.scheduler.workspace_view import locate

        found = locate(self._snapshot, issue)
        return found[4] if found else None

    def _audit(self, what: str, **fields) -> None:
        async def note() -> None:
            with contextlib.suppress(Exception):  # auditing must never break the action
                await self.port.note_action(what, **fields)

        self.run_worker(note(), group="audit-notes", exit_on_error=False)

    # -- screens ---------------------------------------------------------------------------
    def action_show_diff(self) -> None:
        found = self._workspace()
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

    # -- into the workspace ----------------------------------------------------------------
    def workspace_choices(self) -> tuple[list[tuple[str, str, str | None]], list[str]]:
        """``([(action, label, detail)], [why something is not offered])`` for the
        selected workspace (see :meth:`action_workspace`)."""
        found = self._workspace()
        if found is None:
            return [], ["no workspace for the selection"]
        issue_id, identifier, path = found
        offered: list[tuple[str, str, str | None]] = []
        missing: list[str] = []
        remote_host = self._workspace_host()
        if remote_host is not None:
            missing.append(
                f"shell and editor: the workspace is on worker host {remote_host} "
                "(copy the command and run it here)"
            )
        elif self.detach_only:
            missing.append(
                "shell and editor: this console is attached; the workspace is on the "
                "scheduler's machine (copy the command and run it there)"
            )
        elif not Path(path).is_dir():
            missing.append(f"shell and editor: {path} is not a folder on this machine")
        else:
            offered.append(("shell", "Open a shell there", os.environ.get("SHELL") or "/bin/sh"))
            editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
            if editor:
                offered.append(("editor", "Open it in the editor", editor))
            else:
                missing.append("editor: set $EDITOR (or $VISUAL)")
        offered.append(("copy:path", "Copy the workspace path", path))
        offered.append(("copy:identifier", "Copy the issue identifier", identifier or issue_id))
        session = self._session_of(issue_id)
        if session:
            offered.append(("copy:session", "Copy the thread / session id", session))
        command = f"cd {shlex.quote(path)}"
        if remote_host is not None:
            command = (
                f"ssh -t {shlex.quote(remote_host)} {shlex.quote(command + ' && exec $SHELL')}"
            )
        offered.append(("copy:command", "Copy a shell command", command))
        return offered, missing

    def _session_of(self, issue_id: str) -> str | None:
        snap = self._snapshot
        if snap is None:
            return None
        for row in snap.running:
            if row.issue_id == issue_id:
                return row.thread_id or row.session_id
        for ws in snap.recovered:
            if ws.issue_id == issue_id:
                return ws.thread_id or ws.conversation_id or ws.session_id
        return None

    def action_workspace(self) -> None:
        offered, missing = self.workspace_choices()
        found = self._workspace()
        if found is None:
            self.notify("no workspace for the selection", severity="warning")
            return
        body = Text("Workspace of ", end="")
        body.append_text(inert(found[1] or found[0], "bold"))
        body.append("\n")
        body.append_text(inert(found[2], "dim", limit=120))
        for why in missing:
            body.append("\nnot offered: ", style="dim")
            body.append_text(inert(why, "dim", limit=160))
        labels = {label: (action, detail) for action, label, detail in offered}

        def chosen(label: str | None) -> None:
            if label in labels:
                action, detail = labels[label]
                self.workspace_action(action, found, detail)

        choices = [(label, detail) for _, label, detail in offered]
        self.push_screen(Choose("Into the workspace", body, choices), chosen)

    def workspace_action(
        self, action: str, found: tuple[str, str | None, str], detail: str | None
    ) -> None:
        issue_id, identifier, path = found
        who = identifier or issue_id
        if action.startswith("copy:"):
            self.copy_to_clipboard(detail or "")
            self.notify(one_line(f"copied {detail}", 200), markup=False)
            self._audit("copy", issue=who, detail=action.removeprefix("copy:"))
            return
        if action == "shell":
            argv = [detail or "/bin/sh"]
        else:
            try:
                argv = [*shlex.split(detail or ""), path]
            except ValueError as exc:
                self.notify(f"$EDITOR: {exc}", severity="error", markup=False)
                return
        self.run_worker(
            self._run_there(action, argv, path, who), group="workspace", exit_on_error=False
        )

    async def _run_there(self, action: str, argv: list[str], path: str, who: str) -> None:
        ok, message = await type(self).launch(argv, path, self.handed_over)
        self.notify(one_line(message, 200), severity="information" if ok else "warning",
                    markup=False)  # fmt: skip
        self._audit(action, issue=who, detail=path, ok=ok, message=message)

    # -- export -----------------------------------------------------------------------------
    def _export_source(self) -> tuple[str, list[AgentEvent]] | None:
        """``(what, events)``: the filtered event log on the main screen, the worker's
        transcript on its screen."""
        screen = self.screen
        if getattr(screen, "CONSOLE_SCOPE", None) == "worker":  # a WorkerScreen
            events = self.port.events_since(0, limit=EXPORT_LIMIT, issue_id=screen.issue_id)
            return f"transcript of {self._ident(screen.issue_id)}", events
        logs = screen.query(EventLogView)
        if not logs:
            return None
        log_filter = logs.first().filter
        events = self.port.events_since(0, limit=EXPORT_LIMIT, issue_id=log_filter.issue_id)
        what = "event log" + (" (filtered)" if log_filter.text else "")
        return what, [e for e in events if log_filter.accepts(e)]

    def action_export(self) -> None:
        source = self._export_source()
        if source is None:
            return
        what, events = source
        stamp = self.clock().strftime("%Y%m%d-%H%M%S")
        kind = "transcript" if what.startswith("transcript") else "events"
        default = str(Path.cwd() / f"symphony-{kind}-{stamp}.txt")
        body = Text(f"Write the {what} ({len(events)} events) to a file ", end="")
        body.append("(.jsonl: every field; otherwise the lines as shown)", style="dim")

        def entered(name: str) -> None:
            target = Path(name).expanduser()
            if target.is_dir():  # a folder: the file gets the default name there
                target = target / Path(default).name
            self.export_to(target, what, events)

        dialog = AskText("Export", body, placeholder=default, allow_empty=True)
        self.push_screen(
            dialog, lambda name: entered(name or default) if name is not None else None
        )

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's palette commands, less its Quit (the console's own ``Quit`` asks first
        while workers run) and with a Screenshot that saves where ``paths`` says."""
        for command in super().get_system_commands(screen):  # type: ignore[misc]  # a mixin: the App's
            if command.title == "Quit":
                continue
            if command.title == "Screenshot":
                from symphony_tui.paths import screenshots_dir

                help_ = f"Save an SVG picture of the screen in {screenshots_dir()}"
                # After the palette has closed, so the picture shows the screen under it.
                later = lambda: self.set_timer(0.1, self.save_screenshot_svg)  # noqa: E731
                yield SystemCommand("Screenshot", help_, later)
                continue
            yield command

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        self.save_screenshot_svg(Path(path) if path else None, filename)

    def save_screenshot_svg(self, folder: Path | None = None, name: str | None = None) -> bool:
        """Save the screen as SVG in ``folder`` (default ``paths.screenshots_dir()``, made
        when missing) under ``name`` (default ``symphony-<time>.svg``), never overwriting a
        file; say where, or why it could not."""
        from symphony_tui.paths import screenshots_dir

        folder = folder or screenshots_dir()
        name = name or f"symphony-{self.clock().strftime('%Y%m%d-%H%M%S-%f')}.svg"
        path = folder / name
        try:
            svg = self.export_screenshot()
            folder.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as f:
                f.write(svg)
        except OSError as exc:
            where = exc.filename or path
            message = f"screenshot not saved: {where}: {exc.strerror or exc}"
            self.notify(one_line(message, 300), severity="error", markup=False)
            return False
        self.notify(one_line(f"screenshot saved: {path}", 300), markup=False)
        return True

    def export_to(self, path: Path, what: str, events: list[AgentEvent]) -> bool:
        """Write ``events`` to ``path`` (refusing to overwrite); notify and audit."""
        try:
            with path.open("x", encoding="utf-8") as f:
                f.write(export_lines(events, path))
        except OSError as exc:
            message = f"export: {path}: {exc.strerror or exc}"
            self.notify(one_line(message, 300), severity="error", markup=False)
            self._audit("export", detail=str(path), ok=False, message=message)
            return False
        message = f"wrote {len(events)} events of the {what} to {path}"
        self.notify(one_line(message, 300), markup=False)
        self._audit("export", detail=str(path), message=f"{len(events)} events, {what}")
        return True
