"""Permission requests on the real codex (``features.request_permissions_tool``), through
the scheduler: the operator grants a subset of what was asked, for the turn or the session,
with ``Approve(permissions=...)``; the model reads back exactly what was granted."""

from __future__ import annotations

import json

import pytest

from symphony_tui.domain import ApprovalKind
from symphony_tui.domain.commands import Approve, Deny
from tests.helpers import until

from .codex_e2e import DONE, codex_schema, fake, project_factory, run_ends

pytestmark = pytest.mark.real_codex
__all__ = ["codex_schema", "fake", "project_factory"]


def ask(network: bool, write: str | None) -> str:
    perms: dict = {"network": {"enabled": network}}
    if write:
        perms["file_system"] = {"write": [write]}
    return "TOOL: request_permissions " + json.dumps({"reason": "need it", "permissions": perms})


def tool_outputs(fake) -> list[dict]:
    """What the model read back from each tool call, in order."""
    out = []
    for r in fake.requests:
        last = r["body"]["input"][-1]
        if last.get("type") == "function_call_output":
            out.append(json.loads(last["output"]))
    return out


async def test_operator_grants_a_subset_for_the_turn_then_for_the_session(
    project_factory, fake, tmp_path
):
    target = str(tmp_path / "allowed")
    fake.aliases.update(STEP2=ask(True, None), STEP3="SECOND " + ask(True, target), STEP4=DONE)
    project = project_factory(
        fake,
        issues=[("E2E-1", ask(True, target))],
        max_turns=4,
        features=["request_permissions_tool"],
    )
    rt = project.runtime()
    orch = rt.orchestrator
    await orch.start()

    # turn 1: network and a write path asked; the operator grants the network only
    first = (await until(lambda: orch.snapshot().approvals))[0]
    assert first.kind is ApprovalKind.PERMISSIONS
    assert first.permissions["network"] == {"enabled": True}
    assert first.permissions["fileSystem"]["write"] == [target]
    ok = await orch.send(Approve(approval_id=first.id, permissions={"network": {"enabled": True}}))
    assert ok.ok, ok
    # turn 2: network again; granted for the rest of the session this time
    second = (await until(lambda: [a for a in orch.snapshot().approvals if a.id != first.id]))[0]
    ok = await orch.send(Approve(approval_id=second.id, for_session=True))
    assert ok.ok, ok
    # turn 3: network plus the path: the operator declines
    third = (
        await until(
            lambda: [a for a in orch.snapshot().approvals if a.id not in (first.id, second.id)]
        )
    )[0]
    await orch.send(Deny(approval_id=third.id))
    ends = await until(lambda: run_ends(rt))

    assert ends[0]["outcome"] == "normal", ends
    granted = [r["result"] for r in project.responses() if "permissions" in r.get("result", {})]
    assert granted == [
        {"permissions": {"network": {"enabled": True}}, "scope": "turn"},
        # granting all returns what was asked, as codex sent it (``fileSystem: null``)
        {"permissions": {"network": {"enabled": True}, "fileSystem": None}, "scope": "session"},
        {"permissions": {}, "scope": "turn"},
    ]
    seen = tool_outputs(fake)
    assert seen[0] == {
        "permissions": {"network": {"enabled": True}, "file_system": None},
        "scope": "turn",
    }
    assert seen[1]["scope"] == "session" and seen[1]["permissions"]["network"] == {"enabled": True}
    assert seen[2] == {"permissions": {"network": None, "file_system": None}, "scope": "turn"}
    assert "state: Done" in project.issues_file.read_text()
