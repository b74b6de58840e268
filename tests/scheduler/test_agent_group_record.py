"""A local run records its agent's process group in the workspace manifest
(``session.agent_group``) for the next start after a crash, and clears it once its
session closed; an adoptable agent's record stays for recovery."""

from __future__ import annotations

import subprocess

import pytest

from symphony_tui.workspaces.manifest import read_section
from symphony_tui_testing.scripted_backend import ScriptedSession, hang
from tests.scheduler.conftest import make_issue


@pytest.fixture
def leader():
    proc = subprocess.Popen(["sleep", "3100"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("adoptable", [False, True])
async def test_the_agent_group_is_recorded_while_the_session_lives(
    make_harness, monkeypatch, leader, adoptable
) -> None:
    monkeypatch.setattr(ScriptedSession, "pid", property(lambda self: leader.pid), raising=False)
    monkeypatch.setattr(ScriptedSession, "adoptable", adoptable, raising=False)
    h = make_harness([make_issue(1)], script=hang)
    await h.start()
    await h.settle()
    await h.orch.barrier()
    record = read_section(h.ws("ABC-1"), "session")["agent_group"]
    assert record["pgid"] == leader.pid and record["adoptable"] is adoptable
    assert isinstance(record["started"], int) and record["boot_id"]
    await h.orch.shutdown()
    after = read_section(h.ws("ABC-1"), "session")["agent_group"]
    assert after == (record if adoptable else None)
