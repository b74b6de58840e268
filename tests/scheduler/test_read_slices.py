"""Readers share slices of loop time (scheduler/read_slices.py): with a hundred flooding
readers a turn of the event loop holds a few batches, not a hundred, every reader keeps
its order and gets through, and the longest-parked reader goes first. No timing: the
readers' work advances a fake clock."""

from __future__ import annotations

import asyncio
import itertools

from symphony_tui.scheduler.inbox import Inbox
from symphony_tui.scheduler.read_slices import ReadSlices

READERS = 100
BATCHES = 20
BATCH_S = 0.001  # what one batch of lines costs, on the fake clock


async def flood(slices: ReadSlices | None, now: list[float]) -> tuple[list, list[int]]:
    """Run READERS readers of BATCHES batches through ``Inbox.room`` beside a task that
    stands for everything else on the loop (an API request, a command): it notes how many
    batches ran before each of its turns."""
    inbox = Inbox(slices=slices)
    log: list[tuple[int, int]] = []
    turns: list[int] = []

    async def reader(r: int) -> None:
        for i in range(BATCHES):
            now[0] += BATCH_S
            log.append((r, i))
            await inbox.room()

    async def other_work() -> None:
        while len(log) < READERS * BATCHES:
            turns.append(len(log))
            await asyncio.sleep(0)

    await asyncio.gather(other_work(), *(reader(r) for r in range(READERS)))
    return log, turns


def widest_gap(turns: list[int], after: int) -> int:
    """The most batches that ran between two turns of the other work, once ``after``
    batches ran (every reader's first batch runs as its task starts)."""
    return max(b - a for a, b in itertools.pairwise(turns) if a >= after)


async def test_a_turn_holds_a_slice_of_batches_and_every_reader_keeps_its_order():
    now = [0.0]
    log, turns = await flood(ReadSlices(slice_s=0.005, clock=lambda: now[0]), now)
    assert len(log) == READERS * BATCHES
    for r in range(READERS):
        assert [i for who, i in log if who == r] == list(range(BATCHES))
    assert widest_gap(turns, READERS) <= 15  # about a slice's worth (5) plus the let-go


async def test_without_slices_a_turn_holds_every_readers_batch():
    # What the slices fix (and why the test above can fail): one batch per reader per turn.
    now = [0.0]
    never = ReadSlices(slice_s=1e9, clock=lambda: now[0])
    _log, turns = await flood(never, now)
    assert widest_gap(turns, READERS) >= READERS - 1


async def test_the_longest_parked_reader_goes_first():
    now = [0.0]
    slices = ReadSlices(slice_s=0.0, clock=lambda: now[0])  # every reader parks
    order: list[str] = []

    async def reader(name: str) -> None:
        await slices.take()
        order.append(name)

    tasks = [asyncio.create_task(reader(n)) for n in "abcde"]
    cancelled = tasks[1]
    await asyncio.sleep(0)  # all five parked, in this order
    cancelled.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert order == ["a", "c", "d", "e"] and slices.parks == 5


async def test_a_hurried_reader_goes_before_those_parked_earlier():
    # A reader that holds an agent's request (ReadSlices.hurry, through Inbox.hurry) is let
    # go at once; the others keep their order, and hurrying one that is not parked is a no-op.
    now = [0.0]
    inbox = Inbox(slices=ReadSlices(slice_s=0.0, clock=lambda: now[0]))  # every reader parks
    order: list[str] = []

    async def reader(name: str) -> None:
        await inbox.room(key=name)
        order.append(name)

    inbox.hurry("x")  # nobody parked under that key
    tasks = [asyncio.create_task(reader(n)) for n in "abcde"]
    await asyncio.sleep(0)  # all five parked, in this order
    inbox.hurry("d")
    await asyncio.sleep(0)
    assert order == ["d"]  # before the next slice opened for the others
    await asyncio.gather(*tasks)
    assert order == ["d", "a", "b", "c", "e"]
    assert inbox.slices.parks == 5 and inbox.slices.hurried == 1
    inbox.hurry("d")  # gone on: nothing
    assert inbox.slices.hurried == 1
