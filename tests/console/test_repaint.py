"""What the console writes to the terminal: nothing when nothing it shows changed,
only the changed cells' lines when one did, streamed text at most once a second, and no
repaint once quitting. Frames are counted and their lines read (``FrameRecorder``), never
timed."""

from __future__ import annotations

import asyncio

from rich.console import Console

from symphony_tui.console.widgets.event_log import EventLogView
from symphony_tui.console.widgets.workers import ActivityGate, WorkersTable
from symphony_tui.domain import EventKind
from tests.console.helpers import SIZE, settle
from tests.console.sample import ago


class FrameRecorder:
    """Wraps the headless app's ``_display``: every frame it would have written is
    rendered to terminal bytes (``written``) and the screen lines it touches recorded."""

    def __init__(self, app) -> None:
        self.written = 0
        self.lines: set[int] = set()
        console = Console(color_system="truecolor", force_terminal=True, width=SIZE[0])
        original = app._display

        def display(screen, renderable) -> None:
            if renderable is not None and hasattr(renderable, "render_segments"):
                self.written += len(renderable.render_segments(console).encode())
                self.lines.update(y for y, _, _ in getattr(renderable, "spans", ()))
            original(screen, renderable)

        app._display = display

    def reset(self) -> None:
        self.written = 0
        self.lines = set()


async def test_a_new_snapshot_showing_the_same_writes_nothing(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await settle(pilot)
        frames = FrameRecorder(app)
        for _ in range(5):
            # a new snapshot object every tick (the scheduler's are rebuilt when anything
            # moves), with nothing the screen shows changed: titles, status, token pane
            # and tables are left alone
            port.update(generated_at=port.current.generated_at)
            await settle(pilot)
        assert frames.written == 0


async def test_one_changed_cell_repaints_only_its_row(port, make_app):
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
        frames = FrameRecorder(app)
        rows[1] = rows[1].model_copy(update={"last_message": "a brand new message"})
        port.update(running=tuple(rows))
        await settle(pilot)
        await settle(pilot)
        assert "a brand new message" in table.get_row(rows[1].issue_id)[-1].plain
        assert len(frames.lines) == 1  # one screen line, not the whole table
        assert 0 < frames.written < 2 * SIZE[0] * 25  # well under two lines of styled cells


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


async def test_no_repaint_once_quitting(port, make_app):
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
        frames = FrameRecorder(app)
        port.update(running=(), generated_at=ago(-60))  # every run ends while stopping
        await settle(pilot)
        await settle(pilot)
        assert table.row_count == shown  # the tables are not rebuilt for the ended runs
        assert not frames.lines & set(range(table.region.y, table.region.bottom))
        release.set()
        await pilot.pause()
