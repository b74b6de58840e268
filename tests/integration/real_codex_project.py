"""A throwaway project for end-to-end runs on the real codex: a local tracker with one issue
whose description drives the fake model (escalated shell command -> a real approval), and a
continuation prompt that makes the model call the tracker tool to finish the issue."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from symphony_tui_testing.codex_env import make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.real_programs import require_codex

ISSUE_TEXT = "ESCALATE SHELL: echo approved > proof.txt"


@dataclass
class CodexProject:
    workflow: Path
    env: dict[str, str]
    workspaces: Path
    issues_file: Path


def make_project(tmp: Path, fake: FakeModelServer, *, approvals: str = "operator") -> CodexProject:
    codex_bin = require_codex()
    ws_root = tmp / "ws"
    ws_root.mkdir()
    env = dict(os.environ)
    env.update(make_codex_home(tmp / "codex-home", fake.url, trusted=[ws_root]))
    issues = tmp / "issues.yaml"
    issues.write_text(
        "issues:\n"
        "  - id: it-1\n"
        "    identifier: E2E-1\n"
        "    title: Prove the approval path\n"
        f"    description: {json.dumps(ISSUE_TEXT)}\n"
        "    priority: 1\n"
        "    state: Todo\n"
    )
    done_call = 'TOOL: symphony_set_issue_state {"state": "Done"}'
    workflow = tmp / "WORKFLOW.md"
    workflow.write_text(
        "---\n"
        "tracker:\n  kind: local\n  path: issues.yaml\n"
        "workspace:\n  root: ws\n"
        "polling:\n  interval_ms: 1000\n"
        f"agent:\n  max_turns: 2\n  approvals: {approvals}\n"
        f"  continuation_prompt: {json.dumps(done_call)}\n"
        f"codex:\n  command: {json.dumps(str(codex_bin) + ' app-server')}\n"
        "  approval_policy: on-request\n  thread_sandbox: workspace-write\n"
        "  read_timeout_ms: 30000\n  turn_timeout_ms: 120000\n"
        "---\n"
        "Issue {{ issue.identifier }}: {{ issue.title }}\n{{ issue.description }}\n"
    )
    return CodexProject(workflow=workflow, env=env, workspaces=ws_root, issues_file=issues)
