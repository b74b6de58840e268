"""What the console writes to the terminal: nothing when nothing it shows changed,
only the changed cells' lines when one did, streamed text at most once a second, and no
repaint once quitting. Frames are counted and their lines read (``FrameRecorder``), never
timed."""

from __future__ import annotations

import asyncio
import re

from rich.console import Console
from rich.segment import Segment
from textual._compositor import ChopsUpdate
from textual.app import App
from textual.strip import Strip

from symphony_tui.console.repaint import ShownLines, changed_cells, cropped_update
from symphony_tui.console.widgets.event_log import EventLogView
from symphony_tui.console.widgets.workers import COLUMNS, ActivityGate, WorkersTable
from symphony_tui.domain import EventKind
from tests.console.helpers import SIZE, settle
from tests.console.sample import ago


class FrameRecorder:
    """Records every frame the headless app would have written, as it reaches Textual's
    ``App._display`` (after the console's own ``_display``): each is rendered to terminal
    bytes (``written``, ``frames``) and the screen lines it touches recorded."""

    def __init__(self, app, monkeypatch) -> None:
        self.written = 0
        self.lines: set[int] = set()
        self.frames: list[str] = []
        console = Console(color_system="truecolor", force_terminal=True, width=SIZE[0])
        original = App._display

        def display(shown, screen, renderable) -> None:
            if shown is app and renderable is not None and hasattr(renderable, "spans"):
                frame = renderable.render_segments(console)
                self.frames.append(frame)
                self.written += len(frame.encode())
                self.lines.update(y for y, _, _ in renderable.spans)
            original(shown, screen, renderable)

        monkeypatch.setattr(App, "_display", display)

    def reset(self) -> None:
        self.written = 0
        self.lines = set()
        self.frames = []

    def writes(self) -> list[tuple[int, int, str]]:
        """``(y, x, text)`` of each write (0-based screen cells; ``text`` without escape
        sequences), read from the frames' cursor positionings."""
        found = []
        for frame in self.frames:
            for row, column, body in _MOVE.findall(frame):
                found.append((int(row) - 1, int(column) - 1, _SGR.sub("", body)))
        return found


_MOVE = re.compile(r"\x1b\[(\d+);(\d+)H([^\x1b]*(?:\x1b\[[\d;]*m[^\x1b]*)*)")
_SGR = re.compile(r"\x1b\[[\d;]*m")


async def test_a_new_snapshot_showing_the_same_writes_nothing(port, make_app, monkeypatch):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await settle(pilot)
        frames = FrameRecorder(app, monkeypatch)
        for _ in range(5):
            # a new snapshot object every tick (the scheduler's are rebuilt when anything
            # moves), with nothing the screen shows changed: titles, status, token pane
            # and tables are left alone
            port.update(generated_at=port.current.generated_at)
            await settle(pilot)
        assert frames.written == 0


async def test_one_changed_cell_repaints_only_its_row(port, make_app, monkeypatch):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        assert table.row_count >= 2
        rows = list(port.current.running)
        # a first change: Textual also repaints, once, what a layout left marked dirty
        rows[1] = rows[1].model_copy(update={"last_message": "a new message"})
        port.update(running=tuple(rows))
        await settle(pilot)
        frames = FrameRecorder(app, monkeypatch)
        rows[1] = rows[1].model_copy(update={"last_message": "a brand new message"})
        port.update(running=tuple(rows))
        await settle(pilot)
        await settle(pilot)
        assert "a brand new message" in table.get_row(rows[1].issue_id)[-1].plain
        assert len(frames.lines) == 1  # one screen line, not the whole table
        assert 0 < frames.written < 2 * SIZE[0] * 25  # well under two lines of styled cells


async def test_one_changed_cell_writes_only_that_cell(port, make_app, monkeypatch):
    # Textual's partial update writes a dirty span from the left edge of the widget it lies
    # in: one changed cell would send its line from the pane's border through the cell
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        rows = list(port.current.running)
        rows[1] = rows[1].model_copy(update={"turn_count": 7})
        port.update(running=tuple(rows))
        await settle(pilot)
        frames = FrameRecorder(app, monkeypatch)
        rows[1] = rows[1].model_copy(update={"turn_count": 8})
        port.update(running=tuple(rows))
        await settle(pilot)
        await settle(pilot)
        x, width = table._column_spans()[[c[0] for c in COLUMNS].index("turn")]
        left = table.content_region.x + x - int(table.scroll_x)
        y = table.content_region.y + table.header_height + table.get_row_index(rows[1].issue_id)
        writes = frames.writes()
        assert writes, "the changed cell was written"
        assert {(wy, wx) for wy, wx, _ in writes} == {(y, left)}
        assert all(len(text) <= width for _, _, text in writes)
        assert "8" in "".join(text for _, _, text in writes)


def test_a_span_inside_a_wide_character_is_written_from_its_start():
    # cells: a b 漢 漢 字 字 c d; a span from the second half of 漢 writes all of 漢
    strip = Strip([Segment("ab漢字cd")])
    update = cropped_update(ChopsUpdate([{0: strip}], [(0, 3, 6)], [[8]]))
    console = Console(color_system=None, force_terminal=True, width=SIZE[0])
    assert update.render_segments(console) == "\x1b[1;3H漢字"


def _written(update, console) -> str:
    return update.render_segments(console)


def test_a_chop_is_written_only_where_it_differs_from_what_the_terminal_shows():
    console = Console(color_system=None, force_terminal=True, width=SIZE[0])
    shown = ShownLines()
    ends = [[4, 10]]

    def frame(left: str, right: str, span=(0, 0, 10)) -> str:
        chops = [{0: Strip([Segment(left)]), 4: Strip([Segment(right[:3]), Segment(right[3:])])}]
        return _written(cropped_update(ChopsUpdate(chops, [span], ends), shown), console)

    assert frame("abcd", "efghij") == "\x1b[1;1Habcd\x1b[1;5Hefghij"  # nothing known yet
    assert frame("abcd", "efghij") == ""  # repainted as it was: nothing written
    assert frame("abcd", "efgXYZ") == "\x1b[1;8HXYZ"  # only the segment that changed
    assert frame("abcd", "efgXYZ") == ""
    # the widget edges moved: the line is no longer known, and is written whole
    ends[0] = [5, 10]
    assert frame("abcd", "efgXYZ").startswith("\x1b[1;1Habcd")


def test_a_cell_written_in_part_is_known_only_for_that_part():
    console = Console(color_system=None, force_terminal=True, width=SIZE[0])
    shown = ShownLines()
    ends = [[6]]

    def frame(text: str, span: tuple[int, int, int]) -> str:
        chops = [{0: Strip([Segment(c) for c in text])}]
        return _written(cropped_update(ChopsUpdate(chops, [span], ends), shown), console)

    assert frame("abcdef", (0, 0, 6)) == "\x1b[1;1Habcdef"
    # only cells 2-3 were dirty: the other new cells were not written, so they are not
    # taken to be on the screen when a later frame paints them
    assert frame("abXYZZ", (0, 2, 4)) == "\x1b[1;3HXY"
    assert frame("abXYZZ", (0, 0, 6)) == "\x1b[1;5HZZ"


def test_changed_cells_are_segment_bounds():
    a = Strip([Segment("ab"), Segment("漢"), Segment("cd")])
    b = Strip([Segment("ab"), Segment("字"), Segment("cd")])
    assert changed_cells(a, b) == (2, 4)
    assert changed_cells(a, a) == (2 + 2 + 2, 6)


async def test_a_pane_repainted_unchanged_writes_nothing(port, make_app, monkeypatch):
    # a scrollbar redrawn as it was, a table re-rendered with the same cells: Textual sends
    # the whole region again, the console none of it
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        frames = FrameRecorder(app, monkeypatch)
        panes = [app.screen.query_one(WorkersTable), app.screen.query_one(EventLogView)]
        for pane in panes:
            pane.refresh()
        await settle(pilot)
        assert frames.lines, "the panes were repainted"
        assert frames.written > 0  # not known yet (a headless app records no full frame)
        frames.reset()
        for pane in panes:
            pane.refresh()
        await settle(pilot)
        assert frames.lines and frames.written == 0


async def test_event_log_appends_at_most_once_per_interval(port, make_app):
    seconds = [100.0]
    app = make_app(port, live_text_s=1.0, monotonic=lambda: seconds[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        seconds[0] += 5  # a quiet spell since the sample's events were appended
        port.add_event(EventKind.MESSAGE, "first after a quiet spell", issue_id="demo-3")
        await settle(pilot)
        assert log.plain_lines()[-1].endswith("first after a quiet spell")  # at once
        count = log.line_count
        for i in range(3):  # a flood within the second: held in the core's ring
            port.add_event(EventKind.MESSAGE, f"flood {i}", issue_id="demo-3")
            seconds[0] += 0.25
            await settle(pilot)
        assert log.line_count == count
        seconds[0] += 0.25  # a second since the last append
        await settle(pilot)
        assert log.line_count == count + 3
        assert log.plain_lines()[-1].endswith("flood 2")
        port.add_event(EventKind.MESSAGE, "while filtering", issue_id="demo-3")
        app.screen.apply_filter("demo-3")  # an operator action reads at once
        assert log.plain_lines()[-1].endswith("while filtering")


def test_activity_gate_holds_changes_within_the_interval():
    from tests.console.sample import sample_snapshot

    row = sample_snapshot().running[0]
    seconds = [0.0]
    gate = ActivityGate(1.0, lambda: seconds[0])
    first = gate.activity(row, 40)
    changed = row.model_copy(update={"last_message": "newer words"})
    seconds[0] = 0.5
    assert gate.activity(changed, 40) is first  # held
    assert gate.activity(changed, 60).width == 60  # a new width goes through
    seconds[0] = 0.9
    assert gate.activity(row.model_copy(update={"last_message": "newest"}), 60).width == 60
    seconds[0] = 1.6
    shown = gate.activity(row.model_copy(update={"last_message": "newest"}), 60)
    assert shown.row.last_message == "newest"
    gate.retain([])
    assert gate.activity(changed, 60).row.last_message == "newer words"


async def test_workers_activity_repaints_once_per_interval_other_cells_at_once(port, make_app):
    seconds = [100.0]
    app = make_app(port, live_text_s=1.0, monotonic=lambda: seconds[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        rows = list(port.current.running)
        key = rows[1].issue_id
        rows[1] = rows[1].model_copy(update={"last_message": "one"})
        port.update(running=tuple(rows))
        seconds[0] += 5
        await settle(pilot)
        assert table.get_row(key)[-1].plain.endswith("one")
        rows[1] = rows[1].model_copy(update={"last_message": "two", "pending_approvals": 3})
        port.update(running=tuple(rows))
        seconds[0] += 0.25
        await settle(pilot)
        cells = table.get_row(key)
        assert cells[-1].plain.endswith("one")  # streamed text waits for its second
        assert "3" in cells[0].plain  # an approval shows at once
        seconds[0] += 1.0
        await settle(pilot)
        assert table.get_row(key)[-1].plain.endswith("two")


async def test_no_repaint_once_quitting(port, make_app, monkeypatch):
    release = asyncio.Event()

    async def shutdown() -> None:
        await release.wait()

    app = make_app(port, shutdown=shutdown)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(WorkersTable)
        shown = table.row_count
        app.run_worker(app.shutdown_and_exit(0), group="lifecycle", exit_on_error=False)
        await pilot.pause()
        frames = FrameRecorder(app, monkeypatch)
        port.update(running=(), generated_at=ago(-60))  # every run ends while stopping
        await settle(pilot)
        await settle(pilot)
        assert table.row_count == shown  # the tables are not rebuilt for the ended runs
        assert not frames.lines & set(range(table.region.y, table.region.bottom))
        release.set()
        await pilot.pause()
