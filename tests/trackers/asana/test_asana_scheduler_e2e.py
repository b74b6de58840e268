"""The real Orchestrator with the Asana tracker against FakeAsana, from a WORKFLOW.md written
as the reference's Asana adapter documents it (``tracker.provider`` with ``project_gid`` and
``api_key: $ASANA_PAT``; section names as states).

The agent comments on its task with ``asana_api`` and moves it to Review with the state tool
(a section move); a To do task whose dependency is open is not dispatched until the
dependency is done; a person moving a running task to Done stops it; a 429 pauses polling
until ``Retry-After`` (nothing is sent meanwhile) and keeps the workers."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.asana import AsanaTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.fake_asana import FakeAsana
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.trackers.jira.test_jira_scheduler_e2e import advance_until, until

from .conftest import PROJECT, TOKEN

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def write_workflow(root: Path, fake: FakeAsana) -> Path:
    front = textwrap.dedent(
        f"""\
        tracker:
          kind: asana
          provider:
            endpoint: {fake.url}
            api_key: $ASANA_PAT
            project_gid: "{PROJECT}"
          active_states: ["To do", "Doing"]
          terminal_states: ["Done"]
        workspace:
          root: ws
        polling:
          interval_ms: 30000
        agent:
          max_concurrent_agents: 10
        codex:
          stall_timeout_ms: 0
        """
    )
    path = root / "WORKFLOW.md"
    path.write_text(f"---\n{front}---\nWork on {{{{ issue.title }}}}\n")
    return path


async def test_asana_dispatch_tools_dependencies_reconcile_and_429(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    fake = FakeAsana(token=TOKEN, project=PROJECT, clock=clock.now).start()
    seen: dict[str, list] = {"tools": [], "comment": [], "move": []}

    async def script(session, prompt, turn):
        issue = session.host.issue
        if issue.title.startswith("hang"):
            return await session.wait_interrupt()
        seen["tools"].append([t.name for t in session.host.tools])
        seen["comment"].append(
            await session.host.call_tool(
                "asana_api",
                {"method": "POST", "path": f"/tasks/{issue.id}/stories",
                 "body": {"data": {"text": "ready for review"}}},
            )
        )  # fmt: skip
        seen["move"].append(
            await session.host.call_tool("symphony_set_issue_state", {"state": "Review"})
        )
        return TurnResult(TurnStatus.COMPLETED)

    orch: Orchestrator | None = None
    try:
        blocker = fake.add_task("hang: blocker", section="Doing")
        worker = fake.add_task("work", section="To do")
        waiting = fake.add_task("waits", section="To do", dependencies=[blocker.gid])
        hanging = fake.add_task("hang: long", section="To do")
        store = WorkflowStore(write_workflow(tmp_path, fake), env={"ASANA_PAT": TOKEN})
        store.load_initial()
        tracker = AsanaTracker(lambda: store.current.settings, clock=clock.now)
        backend = ScriptedBackend(script)
        orch = Orchestrator(
            store,
            tracker,
            WorkspaceManager(lambda: store.current.settings),
            lambda name: backend,
            clock=clock,
            watch_workflow=False,
        )
        await orch.start()
        await until(lambda: len(seen["move"]) == 1 and worker.gid not in orch.running)
        assert set(orch.running) == {blocker.gid, hanging.gid}
        assert seen["tools"][0] == ["symphony_set_issue_state", "asana_api"]
        assert seen["comment"][0].success and seen["move"][0].success
        assert json.loads(seen["move"][0].text)["state"] == "Review"
        assert fake.tasks[worker.gid].section == "Review"
        assert fake.tasks[worker.gid].stories[0]["text"] == "ready for review"

        # A person moves the blocker to Done: it stops, and the waiting task runs.
        fake.update(blocker.gid, section="Done")
        await advance_until(
            clock, lambda: blocker.gid not in orch.running and len(seen["move"]) == 2
        )
        assert fake.tasks[waiting.gid].section == "Review"

        fake.rate_limit(150)
        ticks = orch.ticks
        await advance_until(
            clock, lambda: orch.ticks > ticks and orch.snapshot().tracker_paused_until is not None
        )
        assert "Asana rate limit (HTTP 429)" in (orch.snapshot().tracker_error or "")
        sent = len(fake.requests)
        ticks = orch.ticks
        await advance_until(clock, lambda: orch.ticks > ticks)
        assert len(fake.requests) == sent and hanging.gid in orch.running
        await advance_until(
            clock,
            lambda: orch.snapshot().tracker_paused_until is None and len(fake.requests) > sent,
        )
        assert hanging.gid in orch.running
        assert not fake.violations, fake.violations[:5]
    finally:
        if orch is not None:
            await orch.shutdown()
        fake.stop()
