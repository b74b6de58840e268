"""Start a task's first step now, in the caller's turn of the loop, so an agent's request
is not starved by a flood.

A server request is served in a task of its own (``server_requests.ServerRequests``), and a new task
takes its first step only on the loop's next turn, after everything queued meanwhile: under a
flood a turn of the scheduler's loop holds readers' batches, the scheduling loop's inputs
and the API, so an approval request read from the agent would be filed with the approval
desk (and visible to the operator) a whole turn later, 100+ ms on a loaded 2-core machine.
:func:`start_now` runs the coroutine up to its first suspension at once, as Python 3.12's
``asyncio.Task(..., eager_start=True)`` does (used there), and hands the rest to a task.

:class:`SessionTasks` holds the tasks a session starts for itself, so closing it cancels them.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class SessionTasks:
    """The background tasks of one session (idle fallbacks, server requests being served):
    each is held until it ends; :meth:`cancel` cancels those still running."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def spawn_now(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """:meth:`spawn`, the first step run at once (:func:`start_now`)."""
        task = start_now(coro)
        if not task.done():
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return task

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


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
    return loop.create_task(_Resumed(coro, first))


class _Resumed(Coroutine[Any, Any, Any]):
    """``coro`` after its first step, as the coroutine a task runs: the task's first
    ``send`` gets what ``coro`` yielded then (the future it waits on), every later ``send``
    and ``throw`` goes to ``coro``. A task cancelled before its first step throws into
    ``coro`` at once, so ``coro``'s cleanup runs then, not when it is collected."""

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first: Any = first
        self._started = False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            first, self._first = self._first, None
            return first
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._started = True
        self._first = None
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # pragma: no cover - the three-argument form

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("run by its task only")
