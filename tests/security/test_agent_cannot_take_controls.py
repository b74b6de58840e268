"""End to end (docs/security.md): an agent cannot answer its own approval.

A real ``symphony-tui --headless`` serves its API on loopback with ``server.auth_token_env``
set; its agent (``hostile_agent.py``: the simulated codex agent plus a companion process in
its process group, working directory and environment) asks for an approval, then reads
every environment and small file it can (the scheduler's ``/proc/<pid>/environ`` and the
0600 control token file included: the test runs them as one user, unsandboxed) and tries
to approve itself every way the API offers. Every attempt is refused and audited, the
secrets never reached it, and the operator's own client approves with the control token.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.control import control_headers, remember_control
from tests.scheduler.test_usage_restart_e2e import REPO, _kill, _start

pytestmark = pytest.mark.slow

HOSTILE = Path(__file__).with_name("hostile_agent.py")
API_TOKEN = "api-token-the-agent-must-not-see-0123456789"
TRACKER_KEY = "lin-key-the-agent-must-not-see-0123456789"
ATTACH_TOKEN = "attach-token-the-agent-must-not-see-0123456789"

WORKFLOW = f"""\
---
tracker:
  kind: local
  path: issues.yaml
  active_states: [Todo, In Progress]
  terminal_states: [Done]
polling:
  interval_ms: 1000
workspace:
  root: workspaces
server:
  auth_token_env: CONTROLS_TEST_TOKEN
agent:
  backend: codex
  max_turns: 1
  approvals: operator
  approval_timeout_ms: 300000
codex:
  command: '"${{SYMPHONY_PYTHON}}" {HOSTILE}'
  approval_policy: on-request
  thread_sandbox: workspace-write
  read_timeout_ms: 20000
  env:
    HOSTILE_REPORT: $HOSTILE_REPORT
---
Work on {{{{ issue.identifier }}}}. {{{{ issue.description }}}}
"""

ISSUES = """\
issues:
  - id: sec-1
    identifier: SEC-1
    title: Asks for approval
    description: "[demo: approval]"
    state: Todo
"""


def _call(url: str, method: str, path: str, body: object = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {API_TOKEN}",
            **control_headers(url),
        },
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _report(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_an_agent_that_reads_everything_cannot_approve_its_own_request(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "WORKFLOW.md").write_text(WORKFLOW)
    (project / "issues.yaml").write_text(textwrap.dedent(ISSUES))
    report = tmp_path / "report.jsonl"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "SYMPHONY_PYTHON": sys.executable,
        "SYMPHONY_DEMO_SPEED": "0",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "CONTROLS_TEST_TOKEN": API_TOKEN,
        "LINEAR_API_KEY": TRACKER_KEY,
        "SYMPHONY_API_TOKEN": ATTACH_TOKEN,
        "HOSTILE_REPORT": str(report),
    }
    env.pop("XDG_STATE_HOME", None)
    (tmp_path / "home").mkdir()
    proc, url = _start(project, env)
    try:
        remember_control(url, env)
        deadline = time.monotonic() + 180
        while not any(item.get("done") or item.get("error") for item in _report(report)):
            assert time.monotonic() < deadline, f"the agent did not finish: {_report(report)}"
            assert proc.poll() is None, "the scheduler exited"
            time.sleep(0.5)
        items = _report(report)
        assert not [i for i in items if "error" in i], items
        found = items[0]["found"]
        assert found["ports"] and found["candidates"] > 0
        attempts = [i for i in items if "what" in i]
        assert len(attempts) > 100
        let_in = [i for i in attempts if 200 <= i["status"] < 300]
        assert not let_in, let_in[:3]
        assert {i["status"] for i in attempts} <= {401, 403, 405}
        # it read the control token file and the scheduler's environment, and still:
        assert any("X-Symphony-Control" in i["credential"] and i["status"] == 403 for i in attempts)
        done = next(i for i in items if i.get("done"))
        for secret in (API_TOKEN, TRACKER_KEY, ATTACH_TOKEN):
            assert secret not in json.dumps(done["env"])
        assert done["env"].get("SYMPHONY_TUI_SCHEDULER_PID") == str(proc.pid)

        status, snap = _call(url, "GET", "/api/v1/snapshot")
        assert status == 200 and len(snap["approvals"]) == 1, snap["approvals"]
        status, audit = _call(url, "GET", "/api/v1/audit?limit=1000")
        refused = [e for e in audit["entries"] if not e["ok"] and "refused" in e["message"]]
        judged = [e for e in refused if "with the control token" in e["via"]]
        assert judged and all(" pid " in e["via"] for e in judged)
        reasons = {e["message"].split(":")[1].strip()[:60] for e in refused}
        assert any("descends from the scheduler" in e["message"] for e in refused), reasons

        # the operator's client, outside the agent's tree, with the token from the note
        status, answer = _call(
            url,
            "POST",
            "/api/v1/commands",
            {"type": "approve", "approval_id": snap["approvals"][0]["id"]},
        )
        assert status == 200 and answer["ok"], answer
        status, audit = _call(url, "GET", "/api/v1/audit?limit=5")
        mine = audit["entries"][-1]
        assert mine["what"] == "approve" and mine["ok"]
        assert f"pid {os.getpid()}" in mine["via"] and "control token" in mine["via"]
    finally:
        _kill(proc)
