"""Issue "OpenHands backend" through the console: ``SymphonyApp.run_test`` on a runtime whose
backend manages a real agent-server 1.58.2 (``confirmation_policy: AlwaysConfirm``) with the
fake model.

* an accept (``a``) and a reject with a message (``D``) pressed in the console; the
  rejection reads as the operator's decision and the retry waits out the failure backoff;
* an interrupt (``i`` + ``y``) ends the run as cancelled: no retry, the issue is held;
* a console restart: the first console quits while an action waits for confirmation (its
  managed server stops with it); the second one starts a new server on the same state dir,
  re-attaches to the recorded conversation, shows the same approval on the approvals screen
  (``v``), and approving it there finishes the run.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from textual.widgets import DataTable

from symphony_tui.console.app import SymphonyApp
from symphony_tui.console.screens.approvals import ApprovalsScreen
from symphony_tui.console.screens.modals import Confirm
from symphony_tui.domain import ClaimState, EventKind, RunStatus
from symphony_tui.runtime import Runtime, build_runtime
from symphony_tui.scheduler import policy
from symphony_tui.workspaces.manifest import read_manifest
from symphony_tui_testing.fake_model import FakeModelServer
from tests.console.helpers import wait_until

from .real_openhands_project import IDENTIFIER, OpenHandsProject, make_project

pytestmark = pytest.mark.real_openhands


def console(project: OpenHandsProject, tmp_path, name: str) -> tuple[SymphonyApp, Runtime]:
    runtime = build_runtime(
        project.workflow, env=project.env, lock=False, events_path=tmp_path / f"{name}.jsonl"
    )
    orch = runtime.orchestrator
    app = SymphonyApp(orch, runner=orch.run, shutdown=runtime.close, cursor_blink=False)
    return app, runtime


def events(runtime: Runtime, kind: EventKind | None = None):
    got = runtime.orchestrator.events_since(0, limit=100_000)
    return [e for e in got if kind is None or e.kind is kind]


async def quit_console(app: SymphonyApp, pilot, runtime: Runtime) -> None:
    """``q`` semantics: quit, confirming when the console still shows running workers, and
    wait until the runtime is closed (workers stopped, managed server stopped)."""
    await app.action_quit()
    if runtime.orchestrator._stopped.is_set():
        return
    await pilot.pause(0.3)
    if isinstance(app.screen, Confirm):
        await pilot.press("y")
    await wait_until(pilot, lambda: runtime.orchestrator._stopped.is_set(), timeout=60)


async def type_text(pilot, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else ch)


async def test_accept_then_reject_with_a_message_from_the_console(tmp_path):
    reason = "not in this repo"
    with FakeModelServer() as fake:
        project = make_project(
            tmp_path,
            fake,
            description="SHELL: echo accepted > a.txt",
            continuation="SHELL: echo second > b.txt",
        )
        app, runtime = console(project, tmp_path, "ar")
        orch = runtime.orchestrator
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: bool(orch.snapshot().approvals))
            first = orch.snapshot().approvals[0]
            assert first.backend == "openhands" and first.command == "echo accepted > a.txt"
            await pilot.press("2")  # the workers pane: its worker has the approval
            await pilot.pause(0.3)
            await pilot.press("a")
            # The continuation turn asks for the second command.
            await wait_until(
                pilot,
                lambda: any(a.id != first.id for a in orch.snapshot().approvals),
            )
            second = orch.snapshot().approvals[0]
            assert second.command == "echo second > b.txt"
            assert (project.workspace / "a.txt").read_text() == "accepted\n"
            await pilot.pause(0.3)
            await pilot.press("D")
            await pilot.pause(0.3)
            await type_text(pilot, reason)
            await pilot.press("enter")
            await wait_until(pilot, lambda: bool(orch.snapshot().retrying))
            snap = orch.snapshot()
            (retry,) = snap.retrying
            await quit_console(app, pilot, runtime)
    assert not (project.workspace / "b.txt").exists()
    # The operator's decision, not a crash: every line says so, and the retry waits out the
    # failure backoff instead of asking again at once.
    assert retry.error == f"rejected by operator: {reason}"
    assert retry.attempt == 1
    assert retry.due_at - snap.generated_at > timedelta(milliseconds=policy.FAILURE_BASE_MS * 0.8)
    (resolved,) = [
        e for e in events(runtime, EventKind.APPROVAL_RESOLVED) if e.payload.decision == "decline"
    ]
    assert resolved.payload.by == "operator" and reason in resolved.message
    (turn_end,) = events(runtime, EventKind.TURN_CANCELLED)
    assert turn_end.payload.outcome == "rejected_by_operator"
    assert turn_end.message == f"rejected by operator: {reason}"
    assert not events(runtime, EventKind.TURN_FAILED)
    assert not events(runtime, EventKind.ERROR)
    (ended,) = events(runtime, EventKind.RUN_ENDED)
    assert f"rejected by operator: {reason}" in ended.message
    (scheduled,) = events(runtime, EventKind.RETRY_SCHEDULED)
    assert f"rejected by operator: {reason}" in scheduled.message


async def test_interrupt_from_the_console_cancels_and_holds_the_issue(tmp_path):
    with FakeModelServer(slow_delay=0.2) as fake:
        project = make_project(tmp_path, fake, description="SLOW200 take your time")
        app, runtime = console(project, tmp_path, "int")
        orch = runtime.orchestrator
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(
                pilot,
                lambda: any(
                    getattr(e.payload, "status", None) == "running" for e in events(runtime, None)
                ),
            )
            await pilot.press("2")
            await pilot.pause(0.3)
            await pilot.press("i")
            await pilot.pause(0.3)
            await pilot.press("y")
            await wait_until(pilot, lambda: not orch.snapshot().running)
            await pilot.pause(1.5)  # a poll tick: a held issue must not be dispatched again
            snap = orch.snapshot()
            await quit_console(app, pilot, runtime)
    assert snap.retrying == ()
    assert not snap.running
    (row,) = [r for r in snap.issues if r.identifier == IDENTIFIER]
    assert row.claim is ClaimState.RELEASED and row.note == "held by operator"
    (ended,) = events(runtime, EventKind.RUN_ENDED)
    assert ended.payload.outcome == "cancelled"
    assert ended.payload.status == RunStatus.INTERRUPTED.value
    (turn_end,) = events(runtime, EventKind.TURN_CANCELLED)
    assert turn_end.payload.outcome == "cancelled"
    assert len(events(runtime, EventKind.DISPATCH)) == 1
    assert read_manifest(project.workspace)["run"]["status"] == "interrupted"


async def test_console_restart_reattaches_and_shows_the_pending_approval_again(tmp_path):
    with FakeModelServer() as fake:
        project = make_project(tmp_path, fake, description="SHELL: echo after-restart > r.txt")
        app, runtime = console(project, tmp_path, "first")
        orch = runtime.orchestrator
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: bool(orch.snapshot().approvals))
            before = orch.snapshot().approvals[0]
            backend = orch.backends.get("openhands")
            pid = backend.server.pid
            await quit_console(app, pilot, runtime)
        assert backend.server is None  # the managed server stopped with the console
        recorded = read_manifest(project.workspace)["session"]
        assert recorded["conversation_id"] == before.details["conversation_id"]
        assert not (project.workspace / "r.txt").exists()

        app, runtime = console(project, tmp_path, "second")
        orch = runtime.orchestrator
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: bool(orch.snapshot().approvals))
            assert orch.backends.get("openhands").server.pid != pid
            await pilot.press("v")
            await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen))
            await pilot.pause(0.6)  # let the approvals screen fill from the snapshot
            again = orch.snapshot().approvals[0]
            assert again.id == before.id and again.command == before.command
            shown = app.screen.query_one("#approvals", DataTable)
            assert [k.value for k in shown.rows] == [before.id]
            await pilot.press("a")
            await wait_until(pilot, lambda: IDENTIFIER in orch.snapshot().completed)
            await wait_until(pilot, lambda: not orch.snapshot().running)
            await quit_console(app, pilot, runtime)
    assert (project.workspace / "r.txt").read_text() == "after-restart\n"
    assert "state: Done" in project.issues_file.read_text()
    (started,) = [
        e for e in events(runtime, EventKind.SESSION_STARTED) if getattr(e.payload, "resumed", None)
    ]
    assert started.payload.state == "waiting_for_confirmation"
    assert started.payload.session_id == recorded["conversation_id"]
    # The first prompt was never sent again while the action waited for confirmation.
    last_user = [
        str(m.get("content"))
        for r in fake.requests
        for m in (r["body"].get("messages") or [])[-1:]
        if m.get("role") == "user"
    ]
    assert sum("after-restart" in text for text in last_user) == 1
