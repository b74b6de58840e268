"""The operator's view of worker hosts: ``h`` opens the hosts screen (a row per
host, the selected one's detail; one line instead when no hosts are configured), drain
asks first and undrain / probe send at once, and the workers and recovered tables get a
host column only when the snapshot has hosts."""

from __future__ import annotations

from symphony_tui.console.screens.hosts import NO_HOSTS, HostsScreen
from symphony_tui.console.screens.main import MainScreen
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.screens.recovered import RecoveredScreen
from symphony_tui.console.widgets.keyed_table import KeyedTable
from symphony_tui.console.widgets.workers import WorkersTable
from symphony_tui.domain.commands import DrainHost, ProbeHost, UndrainHost
from tests.console.helpers import SIZE, done, footer_keys, notifications, plain, settle
from tests.console.sample import sample_hosts


def cells(table: KeyedTable, key: str) -> list[str]:
    return [plain(c) for c in table.get_row(key)]


def columns(table: KeyedTable) -> list[str]:
    return [c.label.plain for c in table.columns.values()]


async def open_hosts(pilot, key: str | None = None) -> HostsScreen:
    await pilot.press("h")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, HostsScreen)
    if key is not None:
        assert screen.query_one("#hosts", KeyedTable).select_key(key)
        await settle(pilot)
    return screen


async def test_without_hosts_h_says_so_in_one_line(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert (NO_HOSTS, "information") in notifications(app)
        assert "\n" not in NO_HOSTS


async def test_a_row_per_host_and_the_selected_hosts_detail(port, make_app):
    app = make_app(sample_hosts(port))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_hosts(pilot)
        table = screen.query_one("#hosts", KeyedTable)
        assert table.border_title == "Worker hosts (2/3 up, 2 drained)"
        assert cells(table, "build-1")[:6] == ["build-1", "● up", "1h00m", "2/4", "3 ms", "3"]
        down = cells(table, "ci@build-2:2222")
        assert down[1:4] == ["✗ down ⏸", "5m00s", "0/2"]
        assert down[6].startswith("host ci@build-2:2222 refused the connection")
        assert cells(table, "[fd00::7]:22")[1] == "⏸ drained"
        detail = plain(screen.query_one("#host-detail").render())
        assert "runs        2 of 4: DEMO-1, DEMO-3" in detail
        assert "up since 2026-11-02 09:00:00 UTC (1h00m ago)" in detail
        table.select_key("ci@build-2:2222")
        await settle(pilot)
        detail = plain(screen.query_one("#host-detail").render())
        assert "workspaces  1 (recovered here: DEMO-9)" in detail
        assert "last error  host ci@build-2:2222 refused the connection (ssh exit 255)" in detail
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_drain_asks_first_undrain_and_probe_send_at_once(port, make_app):
    app = make_app(sample_hosts(port))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_hosts(pilot, "build-1")
        assert footer_keys(app)["d"] == ("Drain", True)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, Confirm) and port.sent == []
        # d is the screen's here: no "nothing waiting for you" about the approvals
        assert not any("waiting" in m for m, _ in notifications(app))
        await pilot.press("y")
        await done(pilot)
        assert port.sent == [DrainHost(host="build-1")]

        app.screen.query_one("#hosts", KeyedTable).select_key("ci@build-2:2222")
        await settle(pilot)
        assert footer_keys(app)["d"] == ("Undrain", True)
        await pilot.press("d")
        await done(pilot)
        await pilot.press("P")
        await done(pilot)
        assert port.sent[1:] == [
            UndrainHost(host="ci@build-2:2222"),
            ProbeHost(host="ci@build-2:2222"),
        ]
        app.screen.query_one("#hosts", KeyedTable).select_key("build-1")
        await settle(pilot)
        assert footer_keys(app)["P"] == ("Probe", True)  # an up host: its round trip
        await pilot.press("P")
        await done(pilot)
        assert port.sent[-1] == ProbeHost(host="build-1")


async def test_the_workers_table_has_a_host_column_only_with_hosts(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        workers = app.screen.query_one(WorkersTable)
        before = columns(workers)
        assert "Host" not in before
        sample_hosts(port)
        await settle(pilot)
        assert columns(workers) == [*before[:2], "Host", *before[2:]]
        row = cells(workers, "demo-1")
        assert row[1:3] == ["DEMO-1", "build-1"]
        # 80 columns: every column shows, the last event keeps at least 8 cells
        assert sum(c.width + 2 for c in workers.columns.values()) <= 78
        assert workers.column_width("last") >= 8


async def test_the_recovered_table_has_a_host_column_only_with_hosts(port, make_app):
    app = make_app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, RecoveredScreen)
        table = app.screen.query_one("#recovered", KeyedTable)
        assert "Host" not in columns(table) and "Tokens" in columns(table)
        sample_hosts(port)
        await settle(pilot)
        assert columns(table)[:3] == ["Issue", "Host", "Title"]
        assert "Tokens" not in columns(table)  # the detail has them; 80 columns still fit
        assert cells(table, "DEMO-9")[1] == "ci@build-2:2222"
        assert cells(table, "DEMO-2")[1] == "-"
        assert sum(c.width + 2 for c in table.columns.values()) <= 78


def test_a_slow_round_trip_fits_its_column():
    from symphony_tui.console.screens.hosts import rtt_text
    from symphony_tui.domain.snapshot import HostRow

    def rtt(ms: float | None) -> str:
        return rtt_text(HostRow(name="h", up=True, rtt_ms=ms))

    assert [rtt(None), rtt(3.4), rtt(999.4), rtt(2016), rtt(68_730), rtt(250_000)] == [
        "-", "3 ms", "999 ms", "2.0 s", "68.7 s", "250 s",
    ]  # fmt: skip
    assert all(len(rtt(ms)) <= 6 for ms in (0.1, 999.4, 1000, 99_999, 999_999))
