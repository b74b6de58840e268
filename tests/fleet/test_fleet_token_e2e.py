"""End to end with a real headless scheduler (demo agent) that requires its API token and
takes it from its operator's variable (``server.require_token``, ``server.auth_token_env``),
watched through its workflow target: a fleet without the token reads it refused, with the
hint for that target; one given ``--token-env`` follows it live, and sees its SIGTERM as a
clean stop; the refused one, which never heard from it, does not read it lost."""

from __future__ import annotations

import asyncio

import pytest

from symphony_tui.domain.snapshot import ProjectRow
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.port import FleetPort
from tests.api.remote_scheduler import HeadlessScheduler, issues_yaml
from tests.fleet.test_fleet_e2e import until

pytestmark = [pytest.mark.slow]

SECURED = "server:\n  require_token: true\n  auth_token_env: SEC_TOKEN\n"


async def test_a_workflow_target_takes_the_token_flag_and_hears_the_stop(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("SYMPHONY_API_TOKEN", raising=False)
    monkeypatch.setenv("SEC_TOKEN", "the-sec-token")
    sched = await asyncio.to_thread(
        HeadlessScheduler,
        tmp_path,
        issues_yaml(1, "Steady work. [demo: slow, two-turns]"),
        state_home=state,
        name="sec",
        front_matter=SECURED,
        env_extra={"SEC_TOKEN": "the-sec-token"},
    )
    bare = FleetPort([tg.parse(str(sched.workflow))], local_every_s=0.5)
    flagged = FleetPort([tg.parse(str(sched.workflow), token_env="SEC_TOKEN")], local_every_s=0.5)
    runners = [asyncio.create_task(bare.run()), asyncio.create_task(flagged.run())]
    try:

        def row(fleet: FleetPort) -> ProjectRow:
            rows = fleet.snapshot().projects
            return rows[0] if rows else ProjectRow(name="", target="")

        await until(lambda: row(flagged).link_state == "live", 60, "sec live", flagged)
        await until(lambda: row(bare).link_state == "refused", 30, "sec refused", bare)
        assert row(bare).error is not None and row(bare).error.endswith(
            "401: the scheduler needs its API token "
            "(symphony-tui fleet --token-env VAR or --token-file PATH, or $SYMPHONY_API_TOKEN)"
        )
        await until(lambda: row(flagged).running == 1, 60, "a run on sec", flagged)

        await asyncio.to_thread(sched.stop)  # SIGTERM
        await until(lambda: row(flagged).link_state == "stopped", 30, "sec stopped", flagged)
        stopped = row(flagged)
        assert stopped.error is None and stopped.stop_reason, stopped
        await until(lambda: row(bare).link_state == "down", 30, "sec gone, unheard", bare)
        assert (row(bare).error or "").endswith("no longer serves; this fleet never heard from it")
        assert not row(bare).heard
    finally:
        for fleet in (bare, flagged):
            await fleet.close()
        for runner in runners:
            runner.cancel()
        await asyncio.to_thread(sched.stop)
