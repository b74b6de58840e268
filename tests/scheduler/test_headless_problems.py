"""Headless mode reports config and tracker errors on stderr from the scheduler's state,
without building a snapshot each time it looks (five times a second: at 200 flooding
workers that costs 5 % of the scheduler's CPU)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from symphony_tui import headless
from symphony_tui.runtime import Runtime


async def test_problems_are_reported_once_and_no_snapshot_is_built_to_look(
    make_harness, monkeypatch, capsys
):
    monkeypatch.setattr(headless, "IDLE_POLL_S", 0.001)
    h = make_harness([])
    looks: list[str] = []
    real = h.orch.snapshot

    def snapshot():
        looks.append(sys._getframe(1).f_code.co_name)
        return real()

    monkeypatch.setattr(h.orch, "snapshot", snapshot)
    h.orch.state.set_config_error("workflow_parse_error: bad yaml")
    h.orch.state.tracker_error = "linear 429"
    runtime = Runtime(orchestrator=h.orch, store=h.store, lock=None)
    task = asyncio.create_task(headless.run_headless(runtime))
    for _ in range(200):  # polls of the headless loop
        await asyncio.sleep(0.001)
    os.kill(os.getpid(), signal.SIGTERM)  # what stops it (its signal handler)
    assert await asyncio.wait_for(task, 30) == 0
    err = capsys.readouterr().err
    assert err.count("symphony-tui: config error: workflow_parse_error: bad yaml") == 1
    assert err.count("symphony-tui: tracker error: linear 429") == 1
    assert "report_problems" not in looks
