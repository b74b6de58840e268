"""Each run's long-lived objects are frozen out of the full collections' reach, and what
ended runs left frozen in cycles is reclaimed (scheduler/heap_freeze.py). No timing: the
freezer's delay is zero and the tests wait for its callback by turns of the loop."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from symphony_tui.scheduler import heap_freeze
from symphony_tui.scheduler.heap_freeze import HeapFreezer
from symphony_tui.testing.scripted_backend import complete
from tests.scheduler.conftest import make_issue


class Node:
    """A container the collector tracks; two of them make a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle(keep: list | None = None) -> weakref.ref:
    """A two-object cycle, referred to by ``keep`` only (a run's objects while it runs:
    empty ``keep`` when the run ends); its weak reference dies only when a collection
    that reaches the cycle finds it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    if keep is not None:
        keep.append(a)
    return weakref.ref(a)


def tracked(obj: object) -> bool:
    """True while ``obj`` is in a generation a full collection traverses."""
    return any(o is obj for o in gc.get_objects())


@pytest.fixture(autouse=True)
def _thaw():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's collector as it was
    gc.collect()


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_session_opening_freezes_what_exists_and_not_the_young_garbage():
    freezer = HeapFreezer(lambda: True, delay_s=0)
    live = Node()  # a run's long-lived object
    assert tracked(live)
    dead = cycle()  # garbage made during the run's set-up
    freezer.session_opened()
    freezer.session_opened()  # a burst of opens: one freeze
    await turns()
    assert freezer.freezes == 1
    assert gc.get_freeze_count() > 0
    assert not tracked(live)  # out of every collection's reach
    assert dead() is None  # collected before the freeze, not kept frozen


async def test_a_frozen_cycle_is_reclaimed_after_enough_runs_end():
    freezer = HeapFreezer(lambda: True, delay_s=0, reclaim_runs=3)
    run: list = []
    kept = cycle(run)
    freezer.session_opened()
    await turns()
    run.clear()  # the run ended: its cycle is garbage, frozen
    gc.collect()
    assert kept() is not None  # frozen: a full collection does not reach it
    freezer.run_ended()
    freezer.run_ended()
    await turns()
    assert kept() is not None and freezer.reclaims == 0
    freezer.run_ended()  # the third: reclaim due
    await turns()
    assert freezer.reclaims == 1
    assert kept() is None
    assert gc.get_freeze_count() > 0  # frozen again after the reclaim


async def test_the_reclaim_waits_for_a_quiet_inbox_but_not_forever():
    quiet = [False]
    freezer = HeapFreezer(lambda: quiet[0], delay_s=0, reclaim_runs=2)
    run: list = []
    kept = cycle(run)
    freezer.session_opened()
    await turns()
    run.clear()
    for _ in range(2):
        freezer.run_ended()
    await turns()
    assert freezer.reclaims == 0 and kept() is not None  # busy: later
    quiet[0] = True
    await turns()
    assert freezer.reclaims == 1 and kept() is None
    quiet[0] = False
    kept = cycle(run)
    freezer.session_opened()
    await turns()
    run.clear()
    for _ in range(8):  # four times the due count: reclaimed though busy
        freezer.run_ended()
    await turns()
    assert freezer.reclaims == 2 and kept() is None


async def test_freezes_alone_make_a_reclaim_due():
    freezer = HeapFreezer(lambda: True, delay_s=0, reclaim_freezes=2)
    run: list = []
    kept = cycle(run)
    for _ in range(3):
        freezer.session_opened()
        await turns()
        run.clear()
        assert kept() is not None or freezer.reclaims == 1
    assert freezer.reclaims == 1 and kept() is None


async def test_close_cancels_a_pending_freeze():
    freezer = HeapFreezer(lambda: True, delay_s=0)
    freezer.session_opened()
    freezer.close()
    await turns()
    assert freezer.freezes == 0 and gc.get_freeze_count() == 0


async def hang(session, prompt, turn):
    return await session.wait_interrupt()


async def test_the_scheduler_freezes_once_its_runs_sessions_are_open(make_harness, monkeypatch):
    monkeypatch.setattr(heap_freeze, "FREEZE_DELAY_S", 0.0)
    h = make_harness([make_issue(1), make_issue(2)], script=hang, freeze_heap=True)
    await h.start()
    await h.settle()
    assert h.orch.heap is not None
    await turns()
    assert h.orch.heap.freezes >= 1
    sessions = [run.session for run in h.orch.running.values()]
    assert len(sessions) == 2 and not any(tracked(s) for s in sessions)
    await h.orch.shutdown()


async def test_without_the_option_nothing_is_frozen(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    await turns()
    assert h.orch.heap is None and gc.get_freeze_count() == 0
    await h.orch.shutdown()


async def test_a_full_collection_it_did_not_run_is_followed_by_a_freeze():
    """The console's long-lived render caches: no session opens to freeze them, so a full
    collection (any thread's) is followed by a freeze of what survived it."""
    freezer = HeapFreezer(lambda: True, delay_s=0)
    freezer.watch()
    try:
        live = Node()
        gc.collect()  # a full collection, as the interpreter runs one under a flood
        await turns()
        assert freezer.freezes == 1 and not tracked(live)
        gc.collect(1)  # a young collection: nothing to do
        await turns()
        assert freezer.freezes == 1
        session_freeze_only = freezer.freezes
        freezer.session_opened()
        await turns()
        # its own collections (the young one before each freeze) do not start another
        assert freezer.freezes == session_freeze_only + 1
    finally:
        freezer.close()
    gc.collect()
    await turns()
    assert freezer.freezes == session_freeze_only + 1  # closed: no longer watching


async def test_an_ended_run_is_freed_by_reference_counting(make_harness):
    """What a full collection would have to find: an ended run kept in a cycle with its
    worker, task and session (the run holds them, they hold the run). Released when its
    end is applied, the run, its worker and its session go with their last reference, the
    collector disabled (issue 11: nothing of an ended run waits for a reclaim)."""
    go = asyncio.Event()

    async def held(session, prompt, turn):
        await go.wait()
        return await complete(session, prompt, turn)

    h = make_harness([make_issue(1)], script=held, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    (run,) = h.orch.running.values()
    assert run.worker is not None and run.session is not None and run.task is not None
    refs = [weakref.ref(o) for o in (run, run.worker, run.session, run.task)]
    del run
    go.set()
    await h.until(lambda: not h.orch.running)
    await h.settle()
    h.backend.sessions.clear()  # the scripted backend's own list of what it started
    gc.disable()
    try:
        await turns()
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()
    await h.orch.shutdown()
