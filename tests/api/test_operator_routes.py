"""The operator's tool endpoints: /metrics, /api/v1/audit, /api/v1/diff, and the remote
port reaching them the way an attached console does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.api.client import RemotePort
from symphony_tui.api.server import ApiServer
from symphony_tui.domain import ApprovalKind, ApprovalRequest
from symphony_tui.domain.commands import PauseDispatch, StopScheduler
from symphony_tui.scheduler.audit import local_operator
from symphony_tui.trackers.base import TrackerError
from tests.scheduler.conftest import make_issue


async def asking(session, prompt, turn):
    await session.host.request_approval(
        ApprovalRequest(id="ap-1", issue_id="", kind=ApprovalKind.COMMAND, command="make")
    )
    return TurnResult(TurnStatus.COMPLETED)


@pytest.fixture
async def served(make_harness):
    h = make_harness([make_issue(1)], script=asking, front="agent:\n  max_turns: 1\n")
    await h.start()
    await h.settle()
    api = ApiServer(h.orch, bind_port=0)
    await api.start()
    async with httpx.AsyncClient(base_url=api.url, headers=api.control_headers()) as client:
        yield h, api, client
    await api.stop()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_in_the_prometheus_text_format(served):
    h, _api, client = served
    for _ in range(3):  # the same failure again counts too (it is logged once)
        h.orch.state.tracker_failed(TrackerError("linear_api_status", "503"), "poll")
    r = await client.get("/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    got = samples(r.text)
    assert got[("symphony_running_workers", ())] == 1
    assert got[("symphony_approvals_waiting", ())] == 1
    assert got[("symphony_retrying_issues", ())] == 0
    assert got[("symphony_tracker_up", ())] == 0
    assert got[("symphony_tracker_errors_total", ())] == 3
    # The scripted agent reports no usage: its run is counted as such, never as zero tokens.
    assert not [k for k in got if k[0] == "symphony_tokens_total"]
    assert got[("symphony_running_workers_usage_not_reported", ())] == 1
    assert got[("symphony_runs_usage_not_reported_total", ())] == 0
    hosts = {k: v for k, v in got.items() if k[0] == "symphony_host_running_workers"}
    assert sum(hosts.values()) == 1 and len(hosts) == 1


async def test_audit_lists_commands_with_who_sent_them(served):
    _h, _api, client = served
    sent = await client.post(
        "/api/v1/commands",
        json=PauseDispatch(paused=True).model_dump(),
        headers={"X-Symphony-Operator": "bob@laptop"},
    )
    assert sent.status_code == 200
    await client.post("/api/v1/refresh")
    entries = (await client.get("/api/v1/audit")).json()["entries"]
    assert [(e["what"], e["who"]) for e in entries] == [
        ("pause_dispatch", "bob@laptop"),
        ("refresh", "api"),
    ]
    assert entries[0]["via"].startswith("HTTP API from 127.0.0.1") and entries[0]["ok"] is True
    assert (await client.get("/api/v1/audit", params={"limit": "1"})).json()["entries"][0][
        "what"
    ] == "refresh"
    for bad in ("0", "x", "5000"):
        r = await client.get("/api/v1/audit", params={"limit": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_query"
    assert (await client.get("/api/v1/ABC-1")).status_code == 200  # still an issue route


async def test_a_command_refused_as_invalid_is_audited_too(served):
    _h, _api, client = served
    bad = await client.post(
        "/api/v1/commands",
        json={"type": "stop", "issue": "ABC-1"},  # a wrong field name: issue_id is meant
        headers={"X-Symphony-Operator": "cron@ci"},
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_command"
    torn = await client.post(
        "/api/v1/commands", content=b'{"type": "st', headers={"Content-Type": "application/json"}
    )
    assert torn.status_code == 400
    entries = (await client.get("/api/v1/audit")).json()["entries"]
    assert [(e["what"], e["who"], e["ok"]) for e in entries[-2:]] == [
        ("stop", "cron@ci", False),
        ("command", "api", False),
    ]
    assert entries[-2]["message"].startswith("refused: ") and "issue_id" in entries[-2]["message"]
    assert "not JSON" in entries[-1]["message"]


async def test_an_attached_console_audits_its_actions_on_the_scheduler(served):
    _h, api, client = served
    remote = RemotePort(api.url, control=api.control_token)
    try:
        await remote.send(PauseDispatch(paused=True))
        noted = await remote.note_action("export", detail="log.txt", ok=True, message="3 lines")
        assert noted is not None and noted.who == local_operator()
        entries = await remote.audit_entries()
        assert [(e.what, e.who) for e in entries] == [
            ("pause_dispatch", local_operator()),
            ("export", local_operator()),
        ]
    finally:
        await remote.close()
    bad = await client.post("/api/v1/audit", json={"detail": "no what"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_body"


async def test_diff_of_a_running_workspace_over_the_api(served):
    h, api, client = served
    ws = Path(h.orch.snapshot().running[0].workspace_path)
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x", "--allow-empty"],
        cwd=ws, env=env, check=True,
    )  # fmt: skip
    (ws / "made.txt").write_text("a\nb\n")
    remote = RemotePort(api.url, control=api.control_token)
    try:
        await remote.refresh_once()
        found = await remote.diff("ABC-1")
        assert found.error is None and found.issue_identifier == "ABC-1"
        assert [(f.path, f.added) for f in found.files] == [("made.txt", 2)]
        page = await remote.diff_file("ABC-1", "made.txt", offset=0, limit=50)
        assert "+a" in page.lines and "+b" in page.lines
        outside = await remote.diff_file("ABC-1", "../../etc/passwd")
        assert outside.error and not outside.lines
        missing = await remote.diff("NOPE-9")
        assert missing.error and "404" in missing.error
    finally:
        await remote.close()
    r = await client.get("/api/v1/diff/ABC-1/file")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_query"
    r = await client.get("/api/v1/diff/ABC-1/file", params={"path": "x", "limit": "0"})
    assert r.status_code == 400


async def test_stop_scheduler_needs_the_control_token_and_is_audited_with_who(served):
    """``stop_scheduler`` (an attached console's "Stop N agents") takes the process's own
    stop path once, needs the control token, and the audit log names who sent it."""
    h, api, client = served
    body = StopScheduler().model_dump()
    who = {"X-Symphony-Operator": "bob@laptop"}
    unset = await client.post("/api/v1/commands", json=body, headers=who)
    assert unset.status_code == 409 and "does not take a stop command" in unset.text
    asked: list[str] = []
    h.orch.on_stop_command(asked.append)
    async with httpx.AsyncClient(base_url=api.url) as stranger:  # no control token
        refused = await stranger.post("/api/v1/commands", json=body, headers=who)
    assert refused.status_code == 401 and asked == []
    sent = await client.post("/api/v1/commands", json=body, headers=who)
    assert sent.status_code == 200 and sent.json()["ok"] is True
    assert "stopping the scheduler: 1 agent(s) end" in sent.json()["message"]
    again = await client.post("/api/v1/commands", json=body, headers=who)
    assert again.json()["message"] == "the scheduler is already stopping"
    assert len(asked) == 1  # the process is asked once, told who asked
    assert asked[0].startswith("bob@laptop via HTTP API from ")
    entries = (await client.get("/api/v1/audit")).json()["entries"]
    stops = [(e["what"], e["who"], e["ok"]) for e in entries if e["what"] == "stop_scheduler"]
    assert stops == [
        ("stop_scheduler", "bob@laptop", False),
        ("stop_scheduler", "bob@laptop", True),
        ("stop_scheduler", "bob@laptop", True),
    ]
