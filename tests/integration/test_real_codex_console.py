"""Issue "vertical slice": the console drives a real codex run. The fake model asks for an
escalated command, codex sends a real approval request, the operator presses ``a``, the run
completes, and the token totals on screen equal what the fake model reported."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from symphony_tui.console.app import SymphonyApp
from symphony_tui.runtime import build_runtime
from symphony_tui_testing.fake_model import FakeModelServer
from tests.console.helpers import wait_until

from .real_codex_project import make_project

pytestmark = pytest.mark.real_codex


async def test_operator_approves_a_real_codex_request_from_the_console(tmp_path):
    with FakeModelServer() as fake:
        project = make_project(tmp_path, fake, approvals="operator")
        runtime = build_runtime(
            project.workflow, env=project.env, lock=False, events_path=tmp_path / "events.jsonl"
        )
        orch = runtime.orchestrator
        app = SymphonyApp(orch, runner=orch.run, shutdown=runtime.close, cursor_blink=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: bool(orch.snapshot().approvals))
            approval = orch.snapshot().approvals[0]
            assert approval.command and "echo approved" in approval.command
            assert not (project.workspaces / "E2E-1" / "proof.txt").exists()
            await pilot.press("2")  # focus the workers pane: the worker with the approval
            await pilot.pause(0.3)
            await pilot.press("a")
            await wait_until(pilot, lambda: "E2E-1" in orch.snapshot().completed)
            await wait_until(pilot, lambda: not orch.snapshot().running)
            await pilot.pause(0.6)  # let the console repaint from the latest snapshot
            expected = fake.usage_total
            totals = str(app.screen.query_one("#token-totals", Static).render())
            assert expected.total_tokens > 0
            assert orch.snapshot().totals.total_tokens == expected.total_tokens
            assert f"total     {expected.total_tokens:,}" in totals
            assert f"input     {expected.input_tokens:,}" in totals
            assert f"output    {expected.output_tokens:,}" in totals
            await app.action_quit()
        assert (project.workspaces / "E2E-1" / "proof.txt").read_text().strip() == "approved"
