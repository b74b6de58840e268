"""Shutdown with a hung hook (a quit, a hang-up, SIGTERM all take ``Orchestrator.shutdown``):
the hook's process group is ended within the shutdown's hook grace instead of being awaited
to ``hooks.timeout_ms``, the run's end is applied and recorded as on any quit (usage ledger,
event log), and the cut is said (event, ``hooks_cut_short``).

The hooks' timeouts are an hour and the worker wait of shutdown is 20 s: only the cutoff can
end the runs before ``shutdown`` returns, which is what is asserted (the bounds below only
keep a broken build from hanging the suite).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import EventKind
from symphony_tui.domain.payloads import HookResult
from symphony_tui.scheduler.usage.book import RunUsage, decode
from symphony_tui.scheduler.usage.ledger import UsageLedger
from tests.helpers import until_exists
from tests.workspaces.test_workspace_hooks import _becomes_dead

from .conftest import make_issue

BOUND_S = 60.0
HOUR_MS = 3_600_000
GRACE_MS = 500  # hooks.shutdown_grace_ms: short, so the hung hooks are cut quickly


def _hung_hook(name: str, tmp_path: Path) -> str:
    """A hook that starts a child, says so through the filesystem and waits forever."""
    child, started = tmp_path / f"{name}.child", tmp_path / f"{name}.started"
    return (
        f"hooks:\n  timeout_ms: {HOUR_MS}\n  shutdown_grace_ms: {GRACE_MS}\n"
        f"  {name}: 'sleep 600 & echo $! > {child}; touch {started}; wait'\n"
    )


def _hook_events(h, name: str) -> list:
    return [
        e
        for e in h.orch.events_since(0, limit=100_000)
        if e.kind == EventKind.HOOK and e.message.startswith(f"{name}:")
    ]


def _ended_runs(path: Path) -> list[RunUsage]:
    records = [decode(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [r for r in records if isinstance(r, RunUsage) and r.ended]


async def test_a_hung_after_run_is_cut_short_and_the_run_ends_as_on_any_quit(
    make_harness, tmp_path
):
    forever = asyncio.Event()

    async def working(session, prompt, turn):
        session.usage(15, output=5)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    ledger = tmp_path / "state" / "usage.jsonl"
    h = make_harness(
        [make_issue(1)],
        script=working,
        front=_hung_hook("after_run", tmp_path),
        usage=UsageLedger(ledger),
    )
    await h.start()
    await h.until(lambda: h.backend.sessions and "id-1" in h.orch.running, BOUND_S)
    await h.advance(2.0)  # a usage checkpoint of the live run

    # the worker is cancelled, its cleanup starts after_run, which hangs
    await asyncio.wait_for(h.orch.shutdown(), BOUND_S)

    assert (tmp_path / "after_run.started").exists()
    assert await _becomes_dead(int((tmp_path / "after_run.child").read_text()))
    assert not h.orch.running  # the run's end was applied before shutdown returned
    (event,) = _hook_events(h, "after_run")
    assert "cut short (scheduler shutdown)" in event.message
    assert event.message.endswith("; its process group was ended")
    assert isinstance(event.payload, HookResult) and event.payload.cut_short == "scheduler shutdown"
    assert h.orch.hooks_cut_short == [
        "ABC-1: after_run hook cut short (scheduler shutdown); its process group was ended"
    ]
    (ended,) = _ended_runs(ledger)  # the usage ledger has the run's final mark
    assert ended.issue_id == "id-1" and ended.tokens.total_tokens == 15


async def test_a_hung_before_run_is_ended_and_said_in_the_event_log(make_harness, tmp_path):
    h = make_harness([make_issue(1)], front=_hung_hook("before_run", tmp_path))
    await h.start()
    await until_exists(tmp_path / "before_run.started", BOUND_S)

    await asyncio.wait_for(h.orch.shutdown(), BOUND_S)

    assert await _becomes_dead(int((tmp_path / "before_run.child").read_text()))
    assert not h.orch.running and h.backend.sessions == []
    (event,) = _hook_events(h, "before_run")
    assert event.message.startswith("before_run: cut short (scheduler shutdown) in ")
    assert isinstance(event.payload, HookResult) and not event.payload.ok
    assert h.orch.hooks_cut_short == [
        "ABC-1: before_run hook cut short (scheduler shutdown); its process group was ended"
    ]


async def test_an_after_run_that_starts_in_the_shutdown_gets_the_whole_configured_grace(
    make_harness, tmp_path
):
    forever = asyncio.Event()

    async def working(session, prompt, turn):
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    saved = tmp_path / "after_run.saved"
    # longer than a 3 s bound shared by every hook of the shutdown would allow: a push, say
    front = (
        f"hooks:\n  timeout_ms: {HOUR_MS}\n  shutdown_grace_ms: {int(BOUND_S * 1000)}\n"
        f"  after_run: 'sleep 4; touch {saved}'\n"
    )
    h = make_harness([make_issue(1)], script=working, front=front)
    await h.start()
    await h.until(lambda: h.backend.sessions and "id-1" in h.orch.running, BOUND_S)

    await asyncio.wait_for(h.orch.shutdown(), BOUND_S)

    assert saved.exists()  # the hook ran to its end
    (event,) = _hook_events(h, "after_run")
    assert isinstance(event.payload, HookResult) and event.payload.ok
    assert event.payload.cut_short is None and h.orch.hooks_cut_short == []


def _after_run_when_the_turn_fails(tmp_path: Path, grace_ms: int, body: str) -> str:
    """An ``after_run`` that says it started (``after_run.started``), then runs ``body``."""
    started = tmp_path / "after_run.started"
    return (
        f"hooks:\n  timeout_ms: {HOUR_MS}\n  shutdown_grace_ms: {grace_ms}\n"
        f"  after_run: 'touch {started}; {body}'\n"
    )


async def _failing(session, prompt, turn):
    return TurnResult(TurnStatus.FAILED, error="the agent gave up")


async def test_an_after_run_already_running_at_the_stop_gets_its_grace_from_the_stop(
    make_harness, tmp_path
):
    saved = tmp_path / "after_run.saved"
    front = _after_run_when_the_turn_fails(tmp_path, int(BOUND_S * 1000), f"sleep 3; touch {saved}")
    h = make_harness([make_issue(1)], script=_failing, front=front)
    await h.start()
    await until_exists(
        tmp_path / "after_run.started", BOUND_S
    )  # the worker is in its cleanup's hook

    await asyncio.wait_for(h.orch.shutdown(), BOUND_S)

    assert saved.exists()  # the hook ran to its end instead of being cut at the stop
    (event,) = _hook_events(h, "after_run")
    assert isinstance(event.payload, HookResult) and event.payload.ok
    assert event.payload.cut_short is None and h.orch.hooks_cut_short == []
    assert not h.orch.running


async def test_an_after_run_already_running_at_the_stop_is_cut_once_its_grace_is_over(
    make_harness, tmp_path
):
    grace_ms = 1500
    child = tmp_path / "after_run.child"
    front = _after_run_when_the_turn_fails(
        tmp_path, grace_ms, f"sleep 600 & echo $! > {child}; wait"
    )
    h = make_harness([make_issue(1)], script=_failing, front=front)
    await h.start()
    await until_exists(tmp_path / "after_run.started", BOUND_S)

    await asyncio.wait_for(h.orch.shutdown(), BOUND_S)

    assert await _becomes_dead(int(child.read_text()))
    (event,) = _hook_events(h, "after_run")
    assert isinstance(event.payload, HookResult) and not event.payload.ok
    assert event.payload.cut_short == "scheduler shutdown"
    # cut by the grace (counted from the stop, after the hook's start), not at once
    assert event.payload.duration_ms >= grace_ms
    assert event.message.endswith("; its process group was ended")
    assert h.orch.hooks_cut_short == [
        "ABC-1: after_run hook cut short (scheduler shutdown); its process group was ended"
    ]
    assert not h.orch.running
