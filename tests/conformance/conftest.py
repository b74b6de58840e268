"""Conformance test helpers: the scheduler harness of ``tests/scheduler`` (fake clock,
in-memory tracker, scripted backend) plus a throwaway local-tracker project that real
processes (the CLI, the codex backend driving the demo agent) can run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.scheduler.conftest import make_harness  # noqa: F401  (fixture re-export)

#: The demo agent speaks the codex app-server protocol; through the real CodexBackend.
DEMO_AGENT = '"${SYMPHONY_PYTHON:-python3}" -m symphony_tui.demo.agent'


@dataclass
class Project:
    """A folder with ``WORKFLOW.md`` and ``issues.yaml`` (the shared local tracker format)."""

    folder: Path

    @property
    def workflow(self) -> Path:
        return self.folder / "WORKFLOW.md"

    @property
    def issues_file(self) -> Path:
        return self.folder / "issues.yaml"

    @property
    def workspaces(self) -> Path:
        return self.folder / "ws"

    def set_state(self, issue_id: str, state: str) -> None:
        data = yaml.safe_load(self.issues_file.read_text())
        for item in data["issues"]:
            if item["id"] == issue_id:
                item["state"] = state
        self.issues_file.write_text(yaml.safe_dump(data, sort_keys=False))


def write_project(
    folder: Path,
    issues: list[dict],
    *,
    front: str = "",
    prompt: str = "Work on {{ issue.identifier }}: {{ issue.title }}\n{{ issue.description }}",
) -> Project:
    """``front`` is extra YAML front matter appended after the defaults below (later keys
    of one section must be written in full: YAML keeps the last duplicate section)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "issues.yaml").write_text(yaml.safe_dump({"issues": issues}, sort_keys=False))
    base = textwrap.dedent(
        f"""\
        tracker:
          kind: local
          path: issues.yaml
        workspace:
          root: ws
        polling:
          interval_ms: 500
        agent:
          approvals: auto
        codex:
          command: '{DEMO_AGENT}'
          read_timeout_ms: 10000
        """
    )
    (folder / "WORKFLOW.md").write_text(f"---\n{base}{textwrap.dedent(front)}---\n{prompt}\n")
    return Project(folder)


def issue(n: int, *, state: str = "Todo", description: str = "", **extra) -> dict:
    return {
        "id": f"c-{n}",
        "identifier": f"CONF-{n}",
        "title": f"Conformance issue {n}",
        "description": description,
        "priority": 1,
        "state": state,
        "created_at": f"2026-01-01T00:{n % 60:02d}:00Z",
        **extra,
    }


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child scheduler: the demo agent at full speed, no proxies (only
    127.0.0.1 is reachable), this interpreter for ``SYMPHONY_PYTHON``."""
    env = dict(os.environ)
    env.update(
        SYMPHONY_PYTHON=sys.executable,
        SYMPHONY_DEMO_SPEED="0",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    env.update(extra)
    return env


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m symphony_tui.cli ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "symphony_tui.cli", *args],
        cwd=cwd,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
