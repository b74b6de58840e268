"""The diff screen: what the agent changed in one workspace.

The changed files with their ``+``/``-`` line counts (binary files named, not shown) and
the diff of the highlighted file, a page (:data:`PAGE_LINES`) at a time: ``]`` / ``[``
move between pages. Everything comes from the scheduler (``SchedulerPort.diff`` /
``diff_file``: computed where the workspace is, so it also works attached from another
machine); the text is made inert here (escape sequences and control characters removed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from symphony_tui.console.messages import ConsoleApp, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import clean, inert
from symphony_tui.console.selection import oldest_approval
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.text import one_line_tail

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import ApprovalRequest
    from symphony_tui.domain.diff import DiffFile, DiffPage, WorkspaceDiff

PAGE_LINES = 400
PATH_WIDTH = 30


def counts(file: DiffFile) -> str:
    """``+12 -3``, ``binary``, or ``+12`` when the removed lines are unknown."""
    if file.binary:
        return "binary"
    added = f"+{file.added}" if file.added is not None else "+?"
    return added if file.removed is None else f"{added} -{file.removed}"


def page_text(page: DiffPage, tones: Tones) -> Text:
    """One page of a diff, inert and coloured by line type, with where it is."""
    text = Text(end="")
    if page.error:
        text.append_text(inert(page.error, tones.error))
        return text
    if page.binary:
        text.append_text(inert(f"{page.path}: binary file (not shown)", tones.muted))
        return text
    for i, raw in enumerate(page.lines):
        if i:
            text.append("\n")
        line = clean(raw)  # one diff line: tabs expanded, escapes and controls gone
        if line.startswith(("+++", "---", "diff --git", "index ")):
            style = tones.bold
        elif line.startswith("+"):
            style = tones.success
        elif line.startswith("-"):
            style = tones.error
        elif line.startswith("@@"):
            style = tones.primary
        else:
            style = ""
        text.append(line, style=style)
    end = page.offset + len(page.lines)
    more = []
    if page.total_lines > len(page.lines):
        more.append(f"lines {page.offset + 1}-{end} of {page.total_lines}")
        if end < page.total_lines:
            more.append("] next page")
        if page.offset:
            more.append("[ previous")
    if page.truncated:
        more.append("the diff is longer than the scheduler reads (4 MB)")
    if more:
        text.append("\n" + " · ".join(more), style=tones.muted)
    return text


class DiffScreen(Screen[None]):
    CONSOLE_SCOPE = "diff"
    BINDINGS = bindings_for("diff")

    def __init__(self, issue_id: str, identifier: str | None = None) -> None:
        super().__init__(classes="diff-screen")
        self.issue_id = issue_id
        self.identifier = identifier or issue_id
        self.diff: WorkspaceDiff | None = None
        self.page: DiffPage | None = None
        self._file: str | None = None

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

    def compose(self) -> ComposeResult:
        yield Static(inert(f"Diff of {self.identifier}: loading…"), id="diff-header")
        with Horizontal(id="diff-body"):
            files = DataTable(id="diff-files", classes="pane", cursor_type="row")
            files.border_title = "Files"
            yield files
            with VerticalScroll(id="diff-scroll", classes="pane") as scroll:
                scroll.border_title = "Diff"
                yield Static(id="diff-text")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        table = self.query_one("#diff-files", DataTable)
        # counts first: a narrow pane cuts the path's end, never the numbers
        table.add_column("+/-", key="counts", width=9)
        table.add_column("File", key="path", width=PATH_WIDTH)
        table.focus()
        self.load()

    @work(group="diff", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        self.show_diff(await self.console.port.diff(self.issue_id))

    def show_diff(self, diff: WorkspaceDiff) -> None:
        self.diff = diff
        tones = self.console.tones
        header = Text(end="")
        header.append_text(inert(f"Diff of {diff.issue_identifier or self.identifier}", "bold"))
        if diff.error:
            header.append("  ")
            header.append_text(inert(diff.error, tones.error, limit=200))
        else:
            header.append(f"  {len(diff.files)} files ", style=tones.muted)
            header.append(f"+{diff.added}", style=tones.success)
            header.append(" ")
            header.append(f"-{diff.removed}", style=tones.error)
            header.append("  against ", style=tones.muted)
            header.append_text(inert(diff.base, limit=120))
            if diff.truncated:
                header.append("  (more files than shown)", style=tones.warning)
        self.query_one("#diff-header", Static).update(header)
        table = self.query_one("#diff-files", DataTable)
        table.clear()
        for file in diff.files:
            # the end of a long path says more than its start (which folder, which file)
            name = inert(f"{file.status} {one_line_tail(file.path, PATH_WIDTH - 2)}")
            table.add_row(inert(counts(file), tones.muted), name, key=file.path)
        if not diff.files:
            why = diff.error or "no changes against the base"
            self.query_one("#diff-text", Static).update(inert(why, tones.muted))
        else:
            self.open_file(diff.files[0].path)

    @on(DataTable.RowHighlighted, "#diff-files")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self._file:
            self.open_file(str(event.row_key.value))

    def open_file(self, path: str, offset: int = 0) -> None:
        self._file = path
        self.load_page(path, offset)

    @work(group="diff-page", exclusive=True, exit_on_error=False)
    async def load_page(self, path: str, offset: int) -> None:
        page = await self.console.port.diff_file(
            self.issue_id, path, offset=offset, limit=PAGE_LINES
        )
        if path != self._file:
            return  # another file was highlighted meanwhile
        self.page = page
        self.query_one("#diff-text", Static).update(page_text(page, self.console.tones))
        self.query_one("#diff-scroll", VerticalScroll).scroll_home(animate=False)

    # -- keys ---------------------------------------------------------------------------

    def action_next_page(self) -> None:
        page = self.page
        if page is not None and self._file and page.offset + len(page.lines) < page.total_lines:
            self.load_page(self._file, page.offset + len(page.lines))

    def action_previous_page(self) -> None:
        page = self.page
        if page is not None and self._file and page.offset > 0:
            self.load_page(self._file, max(0, page.offset - PAGE_LINES))

    def action_reload_diff(self) -> None:
        self._file = None
        self.load()

    def selected_issue_id(self) -> str | None:
        return self.issue_id

    def selected_approval(self) -> ApprovalRequest | None:
        snapshot = self.console.snapshot
        return oldest_approval(snapshot, self.issue_id) if snapshot is not None else None
