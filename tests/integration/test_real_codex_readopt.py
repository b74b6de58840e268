"""A codex turn survives a ``kill -9`` of the scheduler (``codex.transport: unix``).

The scheduler is a real headless subprocess; codex 0.171.0 runs detached on a unix socket
against the fake model server. The issue's turn asks for an escalated shell command, so
codex asks for an approval; the scheduler is killed with SIGKILL while the approval waits.
The app-server goes on. A new scheduler re-adopts it before any dispatch: the same process,
the same thread and the same turn (no ``thread/start``, no new ``turn/start`` for it), the
pending approval re-sent by codex and shown in its approvals; the operator's answer after
the restart reaches the agent (the command runs), the turn completes, and the attempt goes
on to its next turn. Stopping the second scheduler leaves nothing running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.codex.detached import DetachedAgent, alive
from symphony_tui.workspaces.manifest import read_section
from symphony_tui_testing.fake_model import FakeModelServer

from ..control import control_headers, remember_control
from .codex_e2e import DONE, make_e2e_project

pytestmark = pytest.mark.real_codex

ROOT = Path(__file__).resolve().parents[2]
ISSUE_TEXT = "ESCALATE SHELL: echo approved > proof.txt"


class Scheduler:
    """``symphony-tui WORKFLOW --headless --port 0`` in its own session; ``url`` once it
    serves."""

    def __init__(self, project: Any, name: str) -> None:
        env = dict(project.env)
        env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(project.root / "state"))
        env.pop("SYMPHONY_API_TOKEN", None)
        self.stderr_path = project.root / f"{name}.stderr"
        with self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "symphony_tui.cli", str(project.workflow),
                    "--headless", "--port", "0", "--no-lock",
                    "--log-dir", str(project.root / "logs"),
                ],
                cwd=project.root, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        self.url = self._wait_url()
        remember_control(self.url, env)

    def _wait_url(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.stderr_path.read_text().splitlines():
                if "HTTP API on " in line:
                    return line.split("HTTP API on ", 1)[1].strip()
            assert self.proc.poll() is None, self.stderr_path.read_text()
            time.sleep(0.05)
        raise AssertionError(f"no API: {self.stderr_path.read_text()}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def command(self, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(
            self.url + "/api/v1/commands",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **control_headers(self.url)},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def events(self, since: datetime | None = None) -> list[dict[str, Any]]:
        """The API's event history; ``since``: only those at or after it (a restarted
        scheduler's history starts with the events of the one before)."""
        events = self.get("/api/v1/events?since=0&limit=10000")
        if since is None:
            return events
        return [e for e in events if datetime.fromisoformat(e["at"]) >= since]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait(predicate: Any, timeout: float = 25.0, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        time.sleep(step)


def approvals(s: Scheduler) -> list[dict[str, Any]]:
    return s.get("/api/v1/snapshot").get("approvals") or []


def test_kill_9_mid_turn_the_same_turn_completes_and_the_approval_reaches_the_agent(tmp_path):
    with FakeModelServer(slow_delay=0.05) as fake:
        fake.aliases.update(STEP2=DONE)
        project = make_e2e_project(
            tmp_path, fake, issues=[("E2E-1", ISSUE_TEXT)], max_turns=2,
            codex={"command": f"{os.environ.get('SYMPHONY_CODEX_BIN') or _codex()} app-server",
                   "transport": "unix"},
        )  # fmt: skip
        ws = project.workspaces / "E2E-1"
        first = Scheduler(project, "first")
        second = None
        agent = None
        try:
            before = wait(lambda: approvals(first))
            session = read_section(ws, "session")
            agent = DetachedAgent.from_facts(session.get("agent"))
            assert agent is not None and alive(agent)
            thread_id, turn_id = session["thread_id"], session["turn_id"]
            assert read_section(ws, "run")["turn_count"] == 1

            os.kill(first.proc.pid, signal.SIGKILL)  # no shutdown: a crash
            first.proc.wait()
            time.sleep(0.5)
            assert alive(agent), "the app-server died with the scheduler"
            assert not (ws / "proof.txt").exists()

            restart_at = datetime.now(UTC)
            second = Scheduler(project, "second")
            after = wait(lambda: approvals(second))
            assert after[0]["issue_identifier"] == "E2E-1"
            assert after[0]["kind"] == before[0]["kind"] == "command"
            second.command({"type": "approve", "approval_id": after[0]["id"]})

            wait(lambda: "state: Done" in project.issues_file.read_text())
            assert (ws / "proof.txt").read_text().strip() == "approved"
            events = wait(
                lambda: [e for e in second.events() if e["kind"] == "run_ended"] and second.events()
            )
        finally:
            first.stop()
            if second is not None:
                second.stop()
        # the second scheduler's own events (its history also holds the first's)
        events = [e for e in events if datetime.fromisoformat(e["at"]) >= restart_at]
        # the same process, thread and turn, re-adopted before any dispatch
        kinds = [e["kind"] for e in events if e.get("issue_identifier") == "E2E-1"]
        assert kinds.index("dispatch") < kinds.index("session_started")
        (dispatched,) = [e for e in events if e["kind"] == "dispatch"]
        assert dispatched["message"].startswith("re-adopted E2E-1")
        (started,) = [e for e in events if e["kind"] == "session_started"]
        assert started["payload"]["resumed"] is True
        assert started["payload"]["thread_id"] == thread_id
        assert started["payload"]["pid"] == agent.pid
        turns = [e["payload"] for e in events if e["kind"] == "turn_started"]
        assert turns[0]["turn_id"] == turn_id and turns[0]["adopted"] is True
        assert len(turns) == 2 and turns[1]["continuation"] is True  # turn 2 of the attempt
        ended = [e["payload"] for e in events if e["kind"] == "turn_completed"]
        assert ended[0]["turn_id"] == turn_id
        (run_end,) = [e["payload"] for e in events if e["kind"] == "run_ended"]
        assert run_end["outcome"] == "normal"
        # the model was asked for the command once (the turn was not redone), then read
        # its output; turn 2 moved the issue
        assert fake.decisions() == ["shell", "text", "tool", "text"]
        # nothing is left running, and the manifest says so
        assert not alive(agent)
        assert read_section(ws, "session")["agent"]["adoptable"] is False


def _codex() -> str:
    from tests.real_programs import require_codex

    return str(require_codex())


def test_kill_9_mid_stream_the_turn_completes_whole_and_a_stop_leaves_nothing(tmp_path):
    with FakeModelServer(slow_delay=0.1) as fake:
        fake.aliases.update(STEP2="SLOW600")
        project = make_e2e_project(
            tmp_path, fake, issues=[("E2E-1", "SLOW40")], max_turns=2,
            codex={"command": f"{_codex()} app-server", "transport": "unix"},
        )  # fmt: skip
        ws = project.workspaces / "E2E-1"
        first = Scheduler(project, "first")
        second = None
        try:
            # a few words of the first turn are out: the scheduler dies mid-stream
            wait(lambda: any(
                e["kind"] == "message_delta" and "word3" in e["message"]
                for e in first.get("/api/v1/events?since=0&limit=10000&issue_id=e2e-1")
            ))  # fmt: skip
            session = read_section(ws, "session")
            agent = DetachedAgent.from_facts(session["agent"])
            assert agent is not None
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait()

            second = Scheduler(project, "second")
            # the same turn completes, with the whole text codex kept while nobody listened
            done = wait(lambda: [
                e for e in second.get("/api/v1/events?since=0&limit=10000&issue_id=e2e-1")
                if e["kind"] == "turn_completed"])  # fmt: skip
            assert done[0]["payload"]["turn_id"] == session["turn_id"]
            messages = [
                e["message"]
                for e in second.get("/api/v1/events?since=0&limit=10000&issue_id=e2e-1")
                if e["kind"] == "message"
            ]
            assert any("word0" in m and "word39" in m for m in messages), messages
            # turn 2 streams: the operator stops the scheduler, and the agent with it
            wait(lambda: read_section(ws, "session").get("turn_id") != session["turn_id"])
            wait(lambda: fake.decisions().count("slow") == 2)  # the model streams turn 2
            second.stop()
            assert second.proc.returncode == 0
            assert not alive(agent)
            assert read_section(ws, "session")["agent"]["adoptable"] is False
            assert fake.decisions().count("slow") == 2  # turn 1 once, then turn 2
        finally:
            first.stop()
            if second is not None:
                second.stop()
