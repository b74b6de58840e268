"""A closed codex session is freed by reference counting (what ended runs leave
in reference cycles is found only by a full collection, which must stay short). With the
collector disabled, the session, its RPC connection, its process and asyncio's
subprocess protocol and stdin writer must be gone once the last reference to the session
goes."""

from __future__ import annotations

import asyncio
import gc
import weakref

from symphony_tui.agents.base import TurnStatus

from .conftest import HANDSHAKE, note, turn_completed, turn_start

TURN = [
    *HANDSHAKE,
    turn_start(),
    note("turn/started", threadId="th-1", turn={"id": "tu-1", "status": "inProgress"}),
    note(
        "item/started",
        threadId="th-1",
        item={"type": "fileChange", "id": "f1", "changes": [{"path": "a.txt", "kind": "add"}]},
    ),
    note("item/agentMessage/delta", threadId="th-1", itemId="m1", delta="Hi"),
    turn_completed(),
]


async def test_a_closed_session_is_freed_without_a_collection(fake_codex, host):
    run = fake_codex(TURN)
    session = await run.backend.start_session(host)
    result = await session.run_turn("hi")
    assert result.status == TurnStatus.COMPLETED
    await session.close()
    proc = session._proc
    parts = [session, session._rpc, proc, proc._protocol, proc.stdin, proc._transport]
    refs = [weakref.ref(o) for o in parts if o is not None]
    assert len(refs) >= 5
    del parts, proc
    gc.disable()
    try:
        del session
        # The subprocess transport is let go once the child watcher has reported the exit
        # and the pipes' last callbacks have run: loop turns, later on a loaded machine.
        # With the collector off, only reference counting can free anything meanwhile.
        alive = [type(r()).__name__ for r in refs if r() is not None]
        for _ in range(500):
            if not alive:
                break
            await asyncio.sleep(0.01)
            alive = [type(r()).__name__ for r in refs if r() is not None]
        assert alive == []
    finally:
        gc.enable()
