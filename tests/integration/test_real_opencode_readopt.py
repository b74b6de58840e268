"""An OpenCode run survives a ``kill -9`` of the scheduler: the managed ``opencode serve``
1.18.33 (against the fake model) is not tied to the scheduler by a pipe, and the next
scheduler takes it over from its 0600 record instead of starting another. The bash
permission asked before the kill is still pending on that server; the restarted scheduler
re-attaches to the recorded session, shows the permission in its approvals, and the
operator's answer reaches the agent: the command runs and the turn completes without the
prompt being sent again. Stopping the second scheduler ends the server."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from symphony_tui.agents.codex.detached import start_ticks
from symphony_tui.workspaces.manifest import read_section
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import opencode_env, server_command
from tests.real_programs import require_opencode

from .test_real_codex_readopt import Scheduler, approvals, wait

pytestmark = pytest.mark.real_opencode


@dataclass
class Project:
    root: Path
    workflow: Path
    env: dict[str, str]


def test_kill_9_mid_turn_the_session_goes_on_and_the_permission_reaches_the_agent(tmp_path):
    oc_bin = require_opencode()
    with FakeModelServer() as fake:
        issues = tmp_path / "issues.yaml"
        issues.write_text(
            "issues:\n  - id: oce-1\n    identifier: OCE-1\n    title: Survive a restart\n"
            '    description: "SHELL: echo approved > proof.txt"\n    priority: 1\n'
            "    state: Todo\n"
        )
        done = f"SHELL: sed -i 's/state: .*/state: Done/' {issues}"
        workflow = tmp_path / "WORKFLOW.md"
        workflow.write_text(
            "---\ntracker:\n  kind: local\n  path: issues.yaml\nworkspace:\n  root: ws\n"
            "polling:\n  interval_ms: 600000\n"
            "agent:\n  backend: opencode\n  max_turns: 2\n  approvals: operator\n"
            f"  continuation_prompt: {json.dumps(done)}\n"
            f"opencode:\n  command: {json.dumps(server_command(oc_bin))}\n"
            "  model: fake/fake-model\n  startup_timeout_ms: 60000\n"
            "---\n{{ issue.description }}\n"
        )
        env = {**os.environ, **opencode_env(tmp_path / "cfg", fake.url)}
        project = Project(tmp_path, workflow, env)
        ws = tmp_path / "ws" / "OCE-1"
        record = tmp_path / "state" / "symphony-tui" / "opencode" / "server.json"
        first = Scheduler(project, "first")
        second = None
        try:
            before = wait(lambda: approvals(first), timeout=60)
            server = json.loads(record.read_text())
            assert record.stat().st_mode & 0o077 == 0  # it holds the server's password
            session_id = read_section(ws, "session")["session_id"]
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait()
            assert start_ticks(server["pid"]) == server["start_ticks"]  # still serving

            restart_at = datetime.now(UTC)
            second = Scheduler(project, "second")
            after = wait(lambda: approvals(second), timeout=60)
            assert after[0]["issue_identifier"] == "OCE-1"
            assert after[0]["kind"] == before[0]["kind"]
            second.command({"type": "approve", "approval_id": after[0]["id"]})

            def approve_all() -> bool:  # turn 2's tracker edit asks too
                for pending in approvals(second):
                    second.command({"type": "approve", "approval_id": pending["id"]})
                return "state: Done" in issues.read_text()

            wait(approve_all, timeout=60, step=0.2)
            assert (ws / "proof.txt").read_text().strip() == "approved"
            events = second.events(since=restart_at)
            # the same server (taken over, not started again) and the same session
            assert json.loads(record.read_text())["pid"] == server["pid"]
            started = [e for e in events if e["kind"] == "session_started"]
            assert started[0]["payload"]["session_id"] == session_id
            assert started[0]["payload"]["resumed"] is True
            turns = [e["payload"] for e in events if e["kind"] == "turn_started"]
            assert turns[0]["adopted"] is True  # the run the server was doing
            # the issue's prompt went to the model once: the turn was not redone
            assert fake.decisions().count("shell") == 2  # the command, then the tracker edit
            second.stop()
            assert start_ticks(server["pid"]) is None  # an operator's stop ends it
            assert not record.exists()
        finally:
            first.stop()
            if second is not None:
                second.stop()
            with_record = record.exists() and json.loads(record.read_text())
            if with_record:
                os.killpg(with_record["pid"], signal.SIGKILL)


def test_a_server_left_by_a_crash_is_taken_over_and_stopped_even_when_no_run_needs_it(tmp_path):
    oc_bin = require_opencode()
    with FakeModelServer() as fake:
        issues = tmp_path / "issues.yaml"
        issues.write_text(
            "issues:\n  - id: oce-1\n    identifier: OCE-1\n    title: Survive a restart\n"
            '    description: "SHELL: echo approved > proof.txt"\n    priority: 1\n'
            "    state: Todo\n"
        )
        workflow = tmp_path / "WORKFLOW.md"
        workflow.write_text(
            "---\ntracker:\n  kind: local\n  path: issues.yaml\nworkspace:\n  root: ws\n"
            "polling:\n  interval_ms: 600000\n"
            "agent:\n  backend: opencode\n  max_turns: 1\n  approvals: operator\n"
            f"opencode:\n  command: {json.dumps(server_command(oc_bin))}\n"
            "  model: fake/fake-model\n  startup_timeout_ms: 60000\n"
            "---\n{{ issue.description }}\n"
        )
        env = {**os.environ, **opencode_env(tmp_path / "cfg", fake.url)}
        project = Project(tmp_path, workflow, env)
        record = tmp_path / "state" / "symphony-tui" / "opencode" / "server.json"
        first = Scheduler(project, "first")
        second = None
        try:
            wait(lambda: approvals(first), timeout=60)
            server = json.loads(record.read_text())
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait()
            # the operator closed the issue meanwhile: nothing will dispatch it again
            issues.write_text(issues.read_text().replace("state: Todo", "state: Done"))
            second = Scheduler(project, "second")
            wait(lambda: json.loads(record.read_text())["owner_pid"] == second.proc.pid)
            assert json.loads(record.read_text())["pid"] == server["pid"]
            assert start_ticks(server["pid"]) == server["start_ticks"]
            second.stop()
            assert start_ticks(server["pid"]) is None  # ended with the scheduler that took it
        finally:
            first.stop()
            if second is not None:
                second.stop()
            left = record.exists() and json.loads(record.read_text())
            if left:
                os.killpg(left["pid"], signal.SIGKILL)
