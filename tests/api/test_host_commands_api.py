"""``POST /api/v1/commands`` carries ``drain_host`` / ``undrain_host`` / ``probe_host``
like the hosts screen's keys: the snapshot shows the drain, a refusal is 409
with its one-line reason, a bad body 400, and each is in the audit log via the HTTP API."""

from __future__ import annotations

import httpx

from symphony_tui.api.server import ApiServer

HOSTS = "worker:\n  ssh_hosts: [build-1, 'ci@build-2:2222']\n  connect_timeout_ms: 1000\n"


async def test_drain_and_undrain_a_host_over_http(make_harness):
    h = make_harness([], front=HOSTS)
    # Not reached at start-up: the hosts stay as listed (tests/scheduler/test_host_commands.py).
    h.orch.dispatcher.probes.start = lambda *args, **kwargs: None
    await h.start()
    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as client:
            r = await client.post(
                "/api/v1/commands", json={"type": "drain_host", "host": "ci@build-2:2222"}
            )
            assert r.status_code == 200, r.text
            assert r.json() == {
                "ok": True,
                "message": "ci@build-2:2222 drained: no new issues go there (0 running there go on)",
            }
            hosts = (await client.get("/api/v1/snapshot")).json()["hosts"]
            assert [(x["name"], x["drained"]) for x in hosts] == [
                ("build-1", False),
                ("ci@build-2:2222", True),
            ]
            unknown = await client.post(
                "/api/v1/commands", json={"type": "undrain_host", "host": "build-3"}
            )
            assert unknown.status_code == 409
            assert "no worker host 'build-3'" in unknown.json()["message"]
            up = await client.post(
                "/api/v1/commands", json={"type": "probe_host", "host": "build-1"}
            )
            assert up.status_code == 200
            assert up.json()["message"] == "measuring the round trip to build-1"
            bad = await client.post("/api/v1/commands", json={"type": "drain_host", "host": " "})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_command"
            back = await client.post(
                "/api/v1/commands", json={"type": "undrain_host", "host": "ci@build-2:2222"}
            )
            assert back.status_code == 200 and back.json()["message"] == (
                "ci@build-2:2222 takes new work again"
            )
            audit = (await client.get("/api/v1/audit")).json()
    finally:
        await api.stop()
    entries = audit["entries"] if isinstance(audit, dict) else audit
    got = [(e["what"], e["ok"], e["via"].split(" from ")[0]) for e in entries]
    assert got == [
        ("drain_host", True, "HTTP API"),
        ("undrain_host", False, "HTTP API"),
        ("probe_host", True, "HTTP API"),
        ("drain_host", False, "HTTP API"),  # refused as invalid (a blank host), audited too
        ("undrain_host", True, "HTTP API"),
    ]
