"""A throwaway project for end-to-end runs on the real OpenHands agent-server: a local tracker
with one issue whose description drives the fake model, ``agent.backend: openhands`` and an
``openhands:`` block (a managed server from the pinned venv by default, or ``base_url`` +
``session_api_key_env`` for a running one) with the fake model as LLM and
``confirmation_policy: AlwaysConfirm``.

The continuation prompt makes the model call ``symphony_set_issue_state`` (a conversation
``client_tool``), so a run ends like a codex one: the agent moves its issue to Done.

A managed server keeps its state in the backend's default state dir (the platformdirs state
folder under the test process's private HOME), so every test of a process shares one state
dir and a console restart finds the conversations of the run before it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.openhands_env import fake_llm, server_command
from tests.real_programs import require_openhands

DONE_CALL = 'TOOL: symphony_set_issue_state {"state": "Done"}'
IDENTIFIER = "OHE-1"


@dataclass
class OpenHandsProject:
    workflow: Path
    env: dict[str, str]
    workspaces: Path
    issues_file: Path

    @property
    def workspace(self) -> Path:
        return self.workspaces / IDENTIFIER


def make_project(
    tmp: Path,
    fake: FakeModelServer,
    *,
    description: str,
    approvals: str = "operator",
    continuation: str = DONE_CALL,
    max_turns: int = 3,
    base_url: str | None = None,
    key_env: str | None = None,
    env: dict[str, str] | None = None,
    max_retry_backoff_ms: int = 300_000,
) -> OpenHandsProject:
    """Write ``issues.yaml`` (issue ``OHE-1``, state Todo) and ``WORKFLOW.md`` under ``tmp``.

    Without ``base_url`` the backend manages its own server from the pinned venv.
    """
    venv = require_openhands()
    ws_root = tmp / "ws"
    ws_root.mkdir(exist_ok=True)
    issues = tmp / "issues.yaml"
    issues.write_text(
        "issues:\n"
        "  - id: ohe-1\n"
        f"    identifier: {IDENTIFIER}\n"
        "    title: Prove the OpenHands path\n"
        f"    description: {json.dumps(description)}\n"
        "    priority: 1\n"
        "    state: Todo\n"
    )
    if base_url:
        server = f"  base_url: {json.dumps(base_url)}\n  session_api_key_env: {key_env}\n"
    else:
        server = f"  command: {json.dumps(server_command(venv))}\n"
    workflow = tmp / "WORKFLOW.md"
    workflow.write_text(
        "---\n"
        "tracker:\n  kind: local\n  path: issues.yaml\n"
        "workspace:\n  root: ws\n"
        "polling:\n  interval_ms: 1000\n"
        f"agent:\n  backend: openhands\n  max_turns: {max_turns}\n  approvals: {approvals}\n"
        f"  max_retry_backoff_ms: {max_retry_backoff_ms}\n"
        f"  continuation_prompt: {json.dumps(continuation)}\n"
        "openhands:\n"
        f"{server}"
        "  ws_auth: first_frame\n"
        "  confirmation_policy: AlwaysConfirm\n"
        "  startup_timeout_ms: 120000\n  read_timeout_ms: 30000\n"
        f"  llm: {json.dumps(fake_llm(fake.url))}\n"
        "---\n"
        "Issue {{ issue.identifier }}: {{ issue.title }}\n{{ issue.description }}\n"
    )
    return OpenHandsProject(
        workflow=workflow,
        env={**os.environ, **(env or {})},
        workspaces=ws_root,
        issues_file=issues,
    )
