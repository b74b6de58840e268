"""An OpenHands conversation survives a ``kill -9`` of the scheduler: the managed
agent-server 1.58.2 (against the fake model) is not tied to the scheduler by a pipe, and
the next scheduler takes it over from its 0600 record instead of starting another. The
confirmation asked before the kill is still pending on that server (OpenHands keeps it);
the restarted scheduler re-attaches to the recorded conversation, shows it in its
approvals, and the operator's answer reaches the agent: the command runs and the run ends
with the issue Done, the prompt not sent again. Stopping the second scheduler ends the
server."""

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

from .real_openhands_project import make_project
from .test_real_codex_readopt import Scheduler, approvals, wait

pytestmark = pytest.mark.real_openhands


@dataclass
class Project:
    root: Path
    workflow: Path
    env: dict[str, str]


def test_kill_9_mid_turn_the_conversation_goes_on_and_the_answer_reaches_the_agent(tmp_path):
    with FakeModelServer() as fake:
        made = make_project(tmp_path, fake, description="SHELL: echo approved > proof.txt")
        project = Project(tmp_path, made.workflow, made.env)
        record = tmp_path / "state" / "symphony-tui" / "openhands" / "server.json"
        first = Scheduler(project, "first")
        second = None
        try:
            before = wait(lambda: approvals(first), timeout=120)
            server = json.loads(record.read_text())
            assert record.stat().st_mode & 0o077 == 0  # it holds the server's API key
            conversation = read_section(made.workspace, "session")["conversation_id"]
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait()
            assert start_ticks(server["pid"]) == server["start_ticks"]  # still serving

            restart_at = datetime.now(UTC)
            second = Scheduler(project, "second")
            after = wait(lambda: approvals(second), timeout=120)
            assert after[0]["issue_identifier"] == made.workspace.name
            assert after[0]["kind"] == before[0]["kind"]

            def approve_all() -> bool:  # the tracker tool asks too
                for pending in approvals(second):
                    second.command({"type": "approve", "approval_id": pending["id"]})
                return "state: Done" in made.issues_file.read_text()

            wait(approve_all, timeout=120, step=0.2)
            assert (made.workspace / "proof.txt").read_text().strip() == "approved"
            events = second.events(since=restart_at)
            assert json.loads(record.read_text())["pid"] == server["pid"]  # taken over
            started = [e for e in events if e["kind"] == "session_started"]
            assert started[0]["payload"]["session_id"] == conversation
            assert started[0]["payload"]["resumed"] is True
            # the issue's prompt went to the model once: the turn was not redone
            assert fake.decisions().count("shell") == 1
            second.stop()
            assert start_ticks(server["pid"]) is None  # an operator's stop ends it
            assert not record.exists()
        finally:
            first.stop()
            if second is not None:
                second.stop()
            left = record.exists() and json.loads(record.read_text())
            if left:
                os.killpg(left["pid"], signal.SIGKILL)
