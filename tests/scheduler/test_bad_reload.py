"""A running scheduler evaluates an edited WORKFLOW.md off its event loop: its API answers
while a bad file is evaluated, and the last good workflow stays."""

from __future__ import annotations

import asyncio
import threading

import httpx

from symphony_tui.api.server import ApiServer
from symphony_tui.config import store as store_module
from tests.config.test_bounded_workflow import alias_bomb
from tests.scheduler.conftest import make_issue


async def test_the_api_answers_during_a_bad_reload_and_the_good_file_stays(
    make_harness, monkeypatch
) -> None:
    h = make_harness([make_issue(1)], front="agent:\n  max_concurrent_agents: 1\n")
    await h.start()
    await h.settle()
    good = h.store.current
    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    entered, release = threading.Event(), threading.Event()
    evaluate = store_module.parse_within

    def held(path, data, env=None):
        # The evaluation is held until the API has answered: were it on the event loop,
        # the request below could never be served.
        entered.set()
        release.wait(30)
        return evaluate(path, data, env)

    monkeypatch.setattr(store_module, "parse_within", held)
    path = h.store.path
    path.write_text(path.read_text().replace("---\nWork", alias_bomb() + "---\nWork"))
    tick = asyncio.ensure_future(h.orch.tick())
    try:
        assert await asyncio.to_thread(entered.wait, 30)
        async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
            answer = await client.get("/api/v1/state")
        assert answer.status_code == 200 and "counts" in answer.json()
    finally:
        release.set()
        await tick
        await api.stop()
    error = h.orch.snapshot().config_error or ""
    assert "expands to more than 200000 values" in error and "\n" not in error
    assert h.store.current is good
