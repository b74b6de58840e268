"""The OpenCode backend through the scheduler (headless path): ``build_runtime`` + the
Orchestrator drive a managed ``opencode serve`` 1.18.33 against the fake model.

OpenCode 1.18.33 takes no client-side tools, so the agent cannot call
``symphony_set_issue_state``; the continuation turn moves the issue the way an agent with
only a shell would, by editing the local tracker file. The run must end with the issue
Done, the command's file in the workspace, the scheduler's token totals equal to the fake
model's usage and the session recorded in the workspace manifest. With a model that reports
no usage the run's usage is "not reported", never zero tokens as if measured.
"""

from __future__ import annotations

import asyncio
import io
import json
import os

import pytest

from symphony_tui.headless import run_headless
from symphony_tui.runtime import build_runtime
from symphony_tui.workspaces.manifest import read_manifest
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import opencode_env, server_command
from tests.real_programs import require_opencode

pytestmark = pytest.mark.real_opencode

IDENTIFIER = "OCE-1"


async def _run_headless(tmp_path, fake: FakeModelServer):
    """Run the issue headless to its end against ``fake``: the exit code, the last state
    line (``/api/v1/state``'s shape), the runtime and the tracker file."""
    oc_bin = require_opencode()
    issues = tmp_path / "issues.yaml"
    issues.write_text(
        "issues:\n"
        "  - id: oce-1\n"
        f"    identifier: {IDENTIFIER}\n"
        "    title: Prove the OpenCode path\n"
        '    description: "SHELL: echo hello > greeting.txt"\n'
        "    priority: 1\n"
        "    state: Todo\n"
    )
    done = f"SHELL: sed -i 's/state: .*/state: Done/' {issues}"
    (tmp_path / "WORKFLOW.md").write_text(
        "---\n"
        "tracker:\n  kind: local\n  path: issues.yaml\n"
        "workspace:\n  root: ws\n"
        # No poll during the run: the agent moves its issue by editing the tracker file
        # (OpenCode has no client tools), and a reconcile tick that saw Done mid-turn
        # would rightly stop the worker as reconciled (seen once in CI). The after-turn
        # state refresh is what sees Done here.
        "polling:\n  interval_ms: 600000\n"
        "agent:\n  backend: opencode\n  max_turns: 3\n  approvals: auto\n"
        f"  continuation_prompt: {json.dumps(done)}\n"
        "opencode:\n"
        f"  command: {json.dumps(server_command(oc_bin))}\n"
        "  model: fake/fake-model\n"
        "  startup_timeout_ms: 60000\n"
        "---\n"
        "Issue {{ issue.identifier }}: {{ issue.title }}\n{{ issue.description }}\n"
    )
    env = {**os.environ, **opencode_env(tmp_path / "cfg", fake.url)}
    runtime = build_runtime(
        tmp_path / "WORKFLOW.md", env=env, lock=False, events_path=tmp_path / "events.jsonl"
    )
    out = io.StringIO()
    code = await asyncio.wait_for(run_headless(runtime, exit_when_idle=True, out=out), timeout=120)
    state = json.loads(out.getvalue().strip().splitlines()[-1])
    return code, state, runtime, issues


async def test_headless_run_finishes_with_the_models_token_totals(tmp_path):
    with FakeModelServer() as fake:
        code, state, runtime, issues = await _run_headless(tmp_path, fake)
        totals = runtime.orchestrator.snapshot().totals
        expected = fake.usage_total
    workspace = tmp_path / "ws" / IDENTIFIER
    assert code == 0
    assert state["completed"] == [IDENTIFIER]
    assert state["counts"] == {"running": 0, "retrying": 0}
    assert (workspace / "greeting.txt").read_text() == "hello\n"
    assert "state: Done" in issues.read_text()
    assert expected.total_tokens > 0
    assert totals.model_dump(exclude={"cost_usd"}) == expected.model_dump(exclude={"cost_usd"})
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    kinds = [e["kind"] for e in events]
    assert kinds.count("turn_completed") == 2  # the command turn, then the tracker turn
    assert kinds.count("approval_resolved") == 2  # bash asks; `approvals: auto` accepts
    assert "command_completed" in kinds
    session = read_manifest(workspace)["session"]
    assert session["backend"] == "opencode" and session["session_id"].startswith("ses")
    assert session["server_url"].startswith("http://127.0.0.1:")
    assert session["directory"] == str(workspace.resolve())


async def test_a_model_that_reports_no_usage_leaves_the_run_not_reported(tmp_path):
    """OpenCode's ``step-finish`` parts carry zero tokens when the provider sends no usage:
    the finished run counts as not reported, and the totals hold no zeros of it."""
    with FakeModelServer(chat_usage=False) as fake:
        code, state, runtime, _issues = await _run_headless(tmp_path, fake)
        assert fake.usage_total.total_tokens == 0 and len(fake.requests) >= 2
    assert code == 0 and state["completed"] == [IDENTIFIER]
    assert state["codex_totals"]["runs_not_reported"] == 1
    assert state["codex_totals"]["total_tokens"] == 0
    snap = runtime.orchestrator.snapshot()
    assert snap.runs_not_reported == 1
    manifest = read_manifest(tmp_path / "ws" / IDENTIFIER)
    assert manifest["run"]["usage_reported"] is False
