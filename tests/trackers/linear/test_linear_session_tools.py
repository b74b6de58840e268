"""A session on a Linear project gets both client-side tools through the scheduler: the
tracker-state tool moves the issue with ``issueUpdate`` and ``linear_graphql`` runs a query
with the configured auth (spec §10.5); GraphQL errors come back as ``success=false``."""

from __future__ import annotations

import json
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.fake_linear import FakeLinear
from symphony_tui_testing.scripted_backend import ScriptedBackend

from .test_linear_scheduler_e2e import KEY, T0, until, write_workflow


async def test_linear_session_tools_through_the_scheduler(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    fake = FakeLinear(api_key=KEY, clock=clock.now).start()
    seen: dict[str, object] = {}

    async def script(session, prompt, turn):
        seen["tools"] = [t.name for t in session.host.tools]
        seen["query"] = await session.host.call_tool(
            "linear_graphql",
            {"query": "query Me($id: String!) { issue(id: $id) { identifier title } }",
             "variables": {"id": session.host.issue.id}},
        )  # fmt: skip
        seen["bad"] = await session.host.call_tool(
            "linear_graphql", {"query": 'query { issue(id: "x") { nope } }'}
        )
        seen["move"] = await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    orch: Orchestrator | None = None
    try:
        (issue_id,) = fake.add_issues(1, state="Todo")
        store = WorkflowStore(write_workflow(tmp_path, fake), env={"SYMPHONY_E2E_LINEAR_KEY": KEY})
        store.load_initial()
        backend = ScriptedBackend(script)
        orch = Orchestrator(
            store,
            LinearTracker(lambda: store.current.settings, clock=clock.now),
            WorkspaceManager(lambda: store.current.settings),
            lambda name: backend,
            clock=clock,
            watch_workflow=False,
        )
        await orch.start()
        await until(lambda: "move" in seen and not orch.running)
        assert seen["tools"] == ["symphony_set_issue_state", "linear_graphql"]
        assert seen["query"].success
        assert json.loads(seen["query"].text)["data"]["issue"]["title"] == "Issue 1"
        assert not seen["bad"].success and "nope" in seen["bad"].text
        assert seen["move"].success
        assert fake.issue(issue_id)["state"] == "Done"
        assert orch.completed == [orch.known[issue_id].identifier]
        assert KEY not in seen["query"].text + seen["bad"].text
    finally:
        if orch is not None:
            await orch.shutdown()
        fake.stop()
