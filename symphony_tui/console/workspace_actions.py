"""Into the selected workspace: a shell or ``$EDITOR`` there, copying ids, the path or a
command to reach it.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import SuspendNotSupported

from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.screens.modals import Choose

if TYPE_CHECKING:
    from symphony_tui.console.actions import CommandSender
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.console.ui import Ui

#: ``(issue_id, identifier, path)`` of a workspace
Found = tuple[str, str | None, str]


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


class WorkspaceActions:
    """The workspace of the selected issue (``issue``: an issue id, ``None`` when nothing is
    selected), found in ``state``'s snapshot; dialogs and programs through ``ui`` (a
    program runs with ``ui.launch`` inside ``ui.handed_over``); audited through
    ``sender``."""

    def __init__(self, state: ConsoleState, ui: Ui, sender: CommandSender) -> None:
        self._state = state
        self._ui = ui
        self._sender = sender

    def choices(self, issue: str | None) -> tuple[list[tuple[str, str, str | None]], list[str]]:
        """``([(action, label, detail)], [why something is not offered])`` for the
        workspace of ``issue`` (see :meth:`open`)."""
        found = self._state.workspace_of(issue)
        if found is None:
            return [], ["no workspace for the selection"]
        issue_id, identifier, path, remote_host = found
        offered: list[tuple[str, str, str | None]] = []
        missing: list[str] = []
        if remote_host is not None:
            missing.append(
                f"shell and editor: the workspace is on worker host {remote_host} "
                "(copy the command and run it here)"
            )
        elif self._state.detach_only:
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
        session = self._state.session_of(issue_id)
        if session:
            offered.append(("copy:session", "Copy the thread / session id", session))
        command = f"cd {shlex.quote(path)}"
        if remote_host is not None:
            command = (
                f"ssh -t {shlex.quote(remote_host)} {shlex.quote(command + ' && exec $SHELL')}"
            )
        offered.append(("copy:command", "Copy a shell command", command))
        return offered, missing

    def open(self, issue: str | None) -> None:
        """The "Into the workspace" dialog: what :meth:`choices` offers, and why the rest
        is not; the chosen one runs (:meth:`run`)."""
        offered, missing = self.choices(issue)
        found = self._state.workspace_of(issue)
        if found is None:
            self._ui.notify("no workspace for the selection", severity="warning")
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
                self.run(action, (found[0], found[1], found[2]), detail)

        choices = [(label, detail) for _, label, detail in offered]
        self._ui.push_screen(Choose("Into the workspace", body, choices), chosen)

    def run(self, action: str, found: Found, detail: str | None) -> None:
        """Run one of :meth:`choices`' ``action`` on workspace ``found``: copy ``detail``,
        or run the shell / editor ``detail`` there (in a worker of group ``workspace``)."""
        issue_id, identifier, path = found
        who = identifier or issue_id
        if action.startswith("copy:"):
            self._ui.copy_to_clipboard(detail or "")
            self._ui.notify(one_line(f"copied {detail}", 200), markup=False)
            self._sender.note("copy", issue=who, detail=action.removeprefix("copy:"))
            return
        if action == "shell":
            argv = [detail or "/bin/sh"]
        else:
            try:
                argv = [*shlex.split(detail or ""), path]
            except ValueError as exc:
                self._ui.notify(f"$EDITOR: {exc}", severity="error", markup=False)
                return
        self._ui.run_worker(
            self._run_there(action, argv, path, who), group="workspace", exit_on_error=False
        )

    async def _run_there(self, action: str, argv: list[str], path: str, who: str) -> None:
        ok, message = await self._ui.launch(argv, path, self._ui.handed_over)
        self._ui.notify(one_line(message, 200), severity="information" if ok else "warning",
                        markup=False)  # fmt: skip
        self._sender.note(action, issue=who, detail=path, ok=ok, message=message)
