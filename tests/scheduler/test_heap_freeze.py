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
from symphony_tui_testing.scripted_backend import complete, hang
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


def cycles(n: int, keep: list) -> list[weakref.ref]:
    """``n`` cycles kept by ``keep`` (3 * n tracked objects with their weak references,
    which the caller keeps), moved to the old generation: garbage there once ``keep`` is
    cleared, which the next freeze freezes (as a cycle that became garbage between two
    full collections)."""
    made = [cycle(keep) for _ in range(n)]
    gc.collect(1)  # the survivors of the young generations move to the old one
    return made


async def test_frozen_cycles_are_reclaimed_once_the_frozen_heap_has_grown_enough():
    freezer = HeapFreezer(lambda: True, delay_s=0, growth=0.0, min_objects=5_000)
    freezer.session_opened()
    await turns()
    assert freezer.base is not None  # the first freeze's size: what growth counts from
    run: list = []
    kept = cycles(500, run)
    freezer.session_opened()
    await turns()
    run.clear()  # the run ended: its cycles are garbage, frozen
    gc.collect()
    assert all(k() is not None for k in kept)  # frozen: a full collection does not reach them
    freezer.run_ended()
    await turns()
    assert freezer.reclaims == 0  # ~1,500 objects: not grown enough
    kept += cycles(2_000, run)
    run.clear()  # garbage in the old generation
    freezer.session_opened()
    await turns()  # frozen with it; the frozen heap has grown enough
    assert freezer.reclaims == 1
    assert all(k() is None for k in kept)
    assert gc.get_freeze_count() > 0  # frozen again after the reclaim


async def test_live_objects_a_reclaim_finds_do_not_make_the_next_one_due():
    """Runs that start add their live objects to the frozen heap: the reclaim that finds
    them alive counts them in its new size, so they are not collected again and again."""
    freezer = HeapFreezer(lambda: True, delay_s=0, growth=0.0, min_objects=5_000)
    freezer.session_opened()
    await turns()
    live = [Node() for _ in range(10_000)]  # many runs' long-lived objects
    freezer.session_opened()
    await turns()
    await turns()
    assert freezer.reclaims == 1  # grown: collected once, nothing of it was garbage
    assert not tracked(live[0])
    for _ in range(3):
        freezer.session_opened()
        freezer.run_ended()
        await turns()
    assert freezer.reclaims == 1


async def test_the_growth_that_makes_a_reclaim_due_is_relative_to_the_frozen_heap():
    freezer = HeapFreezer(lambda: True, delay_s=0, growth=1.0, min_objects=0)
    freezer.session_opened()
    await turns()
    base = freezer.base
    assert base is not None and base > 0
    run: list = []
    kept = cycles(base // 6, run)  # about half the frozen heap's size
    freezer.session_opened()
    await turns()
    run.clear()
    freezer.run_ended()
    await turns()
    assert freezer.reclaims == 0 and kept[0]() is not None
    kept += cycles(base // 3 + 1, run)  # now more than doubled
    run.clear()
    freezer.session_opened()
    await turns()
    assert freezer.reclaims == 1 and kept[0]() is None


async def test_the_frozen_heap_is_counted_only_when_a_reclaim_may_be_due(monkeypatch):
    """Counting the permanent generation walks every frozen object, so a freeze that
    moves too little for a reclaim to be due does not count it; when its bound says one
    may be due it is counted exactly, and frozen objects freed since do not count."""
    counted: list[int] = []
    real = gc.get_freeze_count
    monkeypatch.setattr(heap_freeze.gc, "get_freeze_count", lambda: counted.append(1) or real())
    freezer = HeapFreezer(lambda: True, delay_s=0, growth=1.0, min_objects=0)
    freezer.session_opened()
    await turns()
    base = freezer.base
    assert base is not None and base > 0 and len(counted) == 1  # the first freeze's size
    first = [Node() for _ in range(int(base * 0.6))]  # a run's objects: 0.6 of the base
    freezer.session_opened()
    await turns()
    assert not tracked(first[0]) and len(counted) == 1  # frozen, not counted
    del first  # that run ended: freed by reference counting, out of the frozen heap
    second = [Node() for _ in range(int(base * 0.6))]  # the bound now passes 2 x base
    freezer.session_opened()
    await turns()
    assert not tracked(second[0])
    assert len(counted) == 2  # the bound said due: counted exactly
    assert freezer.reclaims == 0  # and it was not (1.6 x base, not 2)


async def test_the_reclaim_waits_for_a_quiet_inbox_but_not_forever():
    quiet = [False]
    freezer = HeapFreezer(lambda: quiet[0], delay_s=0, growth=0.0, min_objects=5_000)
    freezer.session_opened()
    await turns()
    run: list = []
    kept = cycles(2_000, run)  # 6,000 objects: due
    run.clear()
    freezer.session_opened()
    await turns()
    assert freezer.reclaims == 0 and kept[0]() is not None  # busy: later
    quiet[0] = True
    await turns()
    assert freezer.reclaims == 1 and kept[0]() is None
    quiet[0] = False
    kept = cycles(5_000, run)  # 15,000: over twice the due growth, reclaimed though busy
    run.clear()
    freezer.session_opened()
    await turns()
    assert freezer.reclaims == 2 and kept[0]() is None


async def test_close_cancels_a_pending_freeze():
    freezer = HeapFreezer(lambda: True, delay_s=0)
    freezer.session_opened()
    freezer.close()
    await turns()
    assert freezer.freezes == 0 and gc.get_freeze_count() == 0


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
    collector disabled (nothing of an ended run waits for a reclaim)."""
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


async def test_an_attached_or_fleet_console_freezes_and_watches_while_it_follows():
    """``symphony-tui attach`` and ``fleet`` run their link under the freezer (cli.py):
    start-up's heap is frozen, full collections are followed by a freeze while the link
    runs, and nothing is watched once it ends."""
    from symphony_tui.cli import _heap_watched

    seen: dict[str, object] = {}

    async def follow() -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["watching"] = [cb for cb in gc.callbacks if "HeapFreezer" in repr(cb)]

    await _heap_watched(follow)()
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 0
    assert seen["watching"]
    assert not [cb for cb in gc.callbacks if "HeapFreezer" in repr(cb)]
