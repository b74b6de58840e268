"""The real Orchestrator with the Linear tracker against FakeLinear: 120 candidates, 60 running.

Dispatch fills 60 slots from three candidate pages; every reconcile refreshes the 60 running
ids in two requests (50 + 10) and stops nobody as missing; issues moved in Linear are stopped
(terminal / non-active) and their slots refilled; a 429 pauses polling until the stated reset
(visible in the snapshot and the event log), keeps every worker, sends nothing meanwhile, and
afterwards everything is still there.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.fake_linear import FakeLinear
from symphony_tui_testing.scripted_backend import ScriptedBackend, hang
from tests.helpers import until

KEY = "lin_api_E2E_3b9d0c7e5a1f"
T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def write_workflow(root: Path, fake: FakeLinear) -> Path:
    path = root / "WORKFLOW.md"
    front = textwrap.dedent(
        f"""\
        tracker:
          kind: linear
          endpoint: {fake.url}
          api_key: $SYMPHONY_E2E_LINEAR_KEY
          project_slug: {fake.project_slug}
        workspace:
          root: ws
        polling:
          interval_ms: 30000
        agent:
          max_concurrent_agents: 60
        codex:
          stall_timeout_ms: 0
        """
    )
    path.write_text(f"---\n{front}---\nWork on {{{{ issue.identifier }}}}\n")
    return path


async def test_120_candidates_60_running_dispatch_refresh_reconcile_and_429(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    fake = FakeLinear(api_key=KEY, clock=clock.now).start()
    orch: Orchestrator | None = None
    try:
        ids = fake.add_issues(120, state="Todo")
        store = WorkflowStore(write_workflow(tmp_path, fake), env={"SYMPHONY_E2E_LINEAR_KEY": KEY})
        store.load_initial()
        tracker = LinearTracker(lambda: store.current.settings, clock=clock.now)
        backend = ScriptedBackend(hang)
        orch = Orchestrator(
            store,
            tracker,
            WorkspaceManager(lambda: store.current.settings),
            lambda name: backend,
            clock=clock,
            watch_workflow=False,
        )

        # Tick 1: three candidate pages, 60 dispatched (oldest first), none refreshed yet.
        await orch.start()
        await until(lambda: orch.ticks >= 1 and len(backend.sessions) == 60)
        assert set(orch.running) == set(ids[:60])
        pages = fake.graphql_requests("SymphonyLinearIssuesByStates")
        assert [p.variables["stateNames"] for p in pages][-3:] == [["Todo", "In Progress"]] * 3
        assert all(r.headers["authorization"] == KEY for r in fake.requests)

        # Tick 2: refresh 60 running ids in two requests; nobody stops, nobody new starts.
        before = len(fake.requests)
        await clock.advance(30)
        await until(lambda: orch.ticks >= 2)
        refresh = fake.graphql_requests("SymphonyLinearIssuesByIds")
        assert sorted(len(r.variables["ids"]) for r in refresh) == [10, 50]
        assert set(orch.running) == set(ids[:60])
        assert len(fake.requests) == before + 2 + 3  # refresh (2) + candidates (3)

        # A human moves three running issues in Linear.
        fake.move_issue(ids[0], "Done")  # terminal: stop and clean up
        fake.move_issue(ids[1], "Backlog")  # not active: stop, keep workspace
        fake.move_issue(ids[2], "In Progress")  # still active: keeps running, state updated
        await clock.advance(30)
        await until(lambda: orch.ticks >= 3)
        await until(lambda: ids[0] not in orch.running and ids[1] not in orch.running)
        assert orch.running[ids[2]].issue.state == "In Progress"
        orch.request_refresh()
        await until(lambda: len(orch.running) == 60)
        assert ids[60] in orch.running and ids[61] in orch.running

        # Tick: 429 with a reset 75 s ahead.
        reset = clock.now() + timedelta(seconds=75)
        fake.rate_limit(reset)
        ticks = orch.ticks
        await clock.advance(30)
        await until(lambda: orch.ticks > ticks)
        snap = orch.snapshot()
        assert snap.tracker_paused_until == reset  # the console shows this
        assert tracker.paused_until == reset
        assert any("paused until" in e.message for e in orch.events_since(0))
        assert len(orch.running) == 60  # refresh failure keeps workers
        limited = [r for r in fake.requests if r.status == 429]
        assert len(limited) == 1

        # Next tick, still before the reset: nothing is sent at all.
        sent = len(fake.requests)
        ticks = orch.ticks
        await clock.advance(30)
        await until(lambda: orch.ticks > ticks)
        assert len(fake.requests) == sent
        assert len(orch.running) == 60

        # After the reset: polling resumes and nothing was lost.
        ticks = orch.ticks
        await clock.advance(30)
        await until(lambda: orch.ticks > ticks)
        assert clock.now() > reset
        assert orch.snapshot().tracker_paused_until is None
        assert tracker.paused_until is None
        assert len(orch.running) == 60
        assert len(fake.requests) > sent
        active = {i for i in ids if fake.issue(i)["state"] in ("Todo", "In Progress")}
        assert active <= set(orch.known)  # all 118 active issues are known again

        # Across the whole run nobody was stopped as missing, and only the two moved issues
        # were stopped by reconciliation.
        messages = [e.message for e in orch.events_since(0)]
        assert not [m for m in messages if "no longer returned" in m]
        stopped = [m for m in messages if m.startswith("stopping ")]
        ident = {fake.issue(i)["identifier"]: i for i in ids}
        assert {m.split(":")[0].removeprefix("stopping ") for m in stopped} == {
            fake.issue(ids[0])["identifier"],
            fake.issue(ids[1])["identifier"],
        }, stopped
        assert len(ident) == 120
    finally:
        if orch is not None:
            await orch.shutdown()
        fake.stop()
