"""A codex turn on a worker host survives a ``kill -9`` of the scheduler.

The scheduler is a real headless subprocess with one worker host (a real sshd on
127.0.0.2); codex 0.171.0 runs detached on that host (``codex.transport: unix``) against
the fake model server. The issue's turn asks for an escalated shell command; the scheduler
is killed with SIGKILL while the approval waits. A new scheduler reaches the host, finds the
agent in the host's manifest and re-adopts it instead of reaping it: the same process, the
same thread and turn, the approval asked again and answered after the restart, the command
run in the host's workspace, the issue done. Nothing is left running on the host.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from symphony_tui.agents.codex.detached import DetachedAgent
from symphony_tui.workspaces.manifest import read_section
from symphony_tui_testing.codex_env import make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.integration.codex_e2e import DONE, make_e2e_project
from tests.integration.test_real_codex_readopt import ISSUE_TEXT, Scheduler, approvals, wait
from tests.real_programs import require_codex

pytestmark = [pytest.mark.real_codex, pytest.mark.slow]


def _with_host(workflow: Path, host: str, root: Path, codex_env: dict[str, str]) -> None:
    text = workflow.read_text()
    _, front, body = text.split("---\n", 2)
    data = yaml.safe_load(front)
    data["codex"]["env"] = codex_env  # the host gets codex.env, not this environment
    data["worker"] = {"ssh_hosts": [host], "workspace_root": str(root)}
    workflow.write_text("---\n" + yaml.safe_dump(data, sort_keys=False) + "---\n" + body)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_kill_9_a_restarted_scheduler_readopts_the_run_on_the_host(tmp_path, fleet):
    codex = require_codex()
    with FakeModelServer(slow_delay=0.05) as fake:
        fake.aliases.update(STEP2=DONE)
        project = make_e2e_project(
            tmp_path, fake, issues=[("E2E-1", ISSUE_TEXT)], max_turns=2,
            codex={"command": f"{codex} app-server", "transport": "unix"},
        )  # fmt: skip
        host_root = tmp_path / "host-ws"
        codex_env = make_codex_home(tmp_path / "host-codex-home", fake.url)
        _with_host(project.workflow, fleet.names[1], host_root, codex_env)
        project.env.update(fleet.env)
        ws = host_root / "E2E-1"
        first = Scheduler(project, "first")
        second = None
        agent = None
        try:
            before = wait(lambda: approvals(first), timeout=90)
            # the host's manifest (same machine), once its writes over ssh landed
            session = wait(lambda: (s := read_section(ws, "session")).get("turn_id") and s)
            agent = DetachedAgent.from_facts(session.get("agent"))
            assert agent is not None and agent.host == fleet.names[1]
            thread_id, turn_id = session["thread_id"], session["turn_id"]

            os.kill(first.proc.pid, signal.SIGKILL)  # no shutdown: a crash
            first.proc.wait()
            assert _group_alive(agent.pgid), "the app-server died with the scheduler"

            restart_at = datetime.now(UTC)
            second = Scheduler(project, "second")
            after = wait(lambda: approvals(second), timeout=90)
            assert after[0]["issue_identifier"] == "E2E-1"
            assert after[0]["kind"] == before[0]["kind"] == "command"
            second.command({"type": "approve", "approval_id": after[0]["id"]})
            wait(lambda: "state: Done" in project.issues_file.read_text(), timeout=90)
            assert (ws / "proof.txt").read_text().strip() == "approved"
            events = wait(
                lambda: [e for e in second.events() if e["kind"] == "run_ended"] and second.events()
            )
        finally:
            first.stop()
            if second is not None:
                second.stop()
            if agent is not None and _group_alive(agent.pgid):
                os.killpg(agent.pgid, signal.SIGKILL)
                pytest.fail("the scheduler's stop left the host's app-server running")
        events = [e for e in events if datetime.fromisoformat(e["at"]) >= restart_at]
        (dispatched,) = [e for e in events if e["kind"] == "dispatch"]
        assert dispatched["message"].startswith("re-adopted E2E-1")
        assert f"on {fleet.names[1]}" in dispatched["message"]
        (started,) = [e for e in events if e["kind"] == "session_started"]
        assert started["payload"]["thread_id"] == thread_id
        assert started["payload"]["pid"] == agent.pid
        turns = [e["payload"] for e in events if e["kind"] == "turn_started"]
        assert turns[0]["turn_id"] == turn_id and turns[0]["adopted"] is True
        # the model was asked for the command once (the turn was not redone)
        assert fake.decisions() == ["shell", "text", "tool", "text"]
        assert read_section(ws, "session")["agent"]["adoptable"] is False
