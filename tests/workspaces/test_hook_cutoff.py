"""A stopping scheduler ends its hooks (``HookCutoff``): a hung hook is cut short at the
cutoff's deadline (its whole process group: SIGTERM, grace, SIGKILL) instead of being
awaited to ``hooks.timeout_ms``; one that finishes within the grace is left alone.

No timing asserts: the hooks' timeouts are an hour, so a result before the test's own
bound can only come from the cutoff; the outcomes (result, group gone, record) are checked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from symphony_tui.workspaces.hooks import HookCutoff, run_hook
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.manifest import read_section
from tests.helpers import until_exists
from tests.workspaces.test_workspace_hooks import _becomes_dead
from tests.workspaces.test_workspace_manager import Config, make_issue

HOUR_MS = 3_600_000
BOUND_S = 60.0  # a bound for a hung test only, never a figure


async def test_a_hung_hook_is_cut_short_with_its_whole_process_group(tmp_path: Path) -> None:
    pidfile, started = tmp_path / "child.pid", tmp_path / "started"
    # a grandchild that ignores SIGTERM: only the SIGKILL after the grace ends it
    script = f"(trap '' TERM; sleep 600) & echo $! > {pidfile}; touch {started}; wait"
    cutoff = HookCutoff()
    hook = asyncio.ensure_future(
        run_hook(
            "after_run",
            script,
            tmp_path,
            HOUR_MS,
            {"SYMPHONY_ISSUE_IDENTIFIER": "ABC-1"},
            cutoff=cutoff,
        )
    )
    await until_exists(started, BOUND_S)
    assert not hook.done()
    cutoff.cut("scheduler shutdown", 0.0)
    result = await asyncio.wait_for(hook, BOUND_S)
    assert not result.ok and not result.timed_out and result.exit_code is None
    assert result.cut_short == "scheduler shutdown"
    assert result.summary().startswith("cut short after ")
    assert result.summary().endswith(" ms (scheduler shutdown)")
    assert await _becomes_dead(int(pidfile.read_text()))
    assert cutoff.ended == [
        "ABC-1: after_run hook cut short (scheduler shutdown); its process group was ended"
    ]


async def test_a_hook_started_after_the_deadline_is_cut_at_once(tmp_path: Path) -> None:
    cutoff = HookCutoff()
    cutoff.cut("scheduler shutdown", 0.0)
    result = await asyncio.wait_for(
        run_hook("before_remove", "sleep 600", tmp_path, HOUR_MS, cutoff=cutoff), BOUND_S
    )
    assert result.cut_short == "scheduler shutdown" and not result.ok


async def test_a_hook_that_finishes_within_the_grace_keeps_its_result(tmp_path: Path) -> None:
    cutoff = HookCutoff()
    cutoff.cut("scheduler shutdown", BOUND_S)  # a grace longer than the hook needs
    result = await run_hook("after_run", "echo saved; exit 4", tmp_path, HOUR_MS, cutoff=cutoff)
    assert result.exit_code == 4 and result.cut_short is None and "saved" in result.output
    assert cutoff.ended == []


async def test_without_a_cut_the_cutoff_changes_nothing(tmp_path: Path) -> None:
    cutoff = HookCutoff()
    result = await run_hook("after_run", "true", tmp_path, HOUR_MS, cutoff=cutoff)
    assert result.ok and result.cut_short is None and not cutoff.active


async def test_a_second_cut_keeps_the_earlier_deadline() -> None:
    cutoff = HookCutoff()
    cutoff.cut("scheduler shutdown", 0.0)
    first = cutoff.deadline
    cutoff.cut("again", 100.0)
    assert cutoff.deadline == first and cutoff.reason == "scheduler shutdown"


async def test_a_hook_started_after_the_cut_gets_its_grace_from_its_own_start(
    tmp_path: Path,
) -> None:
    grace_s = 2.0
    cutoff = HookCutoff()
    cutoff.cut("scheduler shutdown", grace_s)
    # the deadline of a hook running at the cut has passed: a late after_run (its agent
    # stopped first) still has its whole grace
    await asyncio.sleep(grace_s + 0.5)
    result = await asyncio.wait_for(
        run_hook("after_run", "echo saved; exit 4", tmp_path, HOUR_MS, cutoff=cutoff), BOUND_S
    )
    assert result.cut_short is None and result.exit_code == 4 and "saved" in result.output
    assert cutoff.ended == []


async def test_each_hook_s_deadline_counts_from_the_later_of_its_start_and_the_cut() -> None:
    cutoff = HookCutoff()
    assert cutoff.deadline_for(0.0) is None  # no cut yet: hooks.timeout_ms only
    cutoff.cut("scheduler shutdown", 10.0)
    assert cutoff.cut_at is not None
    before, after = cutoff.cut_at - 50.0, cutoff.cut_at + 100.0
    assert cutoff.deadline_for(before) == cutoff.cut_at + 10.0 == cutoff.deadline
    assert cutoff.deadline_for(after) == after + 10.0


async def test_a_hook_cancelled_while_cut_is_recorded(tmp_path: Path) -> None:
    started = tmp_path / "started"
    cutoff = HookCutoff()
    cutoff.cut("scheduler shutdown", BOUND_S)  # the grace is not over: the cancel ends it
    hook = asyncio.ensure_future(
        run_hook("before_run", f"touch {started}; sleep 600", tmp_path, HOUR_MS, cutoff=cutoff)
    )
    await until_exists(started, BOUND_S)
    hook.cancel()
    try:
        await asyncio.wait_for(hook, BOUND_S)
    except asyncio.CancelledError:
        pass
    assert cutoff.ended == [
        "before_run hook cut short (scheduler shutdown); its process group was ended"
    ]


async def test_the_manager_cuts_its_hooks_and_records_them_in_the_manifest(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    config = Config(tmp_path, after_run=f"touch {started}; sleep 600", timeout_ms=HOUR_MS)
    manager = WorkspaceManager(config)
    issue = make_issue("ABC-1")
    path, _ = await manager.ensure(issue)
    hook = asyncio.ensure_future(manager.run_hook("after_run", path, issue))
    await until_exists(started, BOUND_S)
    manager.stop_hooks("scheduler shutdown", 0.0)
    result = await asyncio.wait_for(hook, BOUND_S)
    assert result is not None and result.cut_short == "scheduler shutdown"
    assert manager.hooks_cut_short == [
        "ABC-1: after_run hook cut short (scheduler shutdown); its process group was ended"
    ]
    await manager.manifests.flush()
    assert read_section(path, "run")["hooks"]["after_run"].startswith("cut short after ")
