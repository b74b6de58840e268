"""Throwaway projects for end-to-end runs on the real codex, through ``build_runtime``.

A project is a local tracker file, a workspace root, a private ``CODEX_HOME`` pointing codex
at a :class:`FakeModelServer`, and a WORKFLOW.md whose codex command tees everything codex
reads on stdin into ``wire.jsonl``: the requests, notifications and responses our backend
sent, in order. Tests assert on that log (e.g. ``thread/resume``) and validate every line
against the schema the same binary generates.

The issue prompt is ``{{ issue.description }}`` and the continuation prompt ``STEP{turn}``,
so a test scripts each turn through the fake model's ``aliases`` (``STEP2`` -> ...).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.runtime import Runtime, build_runtime
from symphony_tui_testing.codex_env import CodexSchema, generate_schema, make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.real_programs import require_codex

DONE = 'TOOL: symphony_set_issue_state {"state": "Done"}'


@dataclass
class E2EProject:
    root: Path
    workflow: Path
    env: dict[str, str]
    workspaces: Path
    issues_file: Path
    wire_log: Path
    runtimes: list[Runtime] = field(default_factory=list)

    def runtime(self) -> Runtime:
        """A new runtime on this project (no project lock; events in ``events.jsonl``)."""
        rt = build_runtime(
            self.workflow, env=self.env, lock=False, events_path=self.root / "events.jsonl"
        )
        self.runtimes.append(rt)
        return rt

    def wire(self) -> list[dict[str, Any]]:
        """Every JSON-RPC message codex read from us so far, in order."""
        if not self.wire_log.exists():
            return []
        out = []
        for line in self.wire_log.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
        return out

    def sent(self, method: str) -> list[dict[str, Any]]:
        """The ``params`` of every request / notification ``method`` we sent."""
        return [m.get("params") or {} for m in self.wire() if m.get("method") == method]

    def responses(self) -> list[dict[str, Any]]:
        """Our answers to codex's server requests (``result`` or ``error``)."""
        return [m for m in self.wire() if "method" not in m and "id" in m]


def make_e2e_project(
    tmp: Path,
    fake: FakeModelServer,
    *,
    issues: Iterable[tuple[str, str]] = (("E2E-1", "hello"),),
    approvals: str = "operator",
    max_turns: int = 2,
    codex: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    features: Iterable[str] = (),
    polling_ms: int = 60_000,
) -> E2EProject:
    """A project whose issues are ``(identifier, description)`` pairs in state Todo."""
    codex_bin = require_codex()
    ws_root = tmp / "ws"
    ws_root.mkdir()
    env = dict(os.environ)
    env.update(make_codex_home(tmp / "codex-home", fake.url, features=features))
    issues_file = tmp / "issues.yaml"
    rows = [
        {
            "id": ident.lower(),
            "identifier": ident,
            "title": f"End to end {ident}",
            "description": text,
            "priority": n,
            "state": "Todo",
        }
        for n, (ident, text) in enumerate(issues, 1)
    ]
    issues_file.write_text(yaml.safe_dump({"issues": rows}, sort_keys=False))
    wire_log = tmp / "wire.jsonl"
    command = f"tee -a {shlex.quote(str(wire_log))} | {shlex.quote(str(codex_bin))} app-server"
    front = {
        "tracker": {"kind": "local", "path": "issues.yaml"},
        "workspace": {"root": "ws"},
        "polling": {"interval_ms": polling_ms},
        "agent": {
            "max_turns": max_turns,
            "approvals": approvals,
            "continuation_prompt": "STEP{turn}",
            "max_retry_backoff_ms": 1_000,
            **(agent or {}),
        },
        "codex": {
            "command": command,
            "approval_policy": "on-request",
            "thread_sandbox": "workspace-write",
            "read_timeout_ms": 30_000,
            "turn_timeout_ms": 60_000,
            **(codex or {}),
        },
    }
    workflow = tmp / "WORKFLOW.md"
    workflow.write_text(
        "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n{{ issue.description }}\n"
    )
    return E2EProject(tmp, workflow, env, ws_root, issues_file, wire_log)


@pytest.fixture(scope="session")
def codex_schema(tmp_path_factory: pytest.TempPathFactory) -> CodexSchema:
    return CodexSchema(generate_schema(require_codex(), tmp_path_factory.mktemp("codex-schema")))


@pytest.fixture
def fake():
    with FakeModelServer(slow_delay=0.05) as srv:
        yield srv


@pytest.fixture
async def project_factory(tmp_path: Path, codex_schema: CodexSchema):
    """``make(fake, **kw) -> E2EProject``; at teardown every runtime is closed and every
    message sent to codex is validated against the binary's schema."""
    made: list[E2EProject] = []

    def make(fake: FakeModelServer, **kw: Any) -> E2EProject:
        sub = tmp_path / f"p{len(made)}"
        sub.mkdir()
        made.append(make_e2e_project(sub, fake, **kw))
        return made[-1]

    yield make
    for p in made:
        for rt in p.runtimes:
            await rt.close()
    for p in made:
        wire = p.wire()
        assert codex_schema.validate_all(wire) == len(wire)


def events_of(
    rt: Runtime, kind: EventKind, issue_id: str | None = None, since: datetime | None = None
) -> list[AgentEvent]:
    """Events of ``kind`` from the live ring, or from ``issue_id``'s transcript (which also
    keeps streaming deltas and token updates); ``since``: only those at or after it (a
    restarted scheduler's ring starts with the history of the one before)."""
    events = rt.orchestrator.events_since(0, limit=100_000, issue_id=issue_id)
    return [
        e
        for e in events
        if e.kind is kind and (since is None or (e.at is not None and e.at >= since))
    ]


def run_ends(rt: Runtime, since: datetime | None = None) -> list[dict[str, Any]]:
    """The payload of every RUN_ENDED event (outcome, status, error) as a dict."""
    return [e.payload.model_dump() for e in events_of(rt, EventKind.RUN_ENDED, since=since)]
