"""End to end, without an account: a demo agent's turn survives a ``kill -9`` of the
scheduler (``codex.transport: unix``).

Two real ``symphony-tui --headless`` processes on one project (a local tracker and the
simulated codex agent, ``symphony_tui.demo.agent``, which the scheduler starts detached with
``--listen unix://...``). The issue's turn asks for an approval; the scheduler, whose
manifest writes are slowed down, is killed with SIGKILL the moment the approval shows, and
the agent goes on: what re-adoption needs was on disk before the first turn. The next scheduler re-adopts it before any
dispatch: the same agent process, thread and turn; the approval asked again and answered
there reaches the agent (its command runs), the turn completes and moves the issue to Done.
The issue is dispatched once by each scheduler (the second time as a re-adoption), never
started again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.codex.detached import DetachedAgent, alive
from symphony_tui.workspaces.manifest import read_section
from tests.control import control_headers
from tests.helpers import until_blocking
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
  max_turns: 3
  approvals: operator
codex:
  command: '"${SYMPHONY_PYTHON}" -m symphony_tui.demo.agent'
  transport: unix
  read_timeout_ms: 20000
  stall_timeout_ms: 120000
---
Work on {{ issue.identifier }}. {{ issue.description }}
"""

ISSUES = """\
issues:
  - id: adopt-1
    identifier: ADO-1
    title: Release
    description: "[demo: approval]"
    state: Todo
"""


def _get(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return json.loads(r.read())


def _approvals(url: str) -> list[dict[str, Any]]:
    return _get(url, "/api/v1/snapshot").get("approvals") or []


def _events(url: str) -> list[dict[str, Any]]:
    return _get(url, "/api/v1/events?since=0&limit=10000")


def _approve(url: str, approval_id: str) -> None:
    req = urllib.request.Request(
        url + "/api/v1/commands",
        data=json.dumps({"type": "approve", "approval_id": approval_id}).encode(),
        headers={"Content-Type": "application/json", **control_headers(url)},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


def _slow_disk(tmp_path: Path) -> Path:
    """A folder whose ``sitecustomize`` makes every manifest write of the process take a
    second (a slow or busy disk)."""
    folder = tmp_path / "slow-disk"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        textwrap.dedent(
            """\
            import time

            from symphony_tui.workspaces import manifest_writer

            _merge = manifest_writer.merge_section


            def _slow_merge(ws, section, fields):
                time.sleep(1.0)
                _merge(ws, section, fields)


            manifest_writer.merge_section = _slow_merge
            """
        )
    )
    return folder


def test_kill_9_while_an_approval_waits_the_demo_agent_is_re_adopted(tmp_path):
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
    path = env["PYTHONPATH"]
    ws = project / "workspaces" / "ADO-1"
    release = ws / "RELEASE-ADO-1.txt"
    first = second = None
    agent = None
    try:
        # The first scheduler's disk is slow (each manifest write takes a second) and it is
        # killed the moment its approval shows, without waiting for any manifest write:
        # what re-adoption needs (the agent, its thread) must be on disk already.
        first, url = _start(project, {**env, "PYTHONPATH": f"{_slow_disk(tmp_path)}:{path}"})
        asked = until_blocking(lambda: _approvals(url), 90.0)
        told = _events(url)  # the turn in flight, as the first scheduler saw it
        _kill(first)  # SIGKILL, the scheduler's own process group: the agent is in its own
        session = read_section(ws, "session")
        agent = DetachedAgent.from_facts(session.get("agent"))
        assert agent is not None and alive(agent), session
        assert "thread_id" in session, session
        assert alive(agent), "the demo agent died with the scheduler"
        assert not release.exists()

        restart_at = datetime.now(UTC)
        second, url = _start(project, env)
        again = until_blocking(lambda: _approvals(url), 90.0)
        assert again[0]["issue_identifier"] == "ADO-1"
        assert again[0]["kind"] == asked[0]["kind"] == "command"
        _approve(url, again[0]["id"])
        until_blocking(lambda: "state: Done" in (project / "issues.yaml").read_text(), 90.0)
        events = until_blocking(
            lambda: (e := _events(url)) and any(x["kind"] == "run_ended" for x in e) and e, 60.0
        )
        assert release.read_text().startswith("release approved")
        until_blocking(lambda: not alive(agent), 30.0, what="the agent ended with its run")
    finally:
        for proc in (first, second):
            if proc is not None:
                _kill(proc)
        if agent is not None and alive(agent):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(agent.pgid, signal.SIGKILL)
    # the second scheduler's own events (its history also holds the first one's)
    (turn_id,) = [e["payload"]["turn_id"] for e in told if e["kind"] == "turn_started"]
    thread_id = session["thread_id"]
    events = [e for e in events if datetime.fromisoformat(e["at"]) >= restart_at]
    mine = [e for e in events if e.get("issue_identifier") == "ADO-1"]
    kinds = [e["kind"] for e in mine]
    (dispatched,) = [e for e in mine if e["kind"] == "dispatch"]
    assert dispatched["message"].startswith("re-adopted ADO-1")
    assert kinds.index("dispatch") < kinds.index("session_started")
    (started,) = [e["payload"] for e in mine if e["kind"] == "session_started"]
    assert started["resumed"] is True and started["thread_id"] == thread_id
    assert started["pid"] == agent.pid  # the same agent process
    turns = [e["payload"] for e in mine if e["kind"] == "turn_started"]
    assert turns == [turns[0]] and turns[0]["turn_id"] == turn_id and turns[0]["adopted"]
    ended = [e["payload"] for e in mine if e["kind"] == "turn_completed"]
    assert [t["turn_id"] for t in ended] == [turn_id]
    (run_end,) = [e["payload"] for e in mine if e["kind"] == "run_ended"]
    assert run_end["outcome"] == "normal"
    # the issue was not started again by the first scheduler either: one thread, one turn
    saved = json.loads((ws / ".symphony-demo" / "threads" / f"{thread_id}.json").read_text())
    assert [t["id"] for t in saved["turns"]] == [turn_id]
    assert not list((ws / ".symphony-demo" / "threads").glob("*.json"))[1:]
