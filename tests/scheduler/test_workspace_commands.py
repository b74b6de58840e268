"""Operator commands on workspaces: RemoveWorkspace (refused while claimed, runs
``before_remove``, refreshes the recovered list) and Rerun re-attaching a recorded thread."""

from __future__ import annotations

from symphony_tui.domain import EventKind
from symphony_tui.domain.commands import RemoveWorkspace, Rerun, Stop
from symphony_tui_testing.scripted_backend import hang

from .conftest import make_issue

REMOVE_HOOK = "hooks:\n  before_remove: echo bye > ../removed-$(basename $PWD).txt\n"


async def test_remove_workspace_runs_before_remove_and_refreshes_recovered(make_harness):
    h = make_harness([make_issue(1)], script=hang, front=REMOVE_HOOK)
    await h.start()
    await h.settle()
    assert (await h.orch.send(Stop(issue_id="id-1"))).ok
    await h.settle()
    assert h.ws("ABC-1").is_dir()
    h.orch.refresh_recovered()
    assert [w.key for w in h.orch.snapshot().recovered] == ["ABC-1"]

    result = await h.orch.send(RemoveWorkspace(issue_identifier="ABC-1"))

    assert result.ok, result.message
    assert not h.ws("ABC-1").exists()
    assert (h.root / "ws" / "removed-ABC-1.txt").read_text().strip() == "bye"
    assert h.orch.snapshot().recovered == ()
    removed = [e for e in h.orch.events_since(0) if "removed by operator" in e.message]
    assert removed and removed[0].kind is EventKind.HOOK and removed[0].issue_id == "id-1"


async def test_remove_workspace_refused_while_running(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    assert "id-1" in h.orch.running

    result = await h.orch.send(RemoveWorkspace(issue_identifier="ABC-1"))

    assert not result.ok and "running" in result.message
    assert h.ws("ABC-1").is_dir()


async def test_remove_workspace_missing_or_outside_root(make_harness):
    h = make_harness([])
    await h.start()
    missing = await h.orch.send(RemoveWorkspace(issue_identifier="ABC-404"))
    assert not missing.ok and "no workspace" in missing.message
    # ".." is sanitized to a key inside the root, never the root's parent
    dots = await h.orch.send(RemoveWorkspace(issue_identifier=".."))
    assert not dots.ok
    assert h.root.is_dir() and (h.root / "WORKFLOW.md").is_file()


async def test_rerun_reattaches_the_recorded_thread(make_harness):
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    first = h.backend.sessions[0]
    assert (await h.orch.send(Stop(issue_id="id-1"))).ok
    await h.settle()
    assert not h.orch.running

    result = await h.orch.send(Rerun(issue_id="id-1"))
    await h.settle()

    assert result.ok, result.message
    assert len(h.backend.sessions) == 2
    second = h.backend.sessions[1]
    assert second.host.resume.get("thread_id") == first.thread_id
    assert second.thread_id == first.thread_id
