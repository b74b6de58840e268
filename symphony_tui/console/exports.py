"""Writing what the console shows to a file: the event log (as filtered) or a worker's
transcript (``e``), and a picture of the screen (the palette's Screenshot).

Files are never overwritten; each export is audited (``SchedulerPort.note_action``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from symphony_tui.console.sanitize import one_line
from symphony_tui.console.screens.modals import AskText
from symphony_tui.console.widgets.event_log import EventLogView

if TYPE_CHECKING:
    from textual.screen import Screen

    from symphony_tui.console.actions import CommandSender
    from symphony_tui.console.state import ConsoleState
    from symphony_tui.console.ui import Ui
    from symphony_tui.domain import AgentEvent

EXPORT_LIMIT = 10_000  # events asked of the scheduler (what its ring still holds)


def export_lines(events: list[AgentEvent], path: Path) -> str:
    """The text of an export: JSON lines (every field, as the API serves them) for
    ``.jsonl`` / ``.json``; else one line an event, ``time issue kind message``, with the
    message made inert (no escape sequences reach whoever reads the file later).

    An event of a fleet console (``project`` set) carries its project as the log shows
    it: a ``"project"`` field last in its JSON line, ``time project issue kind message``
    in text (an identifier such as ``#12`` may be several projects')."""
    if path.suffix in (".jsonl", ".json"):
        return "".join(_json_line(e) for e in events)
    out = []
    for e in events:
        at = e.at.isoformat(timespec="seconds") if e.at else "-"
        if e.project is not None:
            at += " " + one_line(e.project, 40)
        ident = one_line(e.issue_identifier or e.issue_id or "-", 40)
        out.append(f"{at} {ident} {e.kind.value} {one_line(e.message)}\n")
    return "".join(out)


def _json_line(event: AgentEvent) -> str:
    """``event`` as the API serves it, one line; with ``"project"`` last when it has one
    (the field is never serialized by the model itself)."""
    line = event.model_dump_json()
    if event.project is None:
        return line + "\n"
    return f'{line[:-1]},"project":{json.dumps(event.project)}}}\n'


class Exports:
    """Events read from ``state.port``; the file name asked and the outcome said through
    ``ui``; exports audited through ``sender``; ``clock`` names the default files."""

    def __init__(
        self, state: ConsoleState, ui: Ui, sender: CommandSender, clock: Callable[[], datetime]
    ) -> None:
        self._state = state
        self._ui = ui
        self._sender = sender
        self._clock = clock

    def _source(self, screen: Screen) -> tuple[str, list[AgentEvent]] | None:
        """``(what, events)``: the filtered event log on the main screen, the worker's
        transcript on its screen; ``None`` on a screen with neither."""
        port = self._state.port
        if getattr(screen, "CONSOLE_SCOPE", None) == "worker":  # a WorkerScreen
            issue_id = screen.issue_id
            events = port.events_since(0, limit=EXPORT_LIMIT, issue_id=issue_id)
            return f"transcript of {self._state.ident(issue_id)}", events
        logs = screen.query(EventLogView)
        if not logs:
            return None
        log_filter = logs.first().filter
        events = port.events_since(0, limit=EXPORT_LIMIT, issue_id=log_filter.issue_id)
        what = "event log" + (" (filtered)" if log_filter.text else "")
        return what, [e for e in events if log_filter.accepts(e)]

    def ask(self, screen: Screen) -> None:
        """Ask where to write what ``screen`` shows (:meth:`_source`), then write it."""
        source = self._source(screen)
        if source is None:
            return
        what, events = source
        stamp = self._clock().strftime("%Y%m%d-%H%M%S")
        kind = "transcript" if what.startswith("transcript") else "events"
        default = str(Path.cwd() / f"symphony-{kind}-{stamp}.txt")
        body = Text(f"Write the {what} ({len(events)} events) to a file ", end="")
        body.append("(.jsonl: every field; otherwise the lines as shown)", style="dim")

        def entered(name: str) -> None:
            target = Path(name).expanduser()
            if target.is_dir():  # a folder: the file gets the default name there
                target = target / Path(default).name
            self.write(target, what, events)

        dialog = AskText("Export", body, placeholder=default, allow_empty=True)
        self._ui.push_screen(
            dialog, lambda name: entered(name or default) if name is not None else None
        )

    def write(self, path: Path, what: str, events: list[AgentEvent]) -> bool:
        """Write ``events`` to ``path`` (refusing to overwrite); notify and audit."""
        try:
            with path.open("x", encoding="utf-8") as f:
                f.write(export_lines(events, path))
        except OSError as exc:
            message = f"export: {path}: {exc.strerror or exc}"
            self._ui.notify(one_line(message, 300), severity="error", markup=False)
            self._sender.note("export", detail=str(path), ok=False, message=message)
            return False
        message = f"wrote {len(events)} events of the {what} to {path}"
        self._ui.notify(one_line(message, 300), markup=False)
        self._sender.note("export", detail=str(path), message=f"{len(events)} events, {what}")
        return True

    def save_screenshot(self, folder: Path | None = None, name: str | None = None) -> bool:
        """Save the screen as SVG in ``folder`` (default ``paths.screenshots_dir()``, made
        when missing) under ``name`` (default ``symphony-<time>.svg``), never overwriting a
        file; say where, or why it could not."""
        from symphony_tui.paths import screenshots_dir

        folder = folder or screenshots_dir()
        name = name or f"symphony-{self._clock().strftime('%Y%m%d-%H%M%S-%f')}.svg"
        path = folder / name
        try:
            svg = self._ui.export_screenshot()
            folder.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as f:
                f.write(svg)
        except OSError as exc:
            where = exc.filename or path
            message = f"screenshot not saved: {where}: {exc.strerror or exc}"
            self._ui.notify(one_line(message, 300), severity="error", markup=False)
            return False
        self._ui.notify(one_line(f"screenshot saved: {path}", 300), markup=False)
        return True
