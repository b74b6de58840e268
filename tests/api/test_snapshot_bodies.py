"""``GET /api/v1/state`` and ``/api/v1/snapshot`` are serialized once per snapshot:
the same snapshot gives the same bytes and tag, a changed state new ones, and a client
holding the current tag gets 304 without a body."""

from __future__ import annotations

import json

import httpx
import pytest

from symphony_tui.api.bodies import SnapshotBodies
from symphony_tui.api.server import ApiServer
from symphony_tui.domain import Snapshot
from tests.scheduler.conftest import make_issue


def test_bodies_are_made_once_per_snapshot_and_again_for_a_new_one(make_harness):
    h = make_harness([make_issue(1)])
    bodies = SnapshotBodies()
    first = h.orch.snapshot()
    state, full, tag = bodies.state(first), bodies.full(first), bodies.etag(first)
    assert json.loads(state) == json.loads(json.dumps(first.state_payload()))
    assert Snapshot.model_validate_json(full) == first
    assert bodies.state(first) is state and bodies.full(first) is full  # not made again
    assert bodies.etag(first) == tag
    h.orch.state.dispatch_paused = not h.orch.state.dispatch_paused
    h.orch.state.changed()
    second = h.orch.snapshot()
    assert second is not first
    assert bodies.etag(second) != tag
    assert Snapshot.model_validate_json(bodies.full(second)).dispatch_paused is (
        second.dispatch_paused
    )
    assert bodies.full(second) != full


@pytest.fixture
async def served(make_harness):
    h = make_harness([make_issue(1)])
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as client:
        yield h, client
    await api.stop()


@pytest.mark.parametrize("path", ["/api/v1/state", "/api/v1/snapshot"])
async def test_a_client_with_the_current_tag_gets_304_until_the_state_changes(served, path):
    _h, client = served
    r = await client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    tag = r.headers["etag"]
    again = await client.get(path)
    if again.headers["etag"] == tag:  # the same snapshot (none was rebuilt in between)
        assert again.content == r.content
    unchanged = await client.get(
        path, headers={"If-None-Match": f'"other", {again.headers["etag"]}'}
    )
    assert unchanged.status_code == 304 and unchanged.content == b""
    await client.post("/api/v1/commands", json={"type": "pause_dispatch", "paused": True})
    changed = await client.get(path, headers={"If-None-Match": unchanged.headers["etag"]})
    assert changed.status_code == 200 and changed.headers["etag"] != unchanged.headers["etag"]
    if path.endswith("snapshot"):
        assert changed.json()["dispatch_paused"] is True
