"""``agent.approvals: auto`` and ``deny`` on the real codex, through the scheduler: the
escalated command codex asks about is accepted (it runs) or declined (the turn goes on and
the model sees the refusal); either way the run completes and the issue reaches Done."""

from __future__ import annotations

import pytest

from symphony_tui.domain import EventKind
from tests.helpers import until

from .codex_e2e import DONE, codex_schema, events_of, fake, project_factory, run_ends

pytestmark = pytest.mark.real_codex
__all__ = ["codex_schema", "fake", "project_factory"]


@pytest.mark.parametrize(
    ("mode", "wire", "by", "proof"),
    [("auto", "accept", "auto", "ran\n"), ("deny", "decline", "policy", None)],
)
async def test_approval_policy_answers_without_an_operator(
    project_factory, fake, mode, wire, by, proof
):
    fake.aliases["STEP2"] = DONE
    project = project_factory(
        fake, issues=[("E2E-1", "ESCALATE SHELL: echo ran > proof.txt")], approvals=mode
    )
    rt = project.runtime()
    await rt.orchestrator.start()
    ends = await until(lambda: run_ends(rt))

    assert ends[0]["outcome"] == "normal", ends
    (resolved,) = events_of(rt, EventKind.APPROVAL_RESOLVED)
    assert resolved.payload.decision == wire and resolved.payload.by == by
    assert not rt.orchestrator.snapshot().approvals  # nothing ever queued for an operator
    assert [
        r["result"]["decision"] for r in project.responses() if "decision" in r.get("result", {})
    ] == [wire]
    out = project.workspaces / "E2E-1" / "proof.txt"
    assert (out.read_text() if out.exists() else None) == proof
    # declined or not, the turn went on: the model answered, then turn 2 moved the issue
    assert fake.decisions() == ["shell", "text", "tool", "text"]
    assert "state: Done" in project.issues_file.read_text()
    assert rt.orchestrator.snapshot().totals == fake.usage_total


async def test_unanswered_approval_is_declined_at_the_timeout_and_the_attempt_fails(
    project_factory, fake
):
    fake.aliases["STEP2"] = DONE
    project = project_factory(
        fake,
        issues=[("E2E-1", "ESCALATE SHELL: echo late > proof.txt")],
        agent={"approval_timeout_ms": 1_500},
    )
    rt = project.runtime()
    orch = rt.orchestrator
    await orch.start()
    asked = (await until(lambda: orch.snapshot().approvals))[0]
    assert asked.deadline_at is not None and asked.created_at is not None
    assert (asked.deadline_at - asked.created_at).total_seconds() == 1.5
    ends = await until(lambda: run_ends(rt))

    assert ends[0]["outcome"] == "failed", ends
    assert ends[0]["error"] == "command approval unanswered for 1.5s: declined"
    (resolved,) = events_of(rt, EventKind.APPROVAL_RESOLVED)
    assert resolved.payload.by == "timeout" and resolved.payload.timed_out is True
    assert [
        r["result"]["decision"] for r in project.responses() if "decision" in r.get("result", {})
    ] == ["decline"]
    assert not (project.workspaces / "E2E-1" / "proof.txt").exists()
    retrying = await until(lambda: orch.snapshot().retrying)
    assert retrying[0].error == ends[0]["error"]  # retried with backoff like any failure
