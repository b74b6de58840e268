"""The handle a scheduler part holds on the loop (docs/architecture.md "Who owns which
state"): it posts typed inputs (``inbox.py``), asks and waits for the loop's reply, and
starts tracked tasks. The orchestrator is the only implementation; a part never changes
the state from a task of its own, it posts what happened and the loop applies it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from symphony_tui.scheduler.inbox import Input


class Mailbox(Protocol):
    """The loop's mailbox, as a part sees it."""

    def post(self, item: Input, *, control: bool = False) -> None:
        """Queue ``item`` (on the control lane with ``control``); never blocks or yields.
        Once the loop is gone, an input's ``reply`` is answered with None."""
        ...

    async def ask(self, item: Input, *, control: bool = False) -> Any:
        """Post ``item`` with a reply future and return the handler's result (None once
        the loop is gone)."""
        ...

    async def barrier(self) -> None:
        """Return once every input posted before the call was handled and the manifest
        writes they made are on disk."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task:
        """Run ``coro`` as a task the scheduler tracks (cancelled at shutdown; a failure
        is logged and said in the history)."""
        ...
