"""End to end: a token budget on the simulated codex agent (``symphony_tui.demo.agent``),
through a real ``symphony-tui --headless`` process and its HTTP API.

The first issue crosses ``agent.max_tokens_per_attempt`` in its first turn: its row reads
``budget reached``, the extension over ``POST /api/v1/commands`` lets it finish its second
turn, and it ends in Done. The second one is stopped instead and stays held.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.request

import pytest

from tests.control import control_headers
from tests.scheduler.test_usage_restart_e2e import REPO, _kill, _start

pytestmark = pytest.mark.slow

WORKFLOW = """\
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
agent:
  backend: codex
  max_turns: 5
  approvals: auto
  max_tokens_per_attempt: 50
codex:
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'
  read_timeout_ms: 20000
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: budget-1
    identifier: BUD-1
    title: Extended
    description: "[demo: two-turns]"
    state: Todo
  - id: budget-2
    identifier: BUD-2
    title: Stopped
    description: "[demo: two-turns]"
    state: Todo
"""


def _get(url: str, path: str) -> dict:
    with urllib.request.urlopen(f"{url}{path}", timeout=10) as response:
        return json.loads(response.read())


def _send(url: str, command: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/api/v1/commands",
        data=json.dumps(command).encode(),
        headers={"Content-Type": "application/json", **control_headers(url)},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _wait(url: str, predicate, what: str, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        snap = _get(url, "/api/v1/snapshot")
        if predicate(snap):
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached: {snap['running']}")
        time.sleep(0.2)


def _row(snap: dict, identifier: str) -> dict | None:
    return next((r for r in snap["running"] if r["issue_identifier"] == identifier), None)


def _held(identifier: str):
    """The run is held: over its budget, and its interrupted turn is over."""

    def held(snap: dict) -> bool:
        row = _row(snap, identifier) or {}
        return bool(row.get("budget_reached")) and row["status"] == "waiting_for_operator"

    return held


def test_a_budget_holds_the_run_until_the_operator_extends_or_stops_it(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "WORKFLOW.md").write_text(WORKFLOW)
    (project / "issues.yaml").write_text(textwrap.dedent(ISSUES))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "SYMPHONY_PYTHON": sys.executable,
        "SYMPHONY_DEMO_SPEED": "0",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("XDG_STATE_HOME", None)

    proc, url = _start(project, env)
    try:
        snap = _wait(url, lambda s: _held("BUD-1")(s) and _held("BUD-2")(s), "both held")
        row = _row(snap, "BUD-1")
        assert row["turn_count"] == 1 and "tokens per attempt" in row["budget_reached"]
        used = row["tokens"]["total_tokens"]
        time.sleep(1.5)  # held means no further turn and no further tokens
        later = _row(_get(url, "/api/v1/snapshot"), "BUD-1")
        assert later["turn_count"] == 1 and later["tokens"]["total_tokens"] == used

        extended = _send(url, {"type": "extend_budget", "issue_id": "BUD-1", "tokens": 10**9})
        assert extended["ok"] is True, extended
        stopped = _send(url, {"type": "interrupt", "issue_id": "BUD-2"})
        assert stopped["ok"] is True, stopped
        snap = _wait(url, lambda s: not s["running"], "no runs left")
        issues = {i["identifier"]: i for i in snap["issues"]}
        assert issues["BUD-1"]["state"] == "Done"
        assert issues["BUD-2"]["state"] == "Todo"
        assert issues["BUD-2"]["note"] == "held by operator"
        events = _get(url, "/api/v1/events?limit=2000")
    finally:
        _kill(proc)
    messages = [e["message"] for e in events if e.get("issue_identifier") == "BUD-2"]
    assert any("budget reached" in m and "stopped by operator" in m for m in messages), messages
