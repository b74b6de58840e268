"""Spec §5.3 / §17.1 choices the config layer makes, tested where the suite in
``tests/config`` does not already: non-positive hook timeouts, bare workspace roots, and
reference-implementation workflow files (no unknown-key errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony_tui.config.settings import DEFAULT_HOOK_TIMEOUT_MS
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.config.workflow import load_workflow


def load(tmp_path: Path, front: str):
    path = tmp_path / "WORKFLOW.md"
    path.write_text(f"---\n{front}---\nprompt\n")
    return load_workflow(path).settings


@pytest.mark.parametrize("value", ["0", "-1", "-60000", "'0'", ""])
def test_non_positive_hook_timeout_falls_back_to_the_default(tmp_path, value):
    settings = load(tmp_path, f"hooks:\n  timeout_ms: {value}\n")
    assert settings.hooks.timeout_ms == DEFAULT_HOOK_TIMEOUT_MS == 60_000


def test_positive_hook_timeout_and_string_integers_are_taken(tmp_path):
    assert load(tmp_path, "hooks:\n  timeout_ms: 1500\n").hooks.timeout_ms == 1500
    assert load(tmp_path, "hooks:\n  timeout_ms: '2500'\n").hooks.timeout_ms == 2500


def test_bare_workspace_root_name_is_kept_relative_to_the_workflow_folder(tmp_path):
    # §5.3.3: a bare name is not expanded ($, ~); relative roots are allowed. We anchor a
    # relative root at the folder of WORKFLOW.md (the repository that owns it), which is
    # the reference behaviour for the default ./WORKFLOW.md and does not depend on the cwd.
    settings = load(tmp_path, "workspace:\n  root: workspaces\n")
    assert settings.workspace.root == str((tmp_path / "workspaces").resolve())
    nested = load(tmp_path, "workspace:\n  root: build/ws\n")
    assert nested.workspace.root == str((tmp_path / "build" / "ws").resolve())


def test_reference_implementation_workflow_files_load_unchanged(tmp_path, monkeypatch):
    """A WORKFLOW.md as the reference implementation's README shows it (every core key plus
    its codex policy keys and hooks): it loads with no unknown-key error and validates."""
    monkeypatch.setenv("LINEAR_API_KEY", "lin_api_reference0123456789")
    front = """\
tracker:
  kind: linear
  project_slug: "symphony-0c79b11b75ea"
  active_states:
    - Todo
    - In Progress
    - Merging
    - Rework
  terminal_states: Closed, Cancelled, Canceled, Duplicate, Done
polling:
  interval_ms: 5000
workspace:
  root: ~/code/symphony-workspaces
hooks:
  after_create: |
    git clone --depth 1 https://github.com/openai/symphony .
  before_run: |
    git fetch origin
  timeout_ms: 0
agent:
  max_concurrent_agents: 10
  max_turns: 20
  max_retry_backoff_ms: 300000
  max_concurrent_agents_by_state:
    Rework: 2
    merging: "x"
codex:
  command: codex --config 'model="gpt-5.3-codex"' app-server
  approval_policy: never
  thread_sandbox: workspace-write
  turn_sandbox_policy:
    type: workspaceWrite
  turn_timeout_ms: 3600000
  read_timeout_ms: 5000
  stall_timeout_ms: 300000
server:
  port: 0
observability:
  dashboard_enabled: true
"""
    settings = load(tmp_path, front)
    assert validate_dispatch(settings) == []
    assert settings.tracker.api_key == "lin_api_reference0123456789"
    assert settings.tracker.terminal_states[-1] == "Done"
    assert settings.hooks.timeout_ms == 60_000
    assert settings.agent.max_concurrent_agents_by_state == {"rework": 2}
    assert settings.codex.command == "codex --config 'model=\"gpt-5.3-codex\"' app-server"
    assert settings.server.port == 0
