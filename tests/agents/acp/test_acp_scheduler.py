"""The acp backend through the scheduler (``build_runtime`` + the Orchestrator) on the
scripted ACP agent: a permission reaches the one approvals inbox with the agent's own
options, the operator's command (the same the console and the API send) picks one, and
the choice is what the agent receives; ``agent.approvals: deny`` answers without an
operator; the run's usage is the agent's report."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from symphony_tui.domain import ApprovalDecision, ApprovalKind, EventKind
from symphony_tui.domain.commands import Answer
from symphony_tui.runtime import Runtime, build_runtime

from .conftest import FAKE_AGENT

IDENTIFIER = "ACPS-1"


def project(tmp: Path, prompt: str, approvals: str = "operator") -> tuple[Path, dict[str, str]]:
    (tmp / "issues.yaml").write_text(
        "issues:\n"
        "  - id: acps-1\n"
        f"    identifier: {IDENTIFIER}\n"
        "    title: Drive an ACP agent\n"
        f"    description: {json.dumps(prompt)}\n"
        "    state: Todo\n"
    )
    (tmp / "WORKFLOW.md").write_text(
        "---\n"
        "tracker:\n  kind: local\n  path: issues.yaml\n"
        "workspace:\n  root: ws\n"
        "polling:\n  interval_ms: 600000\n"
        f"agent:\n  backend: acp\n  max_turns: 1\n  approvals: {approvals}\n"
        f"acp:\n  command: {json.dumps(FAKE_AGENT)}\n"
        "---\n"
        "{{ issue.description }}\n"
    )
    log = tmp / "fake-acp.jsonl"
    return log, {"FAKE_ACP_LOG": str(log), "FAKE_ACP_STATE": str(tmp / "state")}


def runtime(tmp: Path, env: dict[str, str], events: str = "ev.jsonl") -> Runtime:
    """A runtime on the project in ``tmp``; ``env`` laid over this process's for its agents."""
    return build_runtime(
        tmp / "WORKFLOW.md", env={**os.environ, **env}, lock=False, events_path=tmp / events
    )


async def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := predicate()):
        assert loop.time() < deadline, "timed out waiting for a condition"
        await asyncio.sleep(0.02)
    return value


def ended(orch: Any) -> bool:
    return any(e.kind is EventKind.RUN_ENDED for e in orch.events_since(0, limit=10_000))


def resolutions(orch: Any) -> list[Any]:
    """The ``APPROVAL_RESOLVED`` events of the issue, in order."""
    events = orch.events_since(0, limit=100_000, issue_id="acps-1")
    return [e for e in events if e.kind is EventKind.APPROVAL_RESOLVED]


def outcomes(log: Path) -> list[dict[str, Any]]:
    """The permission outcomes the agent received."""
    out = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        result = entry["msg"].get("result")
        if entry["dir"] == "in" and isinstance(result, dict) and "outcome" in result:
            out.append(result["outcome"])
    return out


async def test_the_operator_picks_one_of_the_agents_options(tmp_path):
    log, env = project(tmp_path, "RUN make")
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        (approval,) = await wait_for(lambda: orch.snapshot().approvals)
        assert approval.backend == "acp" and approval.kind is ApprovalKind.COMMAND
        assert approval.command == "make"
        options = [o.label for o in approval.questions[0].options]
        assert options == ["Allow once", "Always allow", "Reject", "Always reject"]
        done = await orch.send(
            Answer(approval_id=approval.id, answers={"option": ("Always allow",)})
        )
        assert done.ok, done
        await wait_for(lambda: ended(orch))
        events = orch.events_since(0, limit=100_000, issue_id="acps-1")
    finally:
        await rt.close()
    assert outcomes(log)[0] == {"outcome": "selected", "optionId": "allow-always"}
    kinds = [e.kind for e in events]
    assert EventKind.COMMAND_COMPLETED in kinds and EventKind.TURN_COMPLETED in kinds
    usage = [e.payload.usage for e in events if e.kind is EventKind.TOKEN_USAGE]
    assert usage and usage[0].total_tokens == 111


async def test_a_deny_policy_answers_without_an_operator(tmp_path):
    log, env = project(tmp_path, "RUN rm -rf /", approvals="deny")
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        await wait_for(lambda: ended(orch))
        resolved = resolutions(orch)
    finally:
        await rt.close()
    assert outcomes(log)[0] == {"outcome": "selected", "optionId": "reject-once"}
    assert resolved and resolved[0].payload.decision == ApprovalDecision.DECLINE.value
    assert resolved[0].payload.by == "policy"


async def test_a_restarted_scheduler_loads_the_recorded_session(tmp_path):
    log, env = project(tmp_path, "remember the word heron", approvals="auto")
    first = runtime(tmp_path, env)
    try:
        await first.orchestrator.start()
        await wait_for(lambda: ended(first.orchestrator))
    finally:
        await first.close()
    second = runtime(tmp_path, env, "ev2.jsonl")
    try:
        await second.orchestrator.start()
        await wait_for(lambda: ended(second.orchestrator))
        started = [
            e.payload
            for e in second.orchestrator.events_since(0, limit=100_000, issue_id="acps-1")
            if e.kind is EventKind.SESSION_STARTED
        ]
    finally:
        await second.close()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    sent = [e["msg"] for e in entries if e["dir"] == "in"]
    answers: dict[Any, dict[str, Any]] = {}  # the first process's, by request id
    for e in entries:
        if e["dir"] == "out" and "result" in e["msg"]:
            answers.setdefault(e["msg"]["id"], e["msg"])
    new = [m for m in sent if m.get("method") == "session/new"]
    loads = [m for m in sent if m.get("method") == "session/load"]
    assert len(new) == 1 and loads, [m.get("method") for m in sent]
    created = answers[new[0]["id"]]["result"]["sessionId"]
    assert loads[0]["params"]["sessionId"] == created
    assert started and started[-1].resumed and started[-1].thread_id == created


async def test_an_answer_naming_none_of_the_agents_options_is_refused(tmp_path):
    log, env = project(tmp_path, "RUN make")
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        (approval,) = await wait_for(lambda: orch.snapshot().approvals)
        for text in ("yes please", ""):
            refused = await orch.send(Answer(approval_id=approval.id, answers={"option": (text,)}))
            assert not refused.ok and "is not one of the options" in refused.message
            assert "\n" not in refused.message and "allow-once (Allow once)" in refused.message
        refused = await orch.send(Answer(approval_id=approval.id, answers={"other": ("x",)}))
        assert not refused.ok
        # an answer naming nothing is no plain accept (which would allow the command)
        refused = await orch.send(Answer(approval_id=approval.id, answers={}))
        assert not refused.ok and "choose an option" in refused.message, refused
        # nothing reached the agent: the approval still waits
        assert [a.id for a in orch.snapshot().approvals] == [approval.id]
        assert outcomes(log) == []
        done = await orch.send(Answer(approval_id=approval.id, answers={"option": ("allow-once",)}))
        assert done.ok, done
        await wait_for(lambda: ended(orch))
    finally:
        await rt.close()
    assert outcomes(log) == [{"outcome": "selected", "optionId": "allow-once"}]


async def test_the_decision_recorded_is_the_chosen_options_kind(tmp_path):
    log, env = project(tmp_path, "RUN make")
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        (approval,) = await wait_for(lambda: orch.snapshot().approvals)
        done = await orch.send(Answer(approval_id=approval.id, answers={"option": ("Reject",)}))
        assert done.ok and done.message == f"{IDENTIFIER}: denied", done
        await wait_for(lambda: ended(orch))
        resolved = resolutions(orch)
    finally:
        await rt.close()
    assert outcomes(log) == [{"outcome": "selected", "optionId": "reject-once"}]
    (event,) = resolved
    assert event.payload.decision == ApprovalDecision.DECLINE.value
    assert event.message.startswith("command denied by operator")


async def test_an_answer_to_an_earlier_runs_approval_is_refused(tmp_path):
    log, env = project(tmp_path, "RUN make")
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        (first,) = await wait_for(lambda: orch.snapshot().approvals)
        done = await orch.send(Answer(approval_id=first.id, answers={"option": ("allow-once",)}))
        assert done.ok, done
        # the issue stays active: a continuation run starts a new agent, whose request
        # ids start again from 1
        (second,) = await wait_for(
            lambda: [a for a in orch.snapshot().approvals if a.id != first.id]
        )
        late = await orch.send(Answer(approval_id=first.id, answers={"option": ("allow-once",)}))
        assert not late.ok and late.message == "no pending approval with that id"
        assert [a.id for a in orch.snapshot().approvals] == [second.id]
    finally:
        await rt.close()
    assert len(outcomes(log)) == 1


async def test_a_permission_left_unanswered_is_rejected_at_the_approval_timeout(tmp_path):
    log, env = project(tmp_path, "RUN make")
    workflow = tmp_path / "WORKFLOW.md"
    workflow.write_text(
        workflow.read_text().replace("  approvals: operator\n", "  approval_timeout_ms: 300\n")
    )
    rt = runtime(tmp_path, env)
    orch = rt.orchestrator
    try:
        await orch.start()
        await wait_for(lambda: ended(orch))
        resolved = [e.payload for e in resolutions(orch)]
    finally:
        await rt.close()
    # never left waiting: declined by the timeout, which the agent reads as a rejection
    assert outcomes(log) == [{"outcome": "selected", "optionId": "reject-once"}]
    (answered,) = resolved
    assert answered.timed_out and answered.by == "timeout"
    assert answered.decision == ApprovalDecision.DECLINE.value
