"""The fleet view: one console over several schedulers (``console/fleet.py``).

Driven by :class:`~tests.console.fleet_sample.FleetTestPort`, a port shaped as the fleet
contract says (namespaced ids, ``project`` on rows, the identifier ``#12`` in two
projects, one project stale). One scheduler's console is unchanged (its screenshots in
``test_snapshots.py`` stay as they were).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from symphony_tui.api.client import LinkStatus
from symphony_tui.console.fleet import CHOOSE_A_PROJECT, narrowed, project_of
from symphony_tui.console.screens.approvals import ApprovalsScreen
from symphony_tui.console.screens.help import help_table
from symphony_tui.console.screens.hosts import HostsScreen
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.console.screens.projects import ProjectsScreen
from symphony_tui.console.screens.worker import WorkerScreen
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.event_log import EventLogView, LogFilter
from symphony_tui.console.widgets.issues import IssuesTable
from symphony_tui.console.widgets.keyed_table import KeyedTable
from symphony_tui.console.widgets.status import project_alerts, status_text
from symphony_tui.console.widgets.tokens import per_worker_text, projects_text
from symphony_tui.console.widgets.workers import WorkersTable
from symphony_tui.domain import Approve, Deny, Interrupt, PauseDispatch, Refresh
from symphony_tui.domain.commands import DrainHost
from symphony_tui.domain.snapshot import HostRow
from symphony_tui.domain.tokens import TokenUsage
from symphony_tui.fleet.port import FleetPort
from tests.console.fleet_sample import API, BILLING, WEB, FleetTestPort, fleet_snapshot
from tests.console.helpers import SIZE, done, notifications, plain, settle
from tests.console.sample import NOW
from tests.console.test_snapshots import shoot
from tests.console.test_stale_link import screen_text


def cells(table: KeyedTable) -> dict[str, list[str]]:
    """Row key -> the row's cells as plain text."""
    return {
        key.value: [plain(c) for c in table.get_row(key)]
        for key in table.rows  # type: ignore[union-attr]  # RowKey
    }


def column_keys(table: KeyedTable) -> list[str]:
    return [str(k.value) for k in table.columns]


@pytest.fixture
def fleet() -> FleetTestPort:
    return FleetTestPort()


async def test_rows_carry_a_project_column_and_are_keyed_by_issue_id(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        issues = app.screen.query_one(IssuesTable)
        workers = app.screen.query_one(WorkersTable)
        assert column_keys(issues)[0] == "project"
        assert column_keys(workers)[:3] == ["approval", "project", "issue"]
        rows = cells(issues)
        # the same identifier in two projects: two rows, told apart by the project
        assert rows["api/i-12"][:2] == ["api", "#12"]
        assert rows["web/i-12"][:2] == ["web", "#12"]
        assert rows["web/i-15"][:2] == ["web", "#15"]  # a retry entry's issue
        assert cells(workers)["billing-service-backend/b-3"][1] == "billing-s…"
        per_worker = plain(app.screen.query_one("#token-workers").render())
        assert "web    #12 " in per_worker and "api    #12 " in per_worker
        log = app.screen.query_one(EventLogView).plain_lines()
        assert any(" web     #12 " in line for line in log)
        assert any(" billin… BIL-3 " in line for line in log)
        # enter on web's #12 opens web's worker, not api's
        app.screen.query_one("#workers").focus()
        assert workers.select_key("web/i-12")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, WorkerScreen) and app.screen.issue_id == "web/i-12"
        assert "web · #12  Dark mode toggle" in screen_text(app)
        # a project on another machine: its workspaces are there
        assert app.state.workspace_of("billing-service-backend/b-3") == (
            "billing-service-backend/b-3",
            "BIL-3",
            "/srv/ws/BIL-3",
            "build-1",
        )
        assert app.state.workspace_of("web/i-12") == ("web/i-12", "#12", "/ws/web/12", None)


async def test_one_scheduler_shows_no_fleet_columns_or_keys(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "project" not in column_keys(app.screen.query_one(IssuesTable))
        assert "project" not in column_keys(app.screen.query_one(WorkersTable))
        assert app.check_action("show_projects", ()) is False
        assert app.check_action("cycle_project", ()) is False
        await pilot.press("P", "F")
        await settle(pilot)
        assert not isinstance(app.screen, ProjectsScreen)
        assert app.project_filter is None
        await pilot.press("p")  # pause still names no project
        await done(pilot)
        assert port.sent == [PauseDispatch(paused=True)]
    text = " ".join(str(c) for c in help_table(str).columns[1]._cells)
    assert "Projects (fleet)" not in text and "projects table" not in text
    fleet_text = " ".join(str(c) for c in help_table(str, fleet=True).columns[1]._cells)
    assert "Projects (fleet)" in fleet_text


async def test_no_project_live_is_said_per_project_never_as_one_lost_link(fleet, make_app):
    down = tuple(
        p.model_copy(update={"link_state": "down", "age_s": None, "error": "401 refused"})
        for p in fleet.current.projects
    )
    fleet.update(projects=down)
    fleet.link = lambda: LinkStatus("stale", 0.0, "fleet")  # FleetPort's with none live
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "scheduler link lost" not in text and "STALE" not in text
        assert "⌂ 0/3 live" in text
        assert "✗ 3 projects down: api, web, billing-service-backend · 401 refused" in text


async def test_a_stale_projects_rows_read_unknown_the_others_do_not(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = cells(app.screen.query_one(WorkersTable))
        web, api = rows["web/i-12"], rows["api/i-12"]
        assert web[0] == "" and "? unknown" in web and web[-1].startswith("as of 32s ago")
        assert api[0] == "⚑1" and "! waiting" in api and "as of" not in api[-1]
        text = screen_text(app)
        assert "✗ project web stale: connection refused · last update 32s ago" in text
        assert "⌂ 2/3 live" in text
        # the link comes back: web's row is live again
        fleet.update(
            projects=tuple(
                p.model_copy(update={"link_state": "live", "age_s": 0.3, "error": None})
                for p in fleet.current.projects
            )
        )
        await settle(pilot)
        web = cells(app.screen.query_one(WorkersTable))["web/i-12"]
        assert "● working" in web and "as of" not in web[-1]
        assert "project web stale" not in screen_text(app)


async def test_projects_table_and_enter_filters_by_its_project(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await settle(pilot)
        assert isinstance(app.screen, ProjectsScreen)
        rows = cells(app.screen.query_one("#projects", KeyedTable))
        assert list(rows) == [API, WEB, BILLING]
        assert rows[API][:6] == ["api", "● live 0s", "1", "0", "⚑1", "22.0k"]
        assert rows[WEB][1] == "✗ stale 32s" and rows[WEB][3] == "1"
        assert rows[WEB][-1] == "connection refused"
        assert rows[BILLING][6] == "build-1"
        detail = plain(app.screen.query_one("#project-detail").render())
        assert "/home/ann/src/api/WORKFLOW.md" in detail and "42%" in detail
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.project_filter == WEB
        assert cells(app.screen.query_one("#projects", KeyedTable))[WEB][0] == "▸ web"
        await pilot.press("escape")
        await settle(pilot)
        assert set(cells(app.screen.query_one(IssuesTable))) == {"web/i-12", "web/i-15"}
        await pilot.press("P")
        await settle(pilot)  # the cursor starts on the project filtered by
        assert app.screen.query_one("#projects", KeyedTable).selected_key == WEB
        await pilot.press("enter")  # the filtered one again: every project
        await settle(pilot)
        assert app.project_filter is None


async def test_a_projects_rate_limit_lines_line_up_with_its_other_details(fleet, make_app):
    """Each window and the credits are a labelled line of the details: values in one column."""
    from symphony_tui.domain import RateLimits, RateLimitWindow
    from tests.console.sample import later

    limits = RateLimits(
        source="codex",
        limit_name="codex",
        primary=RateLimitWindow(used_percent=42.0, window_minutes=300, resets_at=later(600)),
        secondary=RateLimitWindow(used_percent=75.0, window_minutes=10_080),
        credits_balance="12.5",
    )
    fleet.update(
        projects=tuple(
            p.model_copy(update={"rate_limits": limits}) if p.name == API else p
            for p in fleet.current.projects
        )
    )
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("P")
        await settle(pilot)
        lines = plain(app.screen.query_one("#project-detail").render()).splitlines()
    labels = [line.split()[0] for line in lines]
    assert labels[-4:] == ["limits", "primary", "secondary", "credits"], lines
    columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert columns == {11}, lines


async def test_a_stopped_projects_row_runs_nothing_its_details_say_what_it_had(fleet, make_app):
    # as the fleet's port has a stopped scheduler's row: nothing runs or waits there
    stopped = tuple(
        p.model_copy(
            update={
                "link_state": "stopped",
                "error": None,
                "stop_reason": "stopped by SIGTERM",
                "running": 0,
                "retrying": 0,
                "approvals": 0,
                "max_concurrent_agents": 0,
                "stopped_with": (1, 1, 1),
            }
        )
        if p.name == WEB
        else p
        for p in fleet.current.projects
    )
    fleet.update(projects=stopped)
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("P", "down")
        await settle(pilot)
        table = app.screen.query_one("#projects", KeyedTable)
        web, api = table.get_row(WEB), table.get_row(API)
        assert [plain(c) for c in web[1:6]] == ["■ stopped 32s", "0", "0", "0", "54.0k"]
        assert plain(web[-1]) == "-"  # a clean stop is no error
        # what it last sent, dimmed as the rows of a lost project are; a live one's are not
        muted = app.tones.muted
        assert all(c.style == muted for c in web[2:6])
        assert not any(c.style == muted for c in api[2:5])
        detail = plain(app.screen.query_one("#project-detail").render())
        assert (
            "stopped    32s ago (stopped by SIGTERM), with run 1 · retry 1 · approvals 1: "
            "none run or wait now"
        ) in detail
        assert "last error" not in detail and "as of 32s ago:" not in detail
        # its last figures are marked as such, never shown as live
        assert "dispatch   on (as of 32s ago)" in detail
        assert "tokens     54,000 (in 50.0k, out 4.0k) (as of 32s ago)" in detail


def alpha_quiet_for_47s():
    """A fleet of two projects, each running one issue (``a1``, ``b1``): beta (capacity
    5) heard from just now, alpha last 47 s ago. Returns (port, alpha, beta)."""
    from tests.fleet.test_fleet_port import feed, joined, snap

    now = [100.0]
    port = FleetPort([], clock=lambda: now[0])
    alpha, beta = joined(port, "alpha"), joined(port, "beta")
    feed(alpha, snap("a1"))
    feed(beta, snap("b1").model_copy(update={"max_concurrent_agents": 5}))
    now[0] += 47
    assert alpha.port is not None and beta.port is not None
    beta.port._heard()
    return port, alpha, beta


async def test_a_stopped_schedulers_row_agrees_with_the_panes_and_the_header(make_app):
    from tests.fleet.test_fleet_port import said_stopping

    port, alpha, beta = alpha_quiet_for_47s()
    said_stopping(alpha, "stopped by SIGTERM")  # it said it stops: nothing runs there now
    app = make_app(port)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            # the header: beta's run, of the capacity that can run work (alpha's is left out)
            assert "● 1/5 running" in screen_text(app)
            assert list(cells(app.screen.query_one(WorkersTable))) == ["beta/b1"]
            await pilot.press("v")
            await settle(pilot)
            assert list(cells(app.screen.query_one("#approvals", KeyedTable))) == ["beta/b1:7"]
            await pilot.press("escape", "P")
            await settle(pilot)
            rows = cells(app.screen.query_one("#projects", KeyedTable))
            # the row claims no run and no waiting approval the panes do not show
            assert rows["alpha"][1:5] == ["■ stopped 47s", "0", "0", "0"]
            assert rows["beta"][1:5] == ["● live 0s", "1", "1", "⚑1"]
            detail = plain(app.screen.query_one("#project-detail").render())
            assert "stopped    47s ago (stopped by SIGTERM), with run 1 · retry" in detail
    finally:
        await alpha.port.close()
        await beta.port.close()


async def test_a_scheduler_gone_without_a_word_keeps_its_runs_as_unknown_and_says_so(make_app):
    """kill -9: no stopping frame. Its agents may still run (detached ones are re-adopted
    when it starts again): its row is lost, not stopped, and nothing is zeroed."""
    port, alpha, beta = alpha_quiet_for_47s()
    alpha.port._ended("its process no longer serves")  # what the port finds after kill -9
    app = make_app(port)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            # its run stays, as unknown, and its capacity with it
            assert "● 2/8 running" in screen_text(app)
            workers = cells(app.screen.query_one(WorkersTable))
            assert list(workers) == ["alpha/a1", "beta/b1"]
            assert "? unknown" in workers["alpha/a1"] and "? unknown" not in workers["beta/b1"]
            await pilot.press("P")
            await settle(pilot)
            rows = cells(app.screen.query_one("#projects", KeyedTable))
            assert rows["alpha"][1:5] == ["✗ lost 47s", "1", "1", "⚑1"]
            detail = " ".join(plain(app.screen.query_one("#project-detail").render()).split())
            assert "as of 47s ago: run 1 · retry 1 · approvals 1" in detail
            assert "gone without a word: its agents may still run" in detail
            assert "on restart its detached agents are re-adopted" in detail
            assert "none run" not in detail
    finally:
        await alpha.port.close()
        await beta.port.close()


async def test_a_project_never_heard_from_shows_its_figures_as_unknown_not_zero(fleet, make_app):
    """A scheduler the fleet cannot reach (or whose token it cannot have) has no figures:
    ``-`` in the table, ``unknown`` in the details, never tokens 0 and dispatch on."""
    unreached = tuple(
        p.model_copy(
            update={
                "link_state": "down" if p.name == WEB else "config",
                "age_s": None,
                "error": "connection refused at 127.0.0.1:8765 (nothing listens there)"
                if p.name == WEB
                else "token: $BILLING_TOKEN is not set",
                "running": 0,
                "retrying": 0,
                "approvals": 0,
                "totals": TokenUsage(),
                "rate_limits": None,
            }
        )
        if p.name in (WEB, BILLING)
        else p
        for p in fleet.current.projects
    )
    fleet.update(projects=unreached)
    app = make_app(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("P", "down")
        await settle(pilot)
        rows = cells(app.screen.query_one("#projects", KeyedTable))
        assert rows[WEB][1:6] == ["✗ down", "-", "-", "-", "-"]
        assert rows[BILLING][1:6] == ["✗ config", "-", "-", "-", "-"]
        assert rows[BILLING][-1] == "token: $BILLING_TOKEN is not set"
        assert rows[API][2:6] == ["1", "0", "⚑1", "22.0k"]
        detail = plain(app.screen.query_one("#project-detail").render())
        assert "dispatch   unknown" in detail and "tokens     unknown" in detail
        assert "limits     unknown" in detail and " on" not in detail
        await pilot.press("down")
        await settle(pilot)
        detail = " ".join(plain(app.screen.query_one("#project-detail").render()).split())
        assert "token setting" in detail and "the scheduler was not asked" in detail


async def test_a_duplicate_project_says_whose_scheduler_it_reaches_and_shows_nothing(
    fleet, make_app
):
    """A line that reaches the scheduler another line shows (docs/fleet.md, "One
    scheduler, one project"): its row says so, with no figures, and it is no trouble in
    the warnings."""
    said = "the same scheduler as line 2 (api): shown there only"
    projects = tuple(
        p.model_copy(
            update={
                "link_state": "duplicate",
                "age_s": None,
                "error": said,
                "running": 0,
                "retrying": 0,
                "approvals": 0,
                "totals": TokenUsage(),
                "rate_limits": None,
            }
        )
        if p.name == WEB
        else p
        for p in fleet.current.projects
    )
    fleet.update(projects=projects)
    app = make_app(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert all(WEB not in a.label + a.value for a in project_alerts(fleet.snapshot()))
        live = sum(1 for p in projects if p.link_state == "live")
        counted = f"{live}/{len(projects) - 1} projects live"  # the duplicate is not one
        assert counted in plain(status_text(fleet.snapshot(), NOW, Tones(), width=200))
        await pilot.press("P")
        await settle(pilot)
        table = app.screen.query_one("#projects", KeyedTable)
        rows = cells(table)
        assert rows[WEB][1:6] == ["= duplicate", "-", "-", "-", "-"]
        assert rows[WEB][-1] == said
        assert str(table.border_title).startswith(f"Projects ({live}/{len(projects) - 1} live)")


async def test_the_filter_key_cycles_and_every_pane_follows(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("F")
        await settle(pilot)
        assert app.project_filter == API
        assert ("showing project api only", "information") in notifications(app)
        assert set(cells(app.screen.query_one(IssuesTable))) == {"api/i-12", "api/i-14"}
        assert set(cells(app.screen.query_one(WorkersTable))) == {"api/i-12"}
        log = app.screen.query_one(EventLogView).plain_lines()
        assert log and all(" api " in line for line in log)
        tokens = plain(app.screen.query_one("#token-totals").render())
        assert "22,000" in tokens  # api's total, not the fleet's 85,800
        assert "showing api" in screen_text(app) and "4 Tokens · api" in screen_text(app)
        await pilot.press("q")  # quitting counts every project's workers
        assert isinstance(app.screen, Confirm)
        assert "3 worker(s)" in screen_text(app)
        await settle(pilot)  # the dialog's count follows each snapshot: still all of them
        assert "3 worker(s)" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("v")
        await settle(pilot)
        assert list(cells(app.screen.query_one("#approvals", KeyedTable))) == ["api/ap-1"]
        await pilot.press("escape", "F", "F")
        await settle(pilot)
        assert app.project_filter == BILLING
        assert set(cells(app.screen.query_one(IssuesTable))) == {"billing-service-backend/b-3"}
        await pilot.press("F")
        await settle(pilot)
        assert app.project_filter is None
        assert len(cells(app.screen.query_one(IssuesTable))) == 5
        assert len(app.screen.query_one(EventLogView).plain_lines()) == 4


async def test_one_inbox_oldest_first_answered_with_namespaced_ids(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        table = app.screen.query_one("#approvals", KeyedTable)
        assert column_keys(table)[0] == "project"
        rows = cells(table)
        assert list(rows) == ["billing-service-backend/ap-9", "api/ap-1", "web/ap-1"]
        assert [r[:2] for r in rows.values()] == [
            ["billing-s…", "BIL-3"],
            ["api", "#12"],
            ["web", "#12"],
        ]
        await pilot.press("a")
        await done(pilot)
        await pilot.press("down", "down", "d")
        await done(pilot)
    assert fleet.sent == [
        Approve(approval_id="billing-service-backend/ap-9"),
        Deny(approval_id="web/ap-1"),
    ]
    assert [(p, c.type) for p, c in fleet.routed] == [(BILLING, "approve"), (WEB, "deny")]
    assert fleet.routed[1][1] == Deny(approval_id="ap-1")


async def test_an_approval_of_a_stale_project_is_marked_before_a_key_is_pressed(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        table = app.screen.query_one("#approvals", KeyedTable)
        web, api = table.get_row("web/ap-1"), table.get_row("api/ap-1")
        # web is stale: its request reads dimmed, led by its link and the age of its data
        assert plain(web[4]) == "✗ stale 32s · npm install"
        assert plain(api[4]) == "make migrate"
        muted = app.tones.muted
        assert all(c.style == muted for c in (web[1], web[2], web[3], web[5], web[6]))
        assert not any(c.style == muted for c in (api[1], api[3]))
        assert table.select_key("web/ap-1")
        await settle(pilot)
        detail = plain(app.screen.query_one("#approval-detail").render())
        assert "link       ✗ stale 32s: an answer is not sent until it is live" in detail
        assert table.select_key("api/ap-1")
        await settle(pilot)
        assert "link " not in plain(app.screen.query_one("#approval-detail").render())


async def test_commands_carry_the_rows_issue_id_or_project_and_refusals_name_it(fleet, make_app):
    fleet.refuse[API] = "api is draining"
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.screen.query_one("#workers").focus()
        assert app.screen.query_one(WorkersTable).select_key("web/i-12")
        await pilot.press("i")  # web is stale: nothing to ask, it could not be sent
        assert not isinstance(app.screen, Confirm) and not fleet.sent
        stale = "web is stale (no word from it for 32 s): not sent; send it again once it is live"
        assert (stale, "error") in notifications(app)
        fleet.update(
            projects=tuple(
                p.model_copy(update={"link_state": "live", "age_s": 0.3, "error": None})
                for p in fleet.current.projects
            )
        )
        await settle(pilot)
        await pilot.press("i")
        assert isinstance(app.screen, Confirm)
        # identifiers repeat across projects (#12 in api and web): the dialog names which
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Interrupt the running turn of #12 in web?" in body, body
        await pilot.press("y")
        await done(pilot)
        assert fleet.sent[-1] == Interrupt(issue_id="web/i-12")
        assert fleet.routed[-1] == (WEB, Interrupt(issue_id="i-12"))
        assert app.screen.query_one(WorkersTable).select_key("api/i-12")
        await pilot.press("i", "y")
        await done(pilot)
        assert fleet.sent[-1] == Interrupt(issue_id="api/i-12")
        assert ("api: api is draining", "error") in notifications(app)
        # an approval key where nothing waits names where approvals wait, by project
        await pilot.press("1")
        assert app.screen.query_one(IssuesTable).select_key("api/i-14")
        await pilot.press("a")
        await pilot.pause()
        waiting = "waiting: api #12, billing-service-backend BIL-3, web #12 (v opens"
        assert any(waiting in message for message, _ in notifications(app))
        await pilot.press("2")
        # commands that name no issue go to the selected row's project
        assert app.screen.query_one(WorkersTable).select_key("web/i-12")
        await pilot.press("R")
        await done(pilot)
        assert fleet.sent[-1] == Refresh(project=WEB)
        # on the projects table: the selected project, by its own pause state, named first
        await pilot.press("P", "down", "down", "p")
        assert isinstance(app.screen, Confirm)
        body = str(app.screen.query_one("#dialog-body").render())
        assert body.startswith(f"Resume dispatch of {BILLING}?"), body
        await pilot.press("y")
        await done(pilot)
        assert fleet.sent[-1] == PauseDispatch(paused=False, project=BILLING)
        assert fleet.routed[-1] == (BILLING, PauseDispatch(paused=False))


async def test_without_a_selection_the_filter_decides_else_choose_a_project(make_app):
    empty = fleet_snapshot().model_copy(
        update={"issues": (), "running": (), "retrying": (), "approvals": ()}
    )
    fleet = FleetTestPort(empty)
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await done(pilot)
        assert fleet.sent == []
        assert (CHOOSE_A_PROJECT, "warning") in notifications(app)
        await pilot.press("F", "F", "p")  # filtered by web: asked by its name
        assert isinstance(app.screen, Confirm)
        body = str(app.screen.query_one("#dialog-body").render())
        assert body.startswith("Pause dispatch of web?"), body
        await pilot.press("y")
        await done(pilot)
        assert fleet.sent == [PauseDispatch(paused=True, project=WEB)]


async def test_a_fleets_pause_names_the_focused_panes_project_never_one_selected_before(
    fleet, make_app
):
    from symphony_tui.console.screens.modals import Choose

    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # a web worker selected, then the focus moves to the event log: that row is not
        # what the operator looks at now, so which project is asked, not assumed
        app.screen.query_one("#workers").focus()
        assert app.screen.query_one(WorkersTable).select_key("web/i-12")
        projects = fleet.current.projects  # and a second line reaching api's scheduler
        again = projects[0].model_copy(update={"name": "api-again", "link_state": "duplicate"})
        fleet.update(projects=(*projects, again))
        await pilot.press("3", "p")
        await settle(pilot)
        assert isinstance(app.screen, Choose) and not fleet.sent
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Pause or resume which?" in body
        # the live projects first: web (stale) would refuse it
        shown = screen_text(app)
        assert shown.index(BILLING) < shown.index("pause its dispatch (stale)")
        assert "api-again" not in shown  # its scheduler is api's: not offered twice
        await pilot.press("down", "enter")  # the second: billing, paused
        await done(pilot)
        assert fleet.sent == [PauseDispatch(paused=False, project=BILLING)]
        # the token pane has no rows either
        await pilot.press("4", "p")
        await settle(pilot)
        assert isinstance(app.screen, Choose)
        await pilot.press("escape")
        await settle(pilot)
        assert len(fleet.sent) == 1
        # back on the workers table: its selected row's project, named before it is sent
        await pilot.press("2", "p")
        await settle(pilot)
        assert isinstance(app.screen, Confirm)
        body = str(app.screen.query_one("#dialog-body").render())
        assert body.startswith("Pause dispatch of web?"), body
        await pilot.press("n")
        await done(pilot)
        assert len(fleet.sent) == 1
        await pilot.press("p", "y")
        await done(pilot)
        assert fleet.sent[-1] == PauseDispatch(paused=True, project=WEB)


async def test_hosts_of_two_projects_with_one_name_stay_apart(make_app):
    hosts = (
        HostRow(name="build-1", running=1, project=API),
        HostRow(name="build-1", running=0, project=WEB),
    )
    fleet = FleetTestPort(fleet_snapshot().model_copy(update={"hosts": hosts}))
    app = make_app(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        # project and host columns at 80 columns: the last event keeps its least 8 cells
        workers = app.screen.query_one(WorkersTable)
        assert column_keys(workers)[1:4] == ["project", "issue", "host"]
        widths = [c.width + 2 * workers.cell_padding for c in workers.columns.values()]
        assert workers.column_width("last") >= 8
        assert sum(widths) <= workers.scrollable_content_region.width
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, HostsScreen)
        assert list(cells(app.screen.query_one("#hosts", KeyedTable))) == [
            "api/build-1",
            "web/build-1",
        ]
        await pilot.press("down", "d", "y")
        await done(pilot)
        assert fleet.sent == [DrainHost(host="build-1", project=WEB)]
        assert fleet.routed == [(WEB, DrainHost(host="build-1"))]


def test_identifiers_repeated_across_projects_never_pick_one_at_random():
    snap = fleet_snapshot()
    assert LogFilter.parse("#12", snap).issue_id is None  # which one? a word then
    assert LogFilter.parse("#12", snap).words == ("#12",)
    assert LogFilter.parse("web/#12", snap).issue_id == "web/i-12"
    assert LogFilter.parse("#12", snap, project=API).issue_id == "api/i-12"
    assert LogFilter.parse("bil-3", snap).issue_id == "billing-service-backend/b-3"


def test_a_filter_on_a_project_that_left_the_fleet_is_dropped():
    from symphony_tui.console.state import ConsoleState

    state = ConsoleState(FleetTestPort(), detach_only=True, notify=lambda: None)  # type: ignore[arg-type]
    snap = fleet_snapshot()
    state.project_filter = WEB
    shown = state.take(snap)
    assert [r.issue_id for r in shown.running] == ["web/i-12"]
    assert state.take(snap) is shown  # the same input: the same snapshot shown
    gone = snap.model_copy(update={"projects": snap.projects[:1] + snap.projects[2:]})
    assert state.take(gone) is gone and state.project_filter is None


def test_narrowing_and_the_project_of_a_row():
    snap = fleet_snapshot()
    web = narrowed(snap, WEB)
    assert [r.issue_id for r in web.running] == ["web/i-12"]
    assert [r.issue_id for r in web.retrying] == ["web/i-15"]
    assert [a.id for a in web.approvals] == ["web/ap-1"]
    assert web.totals.total_tokens == 54_000 and web.projects == snap.projects
    # the project's own figures, not the fleet's: capacity, rate, running time, history
    assert (web.max_concurrent_agents, web.token_rate_per_min, web.seconds_running) == (
        4,
        1500,
        900,
    )
    assert web.token_history == (0, 200, 1500) and web.runs_unpriced == 1
    assert narrowed(snap, None) is snap and narrowed(snap, "nope") is snap
    assert project_of(snap, "web/i-12") == WEB
    assert project_of(snap, "billing-service-backend/old-9") == BILLING  # by its prefix
    assert project_of(snap, "elsewhere/x") is None


def test_the_status_line_says_a_fleet_in_short_words_when_it_would_be_cut():
    snap = fleet_snapshot()
    now = snap.generated_at
    wide = status_text(snap, now, Tones(), width=120).plain
    assert "3 approvals" in wide and "2/3 projects live" in wide and "P projects" in wide
    narrow = status_text(snap, now, Tones(), width=76)
    assert narrow.cell_len <= 76, narrow.plain
    assert "⚑ 3 │" in narrow.plain and "2/3 live" in narrow.plain and "1 paused" in narrow.plain
    filtered = status_text(narrowed(snap, WEB), now, Tones(), showing=WEB, width=76).plain
    assert "1/4 running" in filtered and "⌂ 2/3 live · web" in filtered


def test_a_clean_stop_warns_with_the_stopped_mark_in_the_warning_tone_not_as_an_error():
    from rich.style import Style

    from symphony_tui.console.widgets.status import alert_text

    snap = fleet_snapshot()
    stopped = {"link_state": "stopped", "error": None, "stop_reason": "stopped by SIGTERM"}
    snap = snap.model_copy(
        update={
            "projects": tuple(
                p.model_copy(update=stopped) if p.name == WEB else p for p in snap.projects
            )
        }
    )
    tones = Tones(warning=Style(color="yellow"), error=Style(color="red"))
    alert = alert_text(snap, snap.generated_at, tones)
    assert alert is not None
    assert alert.plain == "■ project web stopped: stopped by SIGTERM · last update 32s ago"
    label = next(span for span in alert.spans if span.end == len("■ project web stopped: "))
    assert label.style == tones.warning
    # two stopped: one line, the same mark and tone
    two = snap.model_copy(
        update={
            "projects": tuple(
                p.model_copy(update=stopped) if p.name == API else p for p in snap.projects
            )
        }
    )
    alert = alert_text(two, two.generated_at, tones)
    assert alert is not None and alert.plain.startswith("■ 2 projects stopped: api, web")
    assert alert.spans[0].style == tones.warning
    # the projects table's link cell likewise
    from symphony_tui.console.screens.projects import link_cell

    cell = link_cell(two.projects[1], tones)
    assert (cell.plain, cell.style) == ("■ stopped 32s", tones.warning)


def test_the_status_line_names_the_paused_projects_as_the_width_allows():
    snap = fleet_snapshot()  # billing-service-backend is paused
    now = snap.generated_at
    wide = status_text(snap, now, Tones(), width=120).plain
    assert "⏸ billing-service-backend paused" in wide
    at_80 = status_text(snap, now, Tones(), width=80).plain
    assert at_80.endswith("⏸ billing-ser… paused") and len(at_80) <= 80
    two = snap.model_copy(
        update={
            "projects": tuple(
                p.model_copy(update={"dispatch_paused": True}) if p.name == WEB else p
                for p in snap.projects
            )
        }
    )
    wide = status_text(two, now, Tones(), width=120).plain
    assert wide.endswith("⏸ 2 paused: web, billing-service-backend")
    assert status_text(two, now, Tones(), width=80).plain.endswith("⏸ 2 paused: web, +1")
    assert status_text(two, now, Tones(), width=60).plain.endswith("⏸ 2 paused")
    # the one project shown is named beside it
    shown = status_text(narrowed(snap, BILLING), now, Tones(), showing=BILLING, width=160)
    assert shown.plain.endswith("showing billing-service-backend · ⏸ paused · P projects")


async def test_the_audit_screen_names_each_entry_s_project_and_via_a_pause_too(fleet, make_app):
    from textual.widgets import DataTable

    from symphony_tui.console.screens.audit import AuditScreen
    from symphony_tui.domain.audit import AuditEntry

    via = "fleet (HTTP API from 127.0.0.1 pid 4242 (python3) uid 1000 with the control token)"
    fleet.audit = [
        AuditEntry(
            at=NOW, who="ann@box", via=f"{WEB}: {via}", what="approve", issue=f"{WEB}/#12",
            detail='approval_id="ap-1"', message="#12: approved", project=WEB,
        ),
        AuditEntry(
            at=NOW, who="ann@box", via=f"{API}: {via}", what="pause_dispatch",
            detail="paused=true", message="dispatch paused", project=API,
        ),
    ]  # fmt: skip
    app = make_app(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("H")
        await done(pilot)
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)
        table = app.screen.query_one("#audit", DataTable)
        assert [str(c.label) for c in table.columns.values()] == [
            "When (UTC)", "Project", "Who", "What", "Issue", "Result", "Via", "Message"
        ]  # fmt: skip
        approve, pause = ([plain(c) for c in table.get_row_at(i)] for i in range(2))
        assert approve[1:5] == [WEB, "ann@box", "approve", "#12"]
        assert pause[1:5] == [API, "ann@box", "pause dispatch", ""]
        assert approve[6] == pause[6] == "fleet (HTTP API from 12…"
        assert app.screen.selected_issue_id() is None  # the pause names no issue
        table.move_cursor(row=0)  # the approve's issue is web's #12, not api's
        assert app.screen.selected_issue_id() == f"{WEB}/i-12"


def crowded(fleet: FleetTestPort) -> None:
    """Two stopped projects (listed first), then web stale (the sample's), one more stale
    and one down, and a host down: more warnings than the alert line's three rows."""
    rows = list(fleet.current.projects)
    gone = [
        rows[0].model_copy(
            update={"name": name, "link_state": "stopped", "error": "process gone", "age_s": 47.0}
        )
        for name in ("old-a", "old-b")
    ]
    lost = [
        rows[0].model_copy(update={"name": name, "link_state": state, "age_s": 9.0})
        for name, state in (("beta", "stale"), ("gamma", "down"))
    ]
    down = HostRow(name="build-2", up=False, last_error="connection refused", project=API)
    fleet.update(projects=(*gone, *rows, *lost), hosts=(down,))


async def test_warnings_most_urgent_first_folded_and_fitted_at_80x24(fleet, make_app):
    crowded(fleet)
    app = make_app(fleet)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        alert = app.screen.query_one("#alert-line")
        said = app.screen._alert.plain.split("\n")
        # stale before down, down before stopped; one line per kind; each fits its row
        assert said == [
            "✗ 2 projects stale: web, beta",
            "✗ project gamma down: no update · last update 9s ago",
            "+2 more: host build-2 down, 2 projects stopped",
        ]
        assert alert.size.height == 3


@pytest.mark.parametrize("size", [(80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_fleet_warnings_screen(fleet, make_app, svg_snapshot, size):
    crowded(fleet)
    assert await shoot(make_app(fleet), size) == svg_snapshot


SIZES = [(80, 24), (120, 36)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_fleet_main_screen(fleet, make_app, svg_snapshot, size):
    assert await shoot(make_app(fleet), size) == svg_snapshot


async def test_fleet_projects_screen(fleet, make_app, svg_snapshot):
    assert await shoot(make_app(fleet), (80, 24), keys=("P", "down")) == svg_snapshot


async def test_quitting_a_fleet_says_its_schedulers_keep_running(fleet, make_app, capsys):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, Confirm)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "Detach from the fleet? Its schedulers and their" in body
        await pilot.press("y")
        await done(pilot)
    assert app.return_code == 0
    assert "detached; the schedulers keep running" in capsys.readouterr().err


async def quit_entry(pilot) -> str:
    """The command palette's quit entry: its title and help line."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await settle(pilot)
    await pilot.press(*"quit")
    for _ in range(20):  # the palette searches in a worker of its own
        await pilot.pause(0.05)
        options = pilot.app.screen.query_one(CommandList)
        if options.option_count:
            break
    prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    (entry,) = [p for p in prompts if p.startswith("Quit (q)")]
    return entry


async def test_a_fleets_quit_entry_says_its_schedulers_keep_running(fleet, port, make_app):
    """Quitting a fleet console only closes the console: its palette entry and help line
    say so, while one scheduler's console still offers to stop its agents."""
    async with make_app(fleet).run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = await quit_entry(pilot)
    assert "schedulers and their agents keep running" in entry and "stop" not in entry, entry
    async with make_app(port).run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = await quit_entry(pilot)
    assert "asks: stop them, or leave them running and detach" in entry, entry
    fleet_text = " ".join(str(c) for c in help_table(str, fleet=True).columns[1]._cells)
    assert "Quit the fleet console: its schedulers and their agents keep running" in fleet_text
    assert "stop them" not in fleet_text
    assert "stop them" in " ".join(str(c) for c in help_table(str).columns[1]._cells)


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
async def test_an_exported_log_names_each_events_project(fleet, make_app, tmp_path, suffix):
    """The log shows each line's project (``#12`` is api's and web's); so does its export."""
    target = tmp_path / f"log{suffix}"
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press(*str(target), "enter")
        await done(pilot)
    lines = target.read_text().splitlines()
    assert len(lines) == len(fleet.events)
    if suffix == ".txt":
        assert [line.split()[1:3] for line in lines] == [
            [e.project, e.issue_identifier] for e in fleet.events
        ]
    else:
        rows = [json.loads(line) for line in lines]
        assert [(r["project"], r["issue_id"]) for r in rows] == [
            (e.project, e.issue_id) for e in fleet.events
        ]


async def test_skipped_fleet_file_lines_are_said_when_the_console_opens(fleet, make_app):
    line = "skipped fleet line 3: bogus://x: not a target (a WORKFLOW.md path, http(s)://, ssh://)"
    app = make_app(fleet, notices=(line,), notices_title="fleet file")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        said = [(n.title, n.message) for n in app._notifications]
        assert ("fleet file", line) in said


def test_per_project_token_lines_fit_a_narrow_pane_with_their_spend():
    snap = fleet_snapshot()
    priced = tuple(
        p.model_copy(update={"totals": p.totals.model_copy(update={"cost_usd": 12.5 * (n + 1)})})
        for n, p in enumerate(snap.projects)
    )
    snap = snap.model_copy(update={"projects": priced})
    wide = projects_text(snap, Tones()).plain.splitlines()
    assert wide[1].startswith("api ") and "42%" in wide[1] and wide[1].endswith("$12.50")
    narrow = projects_text(snap, Tones(), width=26).plain.splitlines()
    assert len(narrow) == len(wide)  # one line a project: nothing wraps
    assert all(len(line) <= 26 for line in narrow), narrow
    assert [line.split()[-1] for line in narrow[1:]] == ["$12.50", "$25.00", "$37.50", "$75.00"]
    assert narrow[3] == "billi…    9.8k      $37.50"  # the name gave way, not the figures


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_per_issue_token_lines_never_wrap_in_a_fleet(fleet, make_app, size):
    """One run a line: what does not fit the pane leaves out the input/output split."""
    app = make_app(fleet)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        workers = app.screen.query_one("#token-workers")
        lines = plain(workers.render()).splitlines()
        width = workers.content_size.width
        assert workers.content_size.height == len(lines) == 3, lines
        assert all(len(line) <= width for line in lines), (width, lines)
        assert lines[0].split() == ["web", "#12", "54.0k"]


def test_a_cut_per_issue_token_line_keeps_its_spend():
    snap = fleet_snapshot()
    running = tuple(r.model_copy(update={"spend_usd": 1.25}) for r in snap.running)
    snap = snap.model_copy(update={"running": running})
    wide = per_worker_text(snap, Tones()).plain.splitlines()
    assert wide[0] == "web    #12         54.0k in 50.0k out 4.0k $1.25"
    narrow = per_worker_text(snap, Tones(), width=39).plain.splitlines()
    assert narrow[0] == "web    #12         54.0k $1.25"
    assert per_worker_text(snap, Tones(), width=48).plain.splitlines()[0] == wide[0]


async def test_a_fleets_token_pane_repaints_at_most_once_a_second(fleet, make_app):
    now = [NOW]
    app = make_app(fleet, clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        def api_line() -> str:
            text = plain(app.screen.query_one("#token-projects").render())
            return next(line for line in text.splitlines() if line.startswith("api "))

        assert "22.0k" in api_line()
        more = tuple(
            p.model_copy(update={"totals": p.totals.model_copy(update={"total_tokens": 31_000})})
            if p.name == API
            else p
            for p in fleet.current.projects
        )
        now[0] = NOW + timedelta(seconds=0.5)
        fleet.update(projects=more, generated_at=now[0])
        await settle(pilot)
        assert "22.0k" in api_line()  # held: painted half a second ago
        assert app.screen.holding  # so the next tick shows the screen again
        now[0] = NOW + timedelta(seconds=1.2)
        fleet.update(generated_at=now[0])
        await settle(pilot)
        assert "31.0k" in api_line()


def test_a_done_issue_reads_done_in_the_fleet_as_in_its_own_console():
    """``completed`` holds identifiers; the fleet prefixes them with the project, and an
    issue's id is not its identifier (``demo-1`` / ``DEMO-1``)."""
    from symphony_tui.console.widgets.issues import issue_rows
    from symphony_tui.domain import IssueRow, Snapshot
    from symphony_tui.domain.snapshot import ProjectRow
    from symphony_tui.fleet.merge import merge, parts_of

    done = IssueRow(issue_id="demo-1", identifier="DEMO-1", title="t", state="Done")
    todo = IssueRow(issue_id="demo-2", identifier="DEMO-2", title="t", state="Todo")
    own = Snapshot(generated_at=NOW, issues=(done, todo), completed=("DEMO-1",))
    alone = dict(issue_rows(own, Tones()))
    assert "done" in alone["demo-1"][3].plain and "done" not in alone["demo-2"][3].plain
    projects = (ProjectRow(name="api", target="a"), ProjectRow(name="web", target="w"))
    fleet = merge([parts_of("api", own), parts_of("web", own)], projects)
    rows = dict(issue_rows(fleet, Tones()))
    for project in ("api", "web"):
        assert "done" in rows[f"{project}/demo-1"][3].plain
        assert "done" not in rows[f"{project}/demo-2"][3].plain


def test_names_cut_alike_keep_both_ends_in_every_pane():
    """Two URL targets of one host are named by their addresses: cut at the end they read
    the same (``127.0.0.1…``), so they keep their start and end; a name that reads apart
    anyway is cut at its end."""
    from symphony_tui.console import fmt
    from symphony_tui.console.fleet import fit_name
    from symphony_tui.console.screens.approvals import approval_rows
    from symphony_tui.console.widgets.issues import issue_rows
    from symphony_tui.console.widgets.workers import worker_rows
    from symphony_tui.domain import AgentEvent, EventKind

    names = ("127.0.0.1:37347", "127.0.0.1:45895", "billing-service-backend", "api")
    assert [fit_name(n, 10, names) for n in names] == [
        "127.0…7347",
        "127.0…5895",
        "billing-s…",
        "api",
    ]
    assert fit_name("frontend-app", 7, ("frontend-app", "frontend-api")) == "fro…app"
    assert fit_name("frontend-app", 7) == "fronte…"  # no other name to tell it from
    assert fit_name(None, 7) == "-"

    rename = {API: "127.0.0.1:37347", WEB: "127.0.0.1:45895"}

    def renamed(rows):
        return tuple(
            r.model_copy(update={"project": rename.get(r.project, r.project)}) for r in rows
        )

    snap = fleet_snapshot()
    snap = snap.model_copy(
        update={
            "issues": renamed(snap.issues),
            "running": renamed(snap.running),
            "approvals": renamed(snap.approvals),
            "projects": tuple(
                p.model_copy(update={"name": rename.get(p.name, p.name)}) for p in snap.projects
            ),
        }
    )
    tones = Tones()
    issues = {k: row[0].plain for k, row in issue_rows(snap, tones, fleet=True)}
    assert issues["api/i-12"] == "127.0…7347" and issues["web/i-12"] == "127.0…5895"
    workers = {k: row[1].plain for k, row in worker_rows(snap, NOW, tones, fleet=True)}
    assert workers["api/i-12"] == "127.0…7347" and workers["web/i-12"] == "127.0…5895"
    assert workers["billing-service-backend/b-3"] == "billing-s…"
    approvals = {k: row[0].plain for k, row in approval_rows(snap, NOW, tones, fleet=True)}
    assert approvals["api/ap-1"] == "127.0…7347" and approvals["web/ap-1"] == "127.0…5895"
    from symphony_tui.console.screens.projects import project_rows

    table = {k: row[0].plain for k, row in project_rows(snap, tones, None, name_width=12)}
    assert table["127.0.0.1:37347"] == "127.0.0.1:3…"  # apart at 12 cells: cut at the end
    table = {k: row[0].plain for k, row in project_rows(snap, tones, None, name_width=9)}
    assert [table["127.0.0.1:37347"], table["127.0.0.1:45895"]] == ["127.…7347", "127.…5895"]
    event = AgentEvent(kind=EventKind.MESSAGE, message="hi", project="127.0.0.1:45895")
    names = tuple(p.name for p in snap.projects)
    assert " 127…895 " in fmt.event_line(event, tones, names=names).plain


async def test_the_log_tells_apart_names_cut_alike_once_a_project_joins(fleet, make_app):
    app = make_app(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert any(" billin… BIL-3 " in line for line in log.plain_lines())
        projects = fleet.current.projects
        joined = projects[0].model_copy(update={"name": "billing-service-worker"})
        fleet.update(projects=(*projects, joined), generated_at=NOW + timedelta(seconds=1))
        await settle(pilot)
        lines = log.plain_lines()
        assert any(" bil…end BIL-3 " in line for line in lines)
        assert not any("billin…" in line for line in lines)


def test_per_project_token_lines_leave_out_duplicates_and_never_say_0_for_unknown():
    snap = fleet_snapshot()
    api = snap.projects[0]
    again = api.model_copy(update={"name": "api-again", "link_state": "duplicate"})
    never = api.model_copy(
        update={"name": "new", "link_state": "down", "age_s": None, "error": "refused"}
    )
    assert not never.heard
    snap = snap.model_copy(update={"projects": (*snap.projects, again, never)})
    lines = projects_text(snap, Tones()).plain.splitlines()
    assert not any(line.startswith("api-again") for line in lines)
    assert [line.split() for line in lines if line.startswith("new ")] == [["new", "-"]]
