"""``POST /api/v1/commands`` carries ``steer`` like the console's key."""

from __future__ import annotations

from tests.api.test_http_api import served  # noqa: F401  (shared fixture)


async def test_steer_over_http_reaches_the_running_turn(served):  # noqa: F811
    h, _api, client = served
    r = await client.post(
        "/api/v1/commands", json={"type": "steer", "issue_id": "ABC-1", "text": "use staging"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is True and "running turn" in r.json()["message"]
    assert h.backend.sessions[0].steered == ["use staging"]
    idle = await client.post(
        "/api/v1/commands", json={"type": "steer", "issue_id": "ABC-2", "text": "hello"}
    )
    assert idle.status_code == 409 and "no running worker" in idle.json()["message"]
    empty = await client.post(
        "/api/v1/commands", json={"type": "steer", "issue_id": "ABC-1", "text": "   "}
    )
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_command"
