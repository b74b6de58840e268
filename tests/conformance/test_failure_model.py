"""Spec §14 (failure model and recovery), §8.6 (start-up terminal cleanup) and §16.5/§16.6
(worker attempt and retry-timer failures): every failure class ends in a retry, a skipped
tick or a logged warning, never in a dead scheduler. Fake clock, scripted backend."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

import pytest

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import EventKind
from symphony_tui.domain.commands import MoveIssue, PauseDispatch, Refresh
from symphony_tui.scheduler.orchestrator import StartupError
from symphony_tui.workspaces.manifest import update_manifest
from symphony_tui_testing.scripted_backend import hang
from tests.scheduler.conftest import make_issue


def messages(h, kind: EventKind) -> list[str]:
    return [e.message for e in h.orch.events_since(0) if e.kind is kind]


def workspace_of(h, n: int):
    """ABC-n's workspace as the scheduler makes it: a folder whose manifest names it."""
    path = h.ws(f"ABC-{n}")
    path.mkdir(parents=True)
    update_manifest(path, "issue", id=f"id-{n}", identifier=f"ABC-{n}")
    return path


async def test_startup_validation_failure_refuses_to_start(make_harness):
    h = make_harness([make_issue(1)], front='codex:\n  command: ""\n')
    with pytest.raises(StartupError, match=r"codex\.command is empty"):
        await h.orch.start()
    assert h.tracker.calls == [] and not h.orch.running


async def test_startup_terminal_cleanup_removes_workspaces_of_terminal_issues(make_harness):
    h = make_harness(
        [make_issue(1, state="Done"), make_issue(2)],
        script=hang,
        front="hooks:\n  before_remove: echo removing > ../removed.txt\n",
    )
    for n in (1, 2):
        workspace_of(h, n)
    await h.start()
    await h.settle()
    assert not h.ws("ABC-1").exists()
    assert h.ws("ABC-2").is_dir() and "id-2" in h.orch.running
    assert (h.root / "ws" / "removed.txt").read_text().strip() == "removing"
    assert h.tracker.calls[0] == ("by_states", tuple(h.orch.settings.tracker.terminal_states))
    assert "removed workspace of terminal issue" in messages(h, EventKind.RECONCILE)
    # said on screen, in one line naming what went and how to keep it
    assert messages(h, EventKind.WARNING) == [
        "start-up cleanup removed the workspaces of 1 issue(s) in a terminal state "
        "(spec §8.6): ABC-1; workspace.keep_terminal_ms keeps them"
    ]


async def test_startup_cleanup_removes_only_folders_the_scheduler_made_for_the_issue(
    make_harness,
):
    h = make_harness(
        [make_issue(1, state="Done"), make_issue(2, state="Done"), make_issue(3, state="Done")]
    )
    mine = workspace_of(h, 1)
    plain = h.ws("ABC-2")  # a folder someone made by hand: no manifest
    plain.mkdir(parents=True)
    (plain / "notes.txt").write_text("mine")
    other = h.ws("ABC-3")  # a manifest naming another issue
    other.mkdir(parents=True)
    update_manifest(other, "issue", id="id-9", identifier="ABC-9")
    await h.start()
    await h.settle()
    assert not mine.exists()
    assert (plain / "notes.txt").read_text() == "mine" and other.is_dir()
    left = [m for m in messages(h, EventKind.WARNING) if "left" in m]
    assert left == [
        f"start-up cleanup left {path} alone: no workspace manifest there names {ident} "
        "(only folders the scheduler made for an issue are removed)"
        for path, ident in ((plain, "ABC-2"), (other, "ABC-3"))
    ]


async def test_keep_terminal_ms_keeps_recent_terminal_workspaces_at_start_up(make_harness):
    h = make_harness(
        [make_issue(1, state="Done")], front="workspace:\n  root: ws\n  keep_terminal_ms: 3600000\n"
    )
    path = workspace_of(h, 1)
    await h.start()
    await h.settle()
    assert path.is_dir()
    assert messages(h, EventKind.RECONCILE) == [
        "start-up cleanup kept the workspaces of 1 issue(s) in a terminal state "
        "(workspace.keep_terminal_ms: 3600000): ABC-1"
    ]
    await h.orch.shutdown()
    # older than the period: removed at the next start-up
    old = time.time() - 7200
    os.utime(path / ".symphony" / "issue.json", (old, old))
    again = make_harness(
        [make_issue(1, state="Done")], front="workspace:\n  root: ws\n  keep_terminal_ms: 3600000\n"
    )
    await again.start()
    await again.settle()
    assert not path.exists()
    await again.orch.shutdown()


async def test_startup_continues_when_the_terminal_issue_fetch_fails(make_harness):
    h = make_harness([make_issue(1, state="Done"), make_issue(2)], script=hang)
    workspace_of(h, 1)
    h.tracker.fail_next("linear_api_request")
    await h.start()
    await h.settle()
    assert h.ws("ABC-1").is_dir()  # kept; the next start-up sweeps it
    assert "id-2" in h.orch.running


async def test_candidate_fetch_failure_skips_the_tick_and_the_next_tick_recovers(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    h.tracker.fail_next("linear_api_status", count=2)  # start-up sweep, then candidates
    await h.start()
    await h.settle()
    assert not h.orch.running
    assert h.orch.snapshot().tracker_error
    assert any("candidate fetch failed" in m for m in messages(h, EventKind.TRACKER))
    await h.advance(30)  # the next poll
    await h.settle()
    assert "id-1" in h.orch.running and h.orch.snapshot().tracker_error is None


async def test_the_same_tracker_failure_is_reported_once_not_every_poll(make_harness):
    # A broken issues file fails every poll and refresh; the history must not fill with it.
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    h.tracker.fail_next("local_tracker_file", count=12)
    for _ in range(6):
        await h.advance(30)
        await h.settle()
    tracker = messages(h, EventKind.TRACKER)
    assert sum("injected failure" in m for m in tracker) == 1
    assert h.orch.snapshot().tracker_error  # still shown while it lasts
    await h.advance(30)
    await h.settle()
    assert h.orch.snapshot().tracker_error is None
    assert messages(h, EventKind.TRACKER)[-1] == "tracker reachable again"


async def test_a_retrying_issue_that_leaves_the_active_states_is_released_at_the_next_poll(
    make_harness,
):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="boom")

    h = make_harness([make_issue(1)], script=fail, front="agent:\n  max_retry_backoff_ms: 600000\n")
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.retrying
    h.tracker.set_state("id-1", "Cancelled")
    await h.orch.tick()
    await h.settle()
    assert "id-1" not in h.orch.retrying and "id-1" not in h.orch.known
    assert any(
        "released ABC-1: no longer in an active state" in m
        for m in messages(h, EventKind.RECONCILE)
    )
    assert len(h.backend.sessions) == 1


async def test_retry_poll_failure_requeues_with_the_next_backoff(make_harness):
    async def fail(session, prompt, turn):
        return TurnResult(TurnStatus.FAILED, error="boom")

    h = make_harness([make_issue(1)], script=fail)
    await h.start()
    await h.settle()
    assert h.orch.retrying["id-1"].entry.attempt == 1
    h.tracker.fail_next("linear_api_request")
    await h.advance(10)
    await h.settle()
    retry = h.orch.retrying["id-1"].entry
    assert (retry.attempt, retry.error) == (2, "retry poll failed")
    assert (retry.due_at - h.clock.now()).total_seconds() == 20.0
    assert len(h.backend.sessions) == 1


async def test_issue_state_refresh_failure_after_a_turn_fails_the_attempt(make_harness):
    h = make_harness([make_issue(1)])

    async def refresh_fails(session, prompt, turn):
        h.tracker.fail_next("linear_api_request")
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    h.backend.script = refresh_fails
    await h.start()
    await h.settle()
    retry = h.orch.retrying["id-1"].entry
    assert retry.error.startswith("issue state refresh failed") and not retry.continuation


async def test_a_rate_limited_refresh_after_a_turn_waits_for_the_reset_not_a_backoff(
    make_harness,
):
    h = make_harness([make_issue(1)])
    reset = h.clock.now() + timedelta(seconds=90)
    turns: list[int] = []

    async def rate_limited_once(session, prompt, turn):
        turns.append(turn)
        if len(turns) == 1:
            h.tracker.fail_next("rate_limited", retry_at=reset)  # the after-turn refresh
            h.tracker.fail_next("rate_limited", retry_at=reset)  # the continuation retry
            return TurnResult(TurnStatus.COMPLETED, session.turn_id)
        h.tracker.set_state("id-1", "Done")
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    h.backend.script = rate_limited_once
    await h.start()
    await h.settle()
    # the turn counted as done; the continuation retry fired, met the limit and now waits
    await h.advance(1)
    await h.settle()
    retry = h.orch.retrying["id-1"].entry
    assert retry.continuation and retry.attempt == 1
    assert retry.error.startswith("tracker rate limited until")
    assert retry.due_at == reset
    assert h.orch.snapshot().tracker_paused_until == reset
    assert len(h.backend.sessions) == 1
    await h.advance(90)
    await h.settle()
    assert len(h.backend.sessions) == 2 and "ABC-1" in h.orch.completed


async def test_an_issue_gone_after_its_turn_ends_the_worker_normally(make_harness):
    h = make_harness([make_issue(1)])

    async def vanish(session, prompt, turn):
        h.tracker.delete("id-1")
        return TurnResult(TurnStatus.COMPLETED, session.turn_id)

    h.backend.script = vanish
    await h.start()
    await h.settle()
    assert h.backend.sessions[0].turns == 1 and h.orch.completed == ["ABC-1"]


async def test_a_crashing_worker_becomes_a_retry_not_a_dead_scheduler(make_harness):
    async def crash(session, prompt, turn):
        raise RuntimeError("backend bug")

    h = make_harness([make_issue(1)], script=crash)
    await h.start()
    await h.settle()
    retry = h.orch.retrying["id-1"].entry
    assert retry.error == "worker error: backend bug" and retry.attempt == 1
    await h.orch.tick()  # the scheduler still ticks
    assert h.orch.ticks >= 2


async def test_session_close_failure_is_logged_and_the_run_still_ends(make_harness):
    h = make_harness([make_issue(1)])
    original = h.backend.start_session

    async def start(host):
        session = await original(host)

        async def broken_close():
            raise OSError("pipe already closed")

        session.close = broken_close
        return session

    h.backend.start_session = start
    await h.start()
    await h.settle()
    assert not h.orch.running and h.orch.retrying["id-1"].entry.continuation


async def test_a_failing_tick_never_kills_the_scheduler(make_harness):
    h = make_harness([make_issue(1)], script=hang)

    async def broken():
        raise RuntimeError("tracker client bug")

    h.tracker.fetch_candidate_issues = broken
    await h.start()
    await h.settle()
    assert any("tick failed: tracker client bug" in m for m in messages(h, EventKind.ERROR))
    assert h.orch.next_poll_at is not None  # the next tick is scheduled
    del h.tracker.fetch_candidate_issues
    await h.advance(30)
    await h.settle()
    assert "id-1" in h.orch.running


async def test_overlapping_refresh_requests_coalesce_into_one_more_tick(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    before = h.orch.ticks
    gate = asyncio.Event()
    original = h.tracker.fetch_candidate_issues

    async def slow():
        await gate.wait()
        return await original()

    h.tracker.fetch_candidate_issues = slow
    for _ in range(3):
        await h.orch.send(Refresh())
    await h.settle()
    gate.set()
    await h.settle()
    await h.settle()
    assert h.orch.ticks == before + 2  # the running tick, then one coalesced follow-up


async def test_shutdown_stops_workers_cancels_retries_and_is_idempotent(make_harness):
    async def fail_second(session, prompt, turn):
        if session.host.issue.id == "id-2":
            return TurnResult(TurnStatus.FAILED, error="boom")
        return await session.wait_interrupt()

    h = make_harness([make_issue(1), make_issue(2)], script=fail_second)
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.running and "id-2" in h.orch.retrying
    await asyncio.gather(h.orch.shutdown(), h.orch.shutdown())
    assert not h.orch.running and not h.orch.retrying
    assert all(s.closed for s in h.backend.sessions)
    assert h.backend.closed and h.tracker.closed
    h.orch.request_refresh()  # ignored after shutdown
    await h.advance(60)
    assert len(h.backend.sessions) == 2


async def test_paused_dispatch_keeps_new_work_waiting_and_resume_polls_at_once(make_harness):
    h = make_harness([], script=hang)
    await h.start()
    result = await h.orch.send(PauseDispatch(paused=True))
    assert result.ok and h.orch.snapshot().dispatch_paused
    h.tracker.put(make_issue(1))
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running and not h.orch.idle
    await h.orch.send(PauseDispatch(paused=False))
    await h.settle()
    assert "id-1" in h.orch.running


async def test_operator_move_issue_changes_the_tracker_and_polls(make_harness):
    h = make_harness([make_issue(1, state="Backlog")], script=hang)
    await h.start()
    await h.settle()
    result = await h.orch.send(MoveIssue(issue_id="id-1", state="Todo"))
    assert result.ok and h.tracker.issues["id-1"].state == "Todo"
    await h.settle()
    assert "id-1" in h.orch.running
    failed = await h.orch.send(MoveIssue(issue_id="nope", state="Todo"))
    assert not failed.ok and "unknown issue" in failed.message
