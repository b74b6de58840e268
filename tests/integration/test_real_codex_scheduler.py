"""Issue "vertical slice": one issue of a local tracker, end to end through the scheduler and
the real ``codex app-server`` against the fake model server (headless path)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from symphony_tui.headless import run_headless
from symphony_tui.runtime import build_runtime
from symphony_tui_testing.fake_model import FakeModelServer

from .real_codex_project import make_project

pytestmark = pytest.mark.real_codex


async def test_headless_run_on_real_codex_completes_with_exact_token_totals(tmp_path):
    with FakeModelServer() as fake:
        project = make_project(tmp_path, fake, approvals="auto")
        runtime = build_runtime(
            project.workflow, env=project.env, lock=False, events_path=tmp_path / "events.jsonl"
        )
        out = io.StringIO()
        code = await asyncio.wait_for(
            run_headless(runtime, exit_when_idle=True, out=out), timeout=180
        )
        state = json.loads(out.getvalue().strip().splitlines()[-1])
        assert code == 0
        assert state["completed"] == ["E2E-1"]
        assert state["counts"] == {"running": 0, "retrying": 0}
        assert (project.workspaces / "E2E-1" / "proof.txt").read_text().strip() == "approved"
        assert "state: Done" in project.issues_file.read_text()
        expected = fake.usage_total
        assert expected.total_tokens > 0
        assert state["codex_totals"]["total_tokens"] == expected.total_tokens
        assert state["codex_totals"]["input_tokens"] == expected.input_tokens
        assert state["codex_totals"]["output_tokens"] == expected.output_tokens
        kinds = [json.loads(line)["kind"] for line in (tmp_path / "events.jsonl").open()]
        assert "approval_resolved" in kinds and "tool_call" in kinds
