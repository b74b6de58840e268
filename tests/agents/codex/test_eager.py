"""``eager.start_now``: a task's first step runs in the caller's turn, the rest as a
task would run it: result, exception and cancellation passed through. And what it is for:
an approval request a codex session reads reaches its host before the reader hands over
the next line (no loop turn in between). No timing: the order is read from what ran."""

from __future__ import annotations

import asyncio
import json

import pytest

from symphony_tui.agents.codex.eager import start_now
from symphony_tui.domain import EventKind
from symphony_tui_testing.session_host import RecordingSessionHost

from .conftest import HANDSHAKE, note, turn_completed, turn_start


async def test_the_first_step_runs_before_start_now_returns_and_the_rest_as_a_task():
    steps: list[str] = []
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def work() -> int:
        steps.append("first")
        got = await gate
        steps.append("rest")
        return got + 1

    task = start_now(work())
    assert steps == ["first"] and not task.done()
    gate.set_result(41)
    assert await task == 42 and steps == ["first", "rest"]


async def test_finished_or_failed_in_the_first_step():
    async def quick() -> str:
        return "done"

    async def broken() -> None:
        raise ValueError("bad request")

    done = start_now(quick())
    assert done.done() and done.result() == "done"
    failed = start_now(broken())
    assert failed.done()
    with pytest.raises(ValueError, match="bad request"):
        failed.result()


async def test_a_cancelled_task_cancels_the_coroutine_where_it_waits():
    seen: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("finally")

    task = start_now(waits())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled", "finally"]


async def test_a_task_cancelled_before_its_next_step_cancels_the_coroutine_at_once():
    # Cancelled in the same turn (a session closed right after a request was filed): the
    # coroutine's cleanup runs at the cancellation, not whenever it is collected.
    seen: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            seen.append("finally")

    task = start_now(waits())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["finally"]


APPROVAL = {
    "id": 5,
    "method": "item/commandExecution/requestApproval",
    "params": {"threadId": "th-1", "turnId": "tu-1", "itemId": "c1", "command": "ls"},
}
AFTER = [f"after the request {i};" for i in range(5)]


def _delta(text: str) -> str:
    params = {"threadId": "th-1", "itemId": "m1", "delta": text}
    return json.dumps({"method": "item/agentMessage/delta", "params": params}) + "\n"


async def test_an_approval_is_with_the_host_before_the_next_line_is_handed_over(
    fake_codex, workspace
):
    # The request and the deltas after it arrive in one read: before, the request's task
    # ran a turn later, after the reader had handed all of them over.
    host = RecordingSessionHost(workspace)
    script = [
        *HANDSHAKE,
        turn_start(),
        note("turn/started", threadId="th-1", turn={"id": "tu-1", "status": "inProgress"}),
        {"raw": json.dumps(APPROVAL) + "\n" + "".join(_delta(t) for t in AFTER)},
        {"expect_response": 5},
        turn_completed(),
    ]
    run = fake_codex(script)
    session = await run.backend.start_session(host)
    result = await session.run_turn("go")
    assert result.status.value == "completed"
    kinds = host.kinds()
    asked = kinds.index(EventKind.APPROVAL_REQUESTED)
    deltas = [i for i, k in enumerate(kinds) if k is EventKind.MESSAGE_DELTA]
    assert [host.events[i].message for i in deltas] == AFTER
    assert asked < deltas[0]
    assert run.responses()[5]["result"] == {"decision": "accept"}
