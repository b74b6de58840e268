"""The real codex (and OpenCode) as the hostile agent (docs/security.md): the fake model
makes the agent run ``api_attack.py``, which reads every environment and the scheduler's
API notes and 0600 control token file (one user, so it can) and tries to approve and
refresh with each candidate. Under codex's ``workspace-write`` sandbox it cannot even
connect; with the network open it connects and is refused by the peer check."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from symphony_tui.api.server import ApiServer
from symphony_tui.domain import EventKind
from symphony_tui.runtime import build_runtime
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import opencode_env, server_command
from tests.helpers import until
from tests.integration.codex_e2e import (  # noqa: F401  (fixtures)
    codex_schema,
    events_of,
)
from tests.integration.codex_e2e import fake as fake
from tests.integration.codex_e2e import project_factory as project_factory
from tests.real_programs import require_opencode

ATTACK = Path(__file__).with_name("api_attack.py")
SECRET = "tracker-key-the-agent-must-not-see-0123"


def _report(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.real_codex
@pytest.mark.parametrize("sandbox", ["workspace-write", "danger-full-access"])
async def test_the_real_codex_cannot_use_the_controls(project_factory, fake, tmp_path, sandbox):
    notes, report = tmp_path / "notes", tmp_path / "report.jsonl"
    os.environ["LINEAR_API_KEY"] = SECRET
    try:
        project = project_factory(
            fake,
            issues=[("SEC-1", f"SHELL: {sys.executable} {ATTACK} {notes} {report}")],
            approvals="auto",
            max_turns=1,
            codex={"thread_sandbox": sandbox},
        )
        project.env["LINEAR_API_KEY"] = SECRET
        rt = project.runtime()
    finally:
        os.environ.pop("LINEAR_API_KEY", None)
    api = ApiServer(rt.orchestrator, announce_dir=notes)
    await api.start()
    try:
        await rt.orchestrator.start()
        posture = (await until(lambda: rt.orchestrator.snapshot().running))[0].posture
        assert posture is not None and "LINEAR_API_KEY" in posture.secrets_withheld
        await until(lambda: events_of(rt, EventKind.RUN_ENDED), timeout=120)
        items = _report(report)
        done = next((i for i in items if i.get("done")), None)
        assert done is not None, f"the attack did not run: {items[:3]}"
        attempts = [i for i in items if "what" in i and i["what"].startswith("POST")]
        assert done["attempts"] == len(attempts) > 4
        assert SECRET not in json.dumps(done["env"])
        statuses = {i["status"] for i in attempts}
        if sandbox == "workspace-write":
            assert statuses == {0}, statuses  # the sandbox denies the connection
            assert posture.control_api.startswith("blocked by the sandbox")
        else:
            assert statuses <= {401, 403}, statuses  # never 200, never 409: never let in
            assert 403 in statuses
            assert posture.control_api.startswith("reachable at")
            refused = [e for e in await rt.orchestrator.audit_entries(500) if not e.ok]
            assert any("descends from the scheduler" in (e.message or "") for e in refused)
    finally:
        await api.stop()


@pytest.mark.real_opencode
async def test_the_real_opencode_cannot_use_the_controls(tmp_path):
    oc_bin = require_opencode()
    notes, report = tmp_path / "notes", tmp_path / "report.jsonl"
    with FakeModelServer() as fake_model:
        (tmp_path / "issues.yaml").write_text(
            "issues:\n  - id: sec-1\n    identifier: SEC-1\n    title: Attack\n"
            f"    description: {json.dumps(f'SHELL: {sys.executable} {ATTACK} {notes} {report}')}\n"
            "    state: Todo\n"
        )
        (tmp_path / "WORKFLOW.md").write_text(
            "---\n"
            "tracker:\n  kind: local\n  path: issues.yaml\n"
            "workspace:\n  root: ws\n"
            "polling:\n  interval_ms: 600000\n"
            "agent:\n  backend: opencode\n  max_turns: 1\n  approvals: auto\n"
            "opencode:\n"
            f"  command: {json.dumps(server_command(oc_bin))}\n"
            "  model: fake/fake-model\n"
            "  startup_timeout_ms: 60000\n"
            "---\n"
            "{{ issue.description }}\n"
        )
        env = {
            **os.environ,
            **opencode_env(tmp_path / "cfg", fake_model.url),
            "LINEAR_API_KEY": SECRET,
        }
        rt = build_runtime(tmp_path / "WORKFLOW.md", env=env, lock=False)
        api = ApiServer(rt.orchestrator, announce_dir=notes)
        await api.start()
        try:
            await rt.orchestrator.start()
            posture = (await until(lambda: rt.orchestrator.snapshot().running))[0].posture
            assert posture is not None and posture.sandbox.startswith("none")
            assert posture.control_api.startswith("reachable at")
            await until(lambda: events_of(rt, EventKind.RUN_ENDED), timeout=120)
            items = _report(report)
            done = next((i for i in items if i.get("done")), None)
            assert done is not None, f"the attack did not run: {items[:3]}"
            attempts = [i for i in items if "what" in i and i["what"].startswith("POST")]
            assert done["attempts"] == len(attempts) > 4
            assert SECRET not in json.dumps(done["env"])
            statuses = {i["status"] for i in attempts}
            assert statuses <= {401, 403} and 403 in statuses, statuses
        finally:
            await api.stop()
            await rt.close()
