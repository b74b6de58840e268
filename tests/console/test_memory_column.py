"""Each run's agent memory in the workers pane (one narrow column that fits 80x24, with
and without worker hosts) and its memory, CPU and the free memory where it runs in the
worker detail, with the reason when that machine takes no new run."""

from __future__ import annotations

from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.screens.hosts import host_detail
from symphony_tui.console.screens.worker import WorkerScreen
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.workers import WorkersTable
from tests.console.helpers import settle
from tests.console.sample import sample_hosts


def _cells(table: WorkersTable | IssuesTable, key: str) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(key)]


def _labels(table: WorkersTable) -> list[str]:
    return [c.label.plain for c in table.columns.values()]


async def _header_lines(app, pilot, issue_id: str) -> list[str]:
    app.push_screen(WorkerScreen(issue_id))
    await settle(pilot)
    header = app.screen.query_one("#worker-header")
    strips = header.render_lines(header.region.reset_offset)
    return ["".join(segment.text for segment in strip) for strip in strips]


def test_memory_fits_four_cells() -> None:
    mib = 1024 * 1024
    assert [fmt.memory(n) for n in (None, 5 * mib, 812 * mib, 1_234_567_890, 12 * 1024 * mib)] == [
        "-", "5M", "812M", "1.1G", "12G",
    ]  # fmt: skip
    assert max(len(fmt.memory(n * mib)) for n in range(0, 200_000, 37)) <= 4


async def test_the_workers_pane_has_a_memory_column_that_fits_80_columns(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        workers = app.screen.query_one(WorkersTable)
        labels = _labels(workers)
        assert labels[labels.index("Tokens") + 1] == "Mem"
        at = labels.index("Mem")
        assert _cells(workers, "demo-1")[at] == "1.1G" and _cells(workers, "demo-3")[at] == "-"
        assert sum(c.width + 2 for c in workers.columns.values()) <= 78
        assert workers.column_width("last") >= 12
        sample_hosts(port)
        await settle(pilot)
        labels = _labels(workers)
        assert "Host" in labels and _cells(workers, "demo-1")[labels.index("Mem")] == "1.1G"
        assert sum(c.width + 2 for c in workers.columns.values()) <= 78
        assert workers.column_width("last") >= 8


async def test_the_worker_detail_says_memory_cpu_and_the_free_memory_where_it_runs(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = await _header_lines(app, pilot, "demo-1")
        assert any("memory 1.1G  cpu 12%  this machine 3.2G free of 16G" in x for x in lines)
        assert not any("no new run here" in x for x in lines)
        app.pop_screen()
        sample_hosts(port)
        await settle(pilot)
        lines = await _header_lines(app, pilot, "demo-1")
        assert any("build-1 812M free of 8.0G" in x for x in lines), lines
        assert any("no new run here: host build-1 has 812 MB free" in x for x in lines), lines


async def test_an_issue_waiting_for_memory_says_so_in_its_row_and_its_detail(port, make_app):
    note = "waiting for memory: this machine has 812 MB free, under the 2,048 MB floor"
    issues = tuple(
        i.model_copy(update={"note": note}) if i.issue_id == "demo-4" else i
        for i in port.current.issues
    )
    port.update(issues=tuple(i.model_copy(update={"blocked": False}) for i in issues))
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(IssuesTable)
        assert _cells(table, "demo-4")[3] == "⧖ memory"
        assert _cells(table, "demo-5")[3] == "○ idle"
        lines = await _header_lines(app, pilot, "demo-4")
        assert any(note in line for line in lines), lines


def test_the_hosts_screen_says_each_hosts_memory(port):
    snap = sample_hosts(port).current
    text = host_detail(snap.hosts[0], snap, snap.generated_at, Tones()).plain
    assert "memory      812M free of 8.0G, agents 1.1G; no new run: host build-1 has 812 MB" in text
    assert "memory      -" in host_detail(snap.hosts[2], snap, snap.generated_at, Tones()).plain
