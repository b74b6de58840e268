"""Start a task's first step now, in the caller's turn of the loop (issue 11, "control never
starves").

A server request is served in a task of its own (``steering.RequestServing``), and a new task
takes its first step only on the loop's next turn, after everything queued meanwhile: under a
flood a turn of the scheduler's loop holds readers' batches, the scheduling loop's inputs
and the API, so an approval request read from the agent was filed with the approval desk
(and visible to the operator) a whole turn later, 100+ ms on a loaded 2-core machine.
:func:`start_now` runs the coroutine up to its first suspension at once, as Python 3.12's
``asyncio.Task(..., eager_start=True)`` does (used there), and hands the rest to a task.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_now(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """``coro`` as a task whose first step has already run (up to its first ``await`` that
    suspends); a future with its result or exception when it finished in that step.
    Call it from a coroutine or callback on the running loop."""
    loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True)
    try:
        first = coro.send(None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except BaseException as exc:  # as a task would hold it
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_rest(coro, first))


async def _rest(coro: Coroutine[Any, Any, T], first: Any) -> T:
    return await _Resumed(coro, first)


class _Resumed:
    """Awaitable: what ``coro`` yielded in its first step (a future it waits on), then the
    rest of ``coro``, values and exceptions passed through as ``await`` would."""

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self._coro, self._first
        self._first = None
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in by the task (a cancellation)
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
