"""A run attempt that failed says so on its row at once: its status and the one-line
error, while its worker's cleanup (``after_run``, up to ``hooks.timeout_ms``) still runs
(scheduler/worker.py ``Worker.run``)."""

from __future__ import annotations

import asyncio

from symphony_tui.domain import RunStatus
from tests.helpers import until_exists

from .conftest import make_issue


async def test_a_failed_launch_is_on_its_row_while_after_run_runs(make_harness, tmp_path):
    started, release = tmp_path / "after_run.started", tmp_path / "release"
    hook = f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done"
    h = make_harness([make_issue(1)], front=f"hooks:\n  after_run: '{hook}'\n")
    h.backend.fail_start = 1
    await h.start()
    await until_exists(started)
    await h.orch.barrier()
    (row,) = h.orch.snapshot().running
    assert row.status is RunStatus.FAILED
    assert row.error == "launch_failed: scripted launch failure"
    release.touch()
    await h.until(lambda: "id-1" in h.orch.retrying, timeout=60)
    assert h.orch.snapshot().running == ()
    assert h.orch.retrying["id-1"].entry.error == row.error


async def test_a_run_that_has_not_failed_has_no_error(make_harness):
    h = make_harness([make_issue(1)], script=_waits_forever)
    await h.start()
    await h.settle()
    (row,) = h.orch.snapshot().running
    assert row.error is None and row.status is RunStatus.STREAMING_TURN


async def _waits_forever(session, prompt, turn):
    await asyncio.Event().wait()
