"""Files in the reference's current schema load (``tracker.provider``,
``tracker.required_labels``), and keys nothing reads are reported, one line each."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.store import WorkflowStore
from symphony_tui.config.validate import validate_dispatch
from symphony_tui.config.workflow import load_workflow
from symphony_tui.doctor import run_doctor
from symphony_tui.observability.logs import KeyValueFormatter

CURRENT_SCHEMA = """\
---
tracker:
  kind: linear
  provider:
    project_slug: symphony-0c79b11b75ea
    api_key: $REF_KEY
    colour: blue
  required_labels: [" Agent ", "agent", "Backend"]
  active_states: [Todo, In Progress]
worker:
  ssh_hosts: [build-1]
telemetry:
  endpoint: https://collector
observability:
  dashboard_enabled: true
agnet:
  max_turns: 3
codex:
  command: codex app-server
  turn_timeout_ms: 3600000
  sandbox: none
---
Work on {{ issue.identifier }}
"""


def test_a_current_reference_file_loads_with_provider_and_required_labels(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(CURRENT_SCHEMA)
    wf = load_workflow(path, env={"REF_KEY": "ref-key-value-42"})
    tracker = wf.settings.tracker
    assert tracker.project_slug == "symphony-0c79b11b75ea"
    assert tracker.api_key == "ref-key-value-42"
    assert "REF_KEY" in tracker.secret_env_names
    assert tracker.required_labels == ("agent", "backend")
    assert validate_dispatch(wf.settings) == []  # no "project slug is not set"
    assert tracker.has_required_labels(["backend", "Agent", "ui"])
    assert not tracker.has_required_labels(["agent"])


def test_provider_values_win_over_the_flat_ones(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: linear\n  project_slug: old\n  endpoint: https://old/graphql\n"
        "  provider:\n    project_slug: new\n    endpoint: https://new/graphql\n---\n"
    )
    tracker = load_workflow(path, env={"LINEAR_ASSIGNEE": "me"}).settings.tracker
    assert (tracker.project_slug, tracker.endpoint) == ("new", "https://new/graphql")
    assert tracker.assignee == "me"  # the reference's LINEAR_ASSIGNEE fallback


def test_keys_nothing_reads_are_one_warning_each(tmp_path: Path, caplog) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(CURRENT_SCHEMA)
    wf = load_workflow(path, env={})
    unread = [w.split()[2] for w in wf.warnings]
    assert unread == [
        "tracker.provider.colour",
        "telemetry.endpoint",
        "observability.dashboard_enabled",
        "agnet.max_turns",
        "codex.sandbox",
    ]
    assert all("\n" not in w for w in wf.warnings)
    with caplog.at_level(logging.WARNING):
        WorkflowStore(path, env={}).load_initial()
    fmt = KeyValueFormatter()
    lines = [fmt.format(r) for r in caplog.records if r.getMessage() == "workflow setting ignored"]
    assert len(lines) == 5 and "telemetry.endpoint" in lines[1]
    assert all("\n" not in line for line in lines)


def test_a_misspelt_key_gets_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: local\n  path: i.yaml\n  projet_slug: x\n"
        "  provider:\n    api_kee: k\nagnet:\n  max_turns: 3\npollling: {}\n"
        "telemetry:\n  endpoint: a\n---\n"
    )
    assert load_workflow(path, env={}).warnings == (
        "unknown setting tracker.projet_slug is ignored (nothing reads it); "
        "did you mean tracker.project_slug?",
        "unknown setting tracker.provider.api_kee is ignored (nothing reads it); "
        "did you mean tracker.provider.api_key?",
        "unknown setting agnet.max_turns is ignored (nothing reads it); "
        "did you mean agent.max_turns?",
        "unknown setting pollling is ignored (nothing reads it); did you mean polling?",
        "unknown setting telemetry.endpoint is ignored (nothing reads it)",
    )


def test_a_misspelt_key_of_a_worker_host_gets_a_did_you_mean(tmp_path: Path) -> None:
    # A host's ``codex-mode: exec-server`` ignored in silence would send the model's
    # credentials to the host (the default mode runs the agent there).
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: local\n  path: i.yaml\nworker:\n  ssh_hosts: [b1, b2]\n"
        "  hosts:\n    b1:\n      codex-mode: exec-server\n      max_memory_mb: 10\n"
        "    b2:\n      shell: zsh\n---\n"
    )
    assert load_workflow(path, env={}).warnings == (
        "unknown setting worker.hosts.b1.codex-mode is ignored (nothing reads it); "
        "did you mean worker.hosts.b1.codex_mode?",
        "unknown setting worker.hosts.b2.shell is ignored (nothing reads it)",
    )


def test_a_file_of_our_own_keys_has_no_warnings(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        "---\ntracker:\n  kind: local\n  path: i.yaml\nhooks:\n  env: {A: b}\n"
        "agent:\n  backend: opencode\n  turn_timeout_ms: 5\nopencode:\n  env: {X: y}\n"
        "codex:\n  approval_policy: {reject: {rules: true}}\nserver:\n  port: 0\n---\n"
    )
    assert load_workflow(path, env={}).warnings == ()


def test_doctor_prints_the_warnings_without_failing_on_them(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "i.yaml").write_text("issues: []\n")
    path = tmp_path / "WORKFLOW.md"
    path.write_text(
        f"---\ntracker:\n  kind: local\n  path: i.yaml\n  required_labels: agent\n"
        f"workspace:\n  root: {tmp_path / 'ws'}\ntelemetry:\n  endpoint: a\n"
        "codex:\n  command: sh app-server\n---\nprompt\n"
    )
    monkeypatch.setenv("SYMPHONY_LOCK_DIR", str(tmp_path / "locks"))
    out = io.StringIO()
    code = run_doctor(str(path), out)
    text = out.getvalue()
    assert "[warn] workflow: unknown setting telemetry.endpoint is ignored" in text
    # The warning is a line of its own, neither a failure nor counted as a check (doctor
    # has six checks; the agent command here is not a real app-server).
    assert "[FAIL] workflow" not in text and code in (0, 1)
    assert "all 6 checks passed" in text or " of 6 checks failed" in text, text


def test_provider_keeps_adapter_owned_keys_and_the_adapter_validates_them(tmp_path: Path) -> None:
    raw = {"kind": "linear", "api_key": "k", "provider": {"colour": "red", "custom": {"a": 1}}}
    linear = resolve_settings({"tracker": raw}, tmp_path, {})
    assert linear.tracker.provider == {"colour": "red", "custom": {"a": 1}}  # kept verbatim
    assert validate_dispatch(linear) == [
        "missing_tracker_project_slug: tracker.project_slug is not set"
    ]
    github = {"kind": "github", "provider": {"repo": "norepo", "token": "t"}}
    assert validate_dispatch(resolve_settings({"tracker": github}, tmp_path, {})) == [
        "invalid_github_repo: tracker.repo 'norepo' is not owner/name"
    ]
