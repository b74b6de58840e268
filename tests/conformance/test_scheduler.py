"""Scheduler conformance beyond the §17.4 suite in ``tests/scheduler``: claims on every
path, population errors, hook policy as the scheduler applies it, validation failures,
reconciliation of more than 50 running issues on the local tracker, and containment at
agent launch. Fake clock, scripted backend, real workspaces and hooks."""

from __future__ import annotations

import asyncio
import logging
import os

import yaml

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.config.store import WorkflowStore
from symphony_tui.domain import ClaimState, EventKind, RunStatus
from symphony_tui.scheduler import policy
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.local import LocalTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.scripted_backend import ScriptedBackend, hang
from tests.scheduler.conftest import T0, make_issue, write_workflow


def claimed(orch: Orchestrator, issue_id: str) -> bool:
    return issue_id in orch.running or issue_id in orch.retrying


def test_dispatch_sort_breaks_ties_by_identifier():
    same = {"priority": 2, "created_minutes": 5}
    issues = [make_issue(30, **same), make_issue(4, **same), make_issue(12, **same)]
    assert [i.identifier for i in policy.sort_for_dispatch(issues)] == [
        "ABC-12",
        "ABC-30",
        "ABC-4",
    ]


async def test_workspace_population_errors_are_surfaced(make_harness):
    h = make_harness(
        [make_issue(1)], front="hooks:\n  after_create: echo clone failed >&2; exit 7\n"
    )
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying)
    error = h.orch.retrying["id-1"].entry.error
    assert "after_create" in error and "exit 7" in error
    assert h.orch.snapshot().retrying[0].error == error
    hook_events = [e for e in h.orch.events_since(0) if e.kind is EventKind.HOOK]
    assert any("clone failed" in getattr(e.payload, "output", "") for e in hook_events)
    assert not h.ws("ABC-1").exists()  # the half-prepared new workspace is removed
    assert h.backend.sessions == []


async def test_after_run_hook_failure_is_logged_and_ignored_by_the_scheduler(make_harness, caplog):
    caplog.set_level(logging.INFO)
    h = make_harness([make_issue(1)], front="hooks:\n  after_run: exit 9\n")
    await h.start()
    await h.until(lambda: "id-1" in h.orch.retrying)
    retry = h.orch.retrying["id-1"].entry
    assert retry.continuation and retry.error is None and retry.attempt == 1  # a normal exit
    assert any(
        r.getMessage() == "hook failed"
        and getattr(r, "_symphony_kv", {}).get("hook") == "after_run"
        for r in caplog.records
    )


async def test_hooks_get_the_issue_and_workspace_in_their_environment(make_harness):
    dump = (
        'echo "$SYMPHONY_HOOK $SYMPHONY_ISSUE_ID $SYMPHONY_ISSUE_IDENTIFIER $PWD" >> ../hooks.log'
    )
    front = "hooks:\n" + "".join(
        f"  {name}: '{dump}'\n"
        for name in ("after_create", "before_run", "after_run", "before_remove")
    )

    async def finish(session, prompt, turn):
        await session.host.call_tool("symphony_set_issue_state", {"state": "Done"})
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness([make_issue(1)], script=finish, front=front)
    await h.start()
    await h.until(lambda: not h.orch.running and h.backend.sessions)
    await h.orch.workspaces.remove("ABC-1")  # as the terminal sweep / reconciliation does
    ws = os.path.realpath(h.ws("ABC-1"))
    lines = (h.root / "ws" / "hooks.log").read_text().splitlines()
    assert lines == [
        f"after_create id-1 ABC-1 {ws}",
        f"before_run id-1 ABC-1 {ws}",
        f"after_run id-1 ABC-1 {ws}",
        f"before_remove id-1 ABC-1 {ws}",
    ]


async def test_every_path_without_a_retry_releases_the_claim(make_harness):
    async def finish(session, prompt, turn):
        if session.host.issue.id == "id-1":
            await session.host.call_tool("symphony_set_issue_state", {"state": "Human Review"})
            return TurnResult(TurnStatus.COMPLETED)
        if session.host.issue.id == "id-2":
            return TurnResult(TurnStatus.FAILED, error="boom")
        return await session.wait_interrupt()

    h = make_harness([make_issue(1), make_issue(2), make_issue(3)], script=finish)
    await h.start()
    await h.settle()
    # Normal exit into a non-active state: no retry, and the claim is gone.
    assert not claimed(h.orch, "id-1")
    # A retry timer that finds the issue gone releases the claim instead of re-queueing.
    assert "id-2" in h.orch.retrying
    h.tracker.delete("id-2")
    await h.advance(10)
    await h.settle()
    assert not claimed(h.orch, "id-2")
    # Reconciliation to a terminal state stops and releases (no retry, no hold).
    h.tracker.set_state("id-3", "Done")
    await h.orch.tick()
    await h.settle()
    assert not claimed(h.orch, "id-3") and "id-3" not in h.orch.held
    rows = {r.issue_id: r.claim for r in h.orch.snapshot().issues}
    assert rows.get("id-1") in (None, ClaimState.UNCLAIMED)
    # Back to an active state: each one is dispatched again (nothing blocked until restart).
    h.tracker.set_state("id-1", "Todo")
    h.tracker.set_state("id-3", "Todo")
    await h.orch.tick()
    await h.settle()
    assert "id-3" in h.orch.running
    assert len([s for s in h.backend.sessions if s.host.issue.id == "id-1"]) == 2


async def test_prompt_render_error_is_retried_and_recovers_once_the_template_is_fixed(
    make_harness,
):
    # renders for the load-time sample issue (which has a blocker), fails for this one
    broken = "{{ issue.blocked_by[0].identifier }}"
    h = make_harness([make_issue(1)], script=hang, prompt=broken)
    await h.start()
    await h.settle()
    await h.until(lambda: "id-1" in h.orch.retrying)  # the render runs in a thread
    assert "template_render_error" in h.orch.retrying["id-1"].entry.error
    path = h.store.path
    path.write_text(path.read_text().replace(broken, "{{ issue.title }}"))
    await h.advance(10)
    await h.until(lambda: "id-1" in h.orch.running)  # the edit is evaluated off the loop
    await h.until(lambda: h.backend.sessions and h.backend.sessions[0].prompts)
    assert h.backend.sessions[0].prompts == ["Issue 1"]


async def test_validation_failures_are_operator_visible_and_reconciliation_continues(
    make_harness, caplog
):
    caplog.set_level(logging.INFO)
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    path = h.store.path
    path.write_text(path.read_text().replace("---\nWork", 'codex:\n  command: "  "\n---\nWork'))
    h.tracker.put(make_issue(2))
    h.tracker.set_state("id-1", "Done")
    await h.orch.tick()
    await h.settle()
    snap = h.orch.snapshot()
    assert "codex.command is empty" in snap.config_error
    assert not h.orch.running  # reconciliation still stopped the Done issue ...
    assert "id-2" not in h.orch.running  # ... but nothing new was dispatched
    assert any(r.getMessage() == "dispatch validation failed" for r in caplog.records)
    assert not h.orch.idle  # an operator must fix the workflow


async def test_agent_launch_uses_the_workspace_as_cwd_and_rejects_out_of_root_paths(
    make_harness, tmp_path
):
    seen = []

    async def record(session, prompt, turn):
        seen.append(session.host.workspace)
        return await session.wait_interrupt()

    outside = tmp_path / "outside"
    outside.mkdir()
    h = make_harness([make_issue(1), make_issue(2)], script=record)
    (h.root / "ws").mkdir()
    (h.root / "ws" / "ABC-2").symlink_to(outside)  # a key that escapes the root
    await h.start()
    await h.settle()
    assert seen == [h.ws("ABC-1")]
    assert h.ws("ABC-1").is_dir()
    assert "workspace_outside_root" in h.orch.retrying["id-2"].entry.error
    assert len(h.backend.sessions) == 1
    assert list(outside.iterdir()) == []


async def test_state_refresh_of_more_than_50_running_issues_on_the_local_tracker(tmp_path):
    path = write_workflow(tmp_path, "agent:\n  max_concurrent_agents: 70\n")
    issues_file = tmp_path / "issues.yaml"
    entries = [
        {"id": f"id-{n}", "identifier": f"ABC-{n}", "title": f"Issue {n}", "state": "Todo"}
        for n in range(1, 61)
    ]
    issues_file.write_text(yaml.safe_dump({"issues": entries}))
    store = WorkflowStore(path)
    store.load_initial()
    backend = ScriptedBackend(hang)
    clock = FakeClock(T0)
    tracker = LocalTracker(lambda: store.current.settings)
    orch = Orchestrator(
        store,
        tracker,
        WorkspaceManager(lambda: store.current.settings),
        lambda name: backend,
        clock=clock,
        watch_workflow=False,
    )

    async def until_running(count: int) -> None:
        # workspaces are made and files read in threads: wait in real time, bounded
        deadline = asyncio.get_running_loop().time() + 60
        while len(orch.running) != count and asyncio.get_running_loop().time() < deadline:
            await clock.settle(50)
            await asyncio.sleep(0.01)

    try:
        await orch.start()
        await until_running(60)
        assert len(orch.running) == 60
        refreshed = await tracker.fetch_issues_by_ids(list(orch.running))
        assert len(refreshed) == 60
        entries[4]["state"] = "Done"  # id-5: terminal -> stop and clean
        entries[9]["state"] = "Backlog"  # id-10: non-active -> stop, keep the workspace
        entries[14]["state"] = "In Progress"  # id-15: still active -> the row follows
        del entries[59]  # id-60: no longer returned -> stopped, not a zombie
        issues_file.write_text(yaml.safe_dump({"issues": entries}))
        await orch.tick()
        await until_running(57)
        assert sorted(set(f"id-{n}" for n in range(1, 61)) - set(orch.running)) == [
            "id-10",
            "id-5",
            "id-60",
        ]
        assert orch.running["id-15"].issue.state == "In Progress"
        assert all(s.closed for s in backend.sessions if s.host.issue.id in ("id-5", "id-10"))
    finally:
        await orch.shutdown()


async def test_waiting_for_an_operator_shows_as_waiting_in_the_snapshot(make_harness):
    from symphony_tui.domain import ApprovalKind, ApprovalRequest

    async def ask(session, prompt, turn):
        await session.host.request_approval(
            ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make")
        )
        return await session.wait_interrupt()

    h = make_harness([make_issue(1)], script=ask, front="codex:\n  stall_timeout_ms: 1000\n")
    await h.start()
    await h.settle()
    await h.advance(3600)
    await h.orch.tick()
    await h.settle()
    row = h.orch.snapshot().running[0]
    assert row.status is RunStatus.WAITING_FOR_OPERATOR and row.pending_approvals == 1


async def test_retry_backoff_cap_applies_to_the_retries_the_scheduler_queues(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="boom")

    h = make_harness([make_issue(1)], script=fail, front="agent:\n  max_retry_backoff_ms: 15000\n")
    await h.start()
    await h.settle()
    delays = []
    for _ in range(3):
        retry = h.orch.retrying["id-1"].entry
        delay = (retry.due_at - h.clock.now()).total_seconds()
        delays.append(delay)
        await h.advance(delay)
        await h.settle()
    assert delays == [10.0, 15.0, 15.0]


async def test_token_and_rate_limit_aggregation_stays_correct_across_repeated_updates(
    make_harness,
):
    from symphony_tui.domain import AgentEvent

    async def report(session, prompt, turn):
        host = session.host
        for total in (100, 100, 250, 250, 400, 400):  # absolute totals, repeated
            session.usage(total, output=total // 10)
        for used in (10, 35):
            host.emit(
                AgentEvent(
                    kind=EventKind.RATE_LIMITS,
                    data={"rate_limits": {"primary": {"used_percent": used}}},
                )
            )
        return await session.wait_interrupt()

    h = make_harness([make_issue(1), make_issue(2)], script=report)
    await h.start()
    await h.settle()
    snap = h.orch.snapshot()
    # Two threads, each reporting absolute totals up to 400: counted once each.
    assert snap.totals.total_tokens == 800
    assert snap.totals.output_tokens == 80
    assert {r.tokens.total_tokens for r in snap.running} == {400}
    assert snap.rate_limits.primary.used_percent == 35
