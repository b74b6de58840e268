"""The real Orchestrator with the GitLab tracker against FakeGitLab, from a WORKFLOW.md written
as the reference's GitLab adapter documents it (``tracker.provider`` with ``project_path`` and
``api_key: $GITLAB_PAT``) plus labels as states.

The agent labels its issue with ``gitlab_api`` and moves it to Human Review with the state
tool; a Todo issue whose blocker is open is not dispatched until the blocker is closed; a
person closing a running issue stops it; a 429 pauses polling until ``Retry-After`` (nothing
is sent meanwhile) and keeps the workers."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.gitlab import GitLabTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.fake_gitlab import FakeGitLab
from symphony_tui_testing.scripted_backend import ScriptedBackend
from tests.trackers.jira.test_jira_scheduler_e2e import advance_until, until

from .conftest import PROJECT, TOKEN

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def write_workflow(root: Path, fake: FakeGitLab) -> Path:
    front = textwrap.dedent(
        f"""\
        tracker:
          kind: gitlab
          provider:
            api_url: {fake.url}
            api_key: $GITLAB_PAT
            project_path: {PROJECT}
          state_labels: ["Todo", "In Progress", "Human Review"]
          active_states: ["Todo", "In Progress"]
          terminal_states: ["closed"]
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
    path.write_text(f"---\n{front}---\nWork on {{{{ issue.identifier }}}}\n")
    return path


async def test_gitlab_dispatch_tools_blockers_reconcile_and_429(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    fake = FakeGitLab(token=TOKEN, project=PROJECT, clock=clock.now).start()
    seen: dict[str, list] = {"tools": [], "label": [], "move": []}

    async def script(session, prompt, turn):
        issue = session.host.issue
        if issue.title.startswith("hang"):
            return await session.wait_interrupt()
        seen["tools"].append([t.name for t in session.host.tools])
        path = f"/projects/group%2Fapp/issues/{issue.id}"
        seen["label"].append(
            await session.host.call_tool(
                "gitlab_api",
                {"method": "PUT", "path": path, "body": {"add_labels": ["done-by-bot"]}},
            )
        )
        seen["move"].append(
            await session.host.call_tool("symphony_set_issue_state", {"state": "Human Review"})
        )
        return TurnResult(TurnStatus.COMPLETED)

    orch: Orchestrator | None = None
    try:
        blocker = fake.add_issue("hang: blocker", labels=["In Progress"])
        worker = fake.add_issue("work", labels=["Todo"])
        waiting = fake.add_issue("waits", labels=["Todo"], blocked_by=[blocker.iid])
        hanging = fake.add_issue("hang: long", labels=["Todo"])
        store = WorkflowStore(write_workflow(tmp_path, fake), env={"GITLAB_PAT": TOKEN})
        store.load_initial()
        tracker = GitLabTracker(lambda: store.current.settings, clock=clock.now)
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
        await until(lambda: len(seen["move"]) == 1 and str(worker.iid) not in orch.running)
        assert set(orch.running) == {str(blocker.iid), str(hanging.iid)}
        assert seen["tools"][0] == ["symphony_set_issue_state", "gitlab_api"]
        assert seen["label"][0].success and seen["move"][0].success
        assert json.loads(seen["move"][0].text) == {"issue": "GL-2", "state": "Human Review"}
        assert set(fake.issues[worker.iid].labels) == {"done-by-bot", "Human Review"}

        # A person closes the blocker: it stops, and the waiting issue runs.
        fake.update(blocker.iid, state="closed")
        await advance_until(
            clock, lambda: str(blocker.iid) not in orch.running and len(seen["move"]) == 2
        )
        assert "Human Review" in fake.issues[waiting.iid].labels

        fake.rate_limit(150)
        ticks = orch.ticks
        await advance_until(
            clock, lambda: orch.ticks > ticks and orch.snapshot().tracker_paused_until is not None
        )
        assert "GitLab rate limit (HTTP 429)" in (orch.snapshot().tracker_error or "")
        sent = len(fake.requests)
        ticks = orch.ticks
        await advance_until(clock, lambda: orch.ticks > ticks)
        assert len(fake.requests) == sent and str(hanging.iid) in orch.running
        await advance_until(
            clock,
            lambda: orch.snapshot().tracker_paused_until is None and len(fake.requests) > sent,
        )
        assert str(hanging.iid) in orch.running
        assert not fake.violations, fake.violations[:5]
    finally:
        if orch is not None:
            await orch.shutdown()
        fake.stop()
