"""The real Orchestrator with the Jira tracker against FakeJira, from a WORKFLOW.md written as
the reference's Jira adapter documents it (``tracker.provider`` with ``base_url``, ``email``,
``api_token: $JIRA_API_TOKEN``, ``project_key``; Jira's own status names).

The agent comments on its issue with ``jira_rest`` and moves it to Human Review with the
state tool (a Jira transition); an issue in To Do whose blocker is still open is not
dispatched until the blocker is Done; a person moving a running issue to Done stops it; a 429
pauses polling until ``Retry-After`` (nothing is sent meanwhile) and keeps the workers."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.jira import JiraTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.fake_jira import FakeJira
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.helpers import until

from .conftest import EMAIL, PROJECT, TOKEN

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


async def advance_until(clock: FakeClock, predicate: Callable[[], bool]) -> None:
    """Move the clock 30 s at a time (at most 12 times) until ``predicate`` holds: a tick
    that ends while the clock moves arms its next poll from the later time."""
    for _ in range(12):
        await clock.advance(30)
        try:
            await until(predicate, timeout=0.5)
            return
        except AssertionError:
            continue
    raise AssertionError("condition not reached in time")


def write_workflow(root: Path, fake: FakeJira) -> Path:
    front = textwrap.dedent(
        f"""\
        tracker:
          kind: jira
          provider:
            base_url: {fake.url}
            email: {EMAIL}
            api_token: $JIRA_API_TOKEN
            project_key: {PROJECT}
          active_states: ["To Do", "In Progress"]
          terminal_states: ["Done", "Won't Do"]
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
    path.write_text(f"---\n{front}---\nWork on {{{{ issue.identifier }}}}: {{{{ issue.title }}}}\n")
    return path


async def test_jira_dispatch_tools_blockers_reconcile_and_429(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    fake = FakeJira(email=EMAIL, token=TOKEN, project=PROJECT, clock=clock.now).start()
    seen: dict[str, list] = {"tools": [], "comment": [], "move": []}

    async def script(session, prompt, turn):
        issue = session.host.issue
        if issue.title.startswith("hang"):
            return await session.wait_interrupt()
        seen["tools"].append([t.name for t in session.host.tools])
        seen["comment"].append(
            await session.host.call_tool(
                "jira_rest",
                {"method": "POST", "path": f"/rest/api/3/issue/{issue.identifier}/comment",
                 "body": {"body": {"type": "doc", "version": 1, "content": [
                     {"type": "paragraph", "content": [{"type": "text", "text": "ready"}]}]}}},
            )
        )  # fmt: skip
        seen["move"].append(
            await session.host.call_tool("symphony_set_issue_state", {"state": "Human Review"})
        )
        return TurnResult(TurnStatus.COMPLETED)

    orch: Orchestrator | None = None
    try:
        blocker = fake.add_issue("hang: blocker", status="In Progress")
        worker = fake.add_issue("work", status="To Do")
        waiting = fake.add_issue("waits for the blocker", status="To Do", blocked_by=[blocker.key])
        hanging = fake.add_issue("hang: long", status="To Do")
        store = WorkflowStore(write_workflow(tmp_path, fake), env={"JIRA_API_TOKEN": TOKEN})
        store.load_initial()
        tracker = JiraTracker(lambda: store.current.settings, clock=clock.now)
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
        await until(lambda: len(seen["move"]) == 1 and worker.id not in orch.running)
        assert set(orch.running) == {blocker.id, hanging.id}  # the blocked one waits
        assert seen["tools"][0] == ["symphony_set_issue_state", "jira_rest"]
        assert seen["comment"][0].success and seen["move"][0].success
        assert json.loads(seen["move"][0].text) == {"issue": worker.key, "state": "Human Review"}
        assert fake.issues[worker.key].status == "Human Review"
        assert (
            fake.issues[worker.key].comments[0]["body"]["content"][0]["content"][0]["text"]
            == "ready"
        )

        # The blocker is done (a person resolves it): it stops, and the waiting issue starts.
        fake.set_status(blocker.key, "Done")
        await advance_until(
            clock, lambda: blocker.id not in orch.running and len(seen["move"]) == 2
        )
        assert fake.issues[waiting.key].status == "Human Review"

        # 429 with Retry-After: polling pauses, the running worker stays, nothing is sent.
        fake.rate_limit(150)
        ticks = orch.ticks
        await advance_until(
            clock, lambda: orch.ticks > ticks and orch.snapshot().tracker_paused_until is not None
        )
        assert "Jira rate limit (HTTP 429)" in (orch.snapshot().tracker_error or "")
        assert hanging.id in orch.running
        sent = len(fake.requests)
        ticks = orch.ticks
        await advance_until(clock, lambda: orch.ticks > ticks)
        assert len(fake.requests) == sent
        await advance_until(
            clock,
            lambda: orch.snapshot().tracker_paused_until is None and len(fake.requests) > sent,
        )
        assert hanging.id in orch.running
        messages = [e.message for e in orch.events_since(0)]
        assert any("polling paused until" in m for m in messages)
        assert not fake.violations, fake.violations[:5]
    finally:
        if orch is not None:
            await orch.shutdown()
        fake.stop()
