"""The agent process groups a crashed scheduler left on this machine: recorded with the run
(``session.agent_group``), ended at the next start only while provably the same group
(``hosts/local_group.py``), re-adoptable ones left to recovery."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings
from symphony_tui.hosts.local_group import group_alive, identify, same_group
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.manifest import read_section, update_manifest


@pytest.fixture
def manager(tmp_path: Path) -> WorkspaceManager:
    settings = Settings.model_validate({"workspace": {"root": str(tmp_path / "ws")}})
    return WorkspaceManager(lambda: settings)


@pytest.fixture
def groups():
    started: list[subprocess.Popen] = []

    def spawn(cwd: Path, script: str = "exec sleep 3100") -> subprocess.Popen:
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, start_new_session=True)
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def workspace(manager: WorkspaceManager, key: str) -> Path:
    path = manager.root / key
    path.mkdir(parents=True)
    return path


def record(ws: Path, pid: int, **changes) -> dict:
    found = identify(pid)
    assert found is not None
    update_manifest(ws, "session", agent_group={**found, "adoptable": False, **changes})
    return found


async def test_a_recorded_live_group_is_ended_and_its_record_cleared(manager, groups) -> None:
    ws = workspace(manager, "ABC-1")
    # An agent that ignores SIGTERM: SIGKILL follows the grace.
    agent = groups(ws, "trap '' TERM; sleep 3100 & wait")
    record(ws, agent.pid)
    ended, adoptable, _gone = await manager.reap()
    assert ended == [f"ABC-1 {agent.pid}"] and adoptable == []
    assert agent.wait(timeout=10) is not None and not group_alive(agent.pid)
    await manager.manifests.flush()
    assert read_section(ws, "session")["agent_group"] is None


async def test_a_recorded_acp_terminal_group_is_ended_and_cleared(manager, groups) -> None:
    ws = workspace(manager, "ABC-9")
    terminal = groups(ws, "sleep 3100 & wait")
    found = identify(terminal.pid)
    assert found is not None
    update_manifest(ws, "session", terminal_groups=[found])
    ended, _adoptable, _gone = await manager.reap()
    assert ended == [f"ABC-9 {terminal.pid}"]
    assert terminal.wait(timeout=10) is not None and not group_alive(terminal.pid)
    await manager.manifests.flush()
    assert read_section(ws, "session")["terminal_groups"] is None


async def test_a_reused_pid_is_never_signalled(manager, groups) -> None:
    ws = workspace(manager, "ABC-2")
    other = groups(ws)
    found = record(ws, other.pid, started=identify(other.pid)["started"] - 100)
    ended, *_ = await manager.reap()
    assert ended == [] and other.poll() is None  # another process than the one recorded
    await manager.manifests.flush()
    assert read_section(ws, "session")["agent_group"] is None
    assert same_group({**found, "boot_id": "another-boot"}, ws) is False


async def test_adoptable_skipped_and_foreign_records_are_left_alone(manager, groups) -> None:
    kept = workspace(manager, "ABC-3")
    busy = workspace(manager, "ABC-4")
    adoptable = groups(kept)
    in_use = groups(busy)
    record(kept, adoptable.pid, adoptable=True)
    record(busy, in_use.pid)
    foreign = workspace(manager, "ABC-6")  # another machine's, on a shared root
    theirs = groups(foreign)
    record(foreign, theirs.pid, boot_id="another-machine")
    ended, left, _gone = await manager.reap(skip=["ABC-4"])
    assert ended == [] and left == [f"ABC-3 {adoptable.pid}"]
    assert adoptable.poll() is None and in_use.poll() is None and theirs.poll() is None
    await manager.manifests.flush()
    assert read_section(kept, "session")["agent_group"]["adoptable"] is True
    assert read_section(foreign, "session")["agent_group"]["boot_id"] == "another-machine"


async def test_a_group_whose_leader_is_gone_is_ended_only_from_its_workspace(
    manager, groups, tmp_path
) -> None:
    ws = workspace(manager, "ABC-5")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = groups(ws, "sleep 0.5 & sleep 3100 & wait %1")  # the leader exits first
    away = groups(ws, f"cd {elsewhere}; sleep 0.5 & sleep 3100 & wait %1")
    record(ws, here.pid)
    found_away = identify(away.pid)
    here.wait(timeout=10)
    away.wait(timeout=10)
    assert group_alive(here.pid) and group_alive(away.pid)  # their sleepers live on
    assert same_group(found_away, elsewhere.parent / "nowhere") is False
    ended, *_ = await manager.reap()
    assert ended == [f"ABC-5 {here.pid}"]
    deadline = time.monotonic() + 10
    while group_alive(here.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(here.pid) and group_alive(away.pid)


async def test_a_run_whose_agent_ended_with_the_scheduler_is_reported_gone(manager, groups) -> None:
    """A scheduler killed with its agent on a pipe: the agent read EOF and exited, so
    nothing is left to end; the open run is reported (the restart says why it dispatches
    the issue again) and its record cleared."""
    ws = workspace(manager, "ABC-7")
    agent = groups(ws, "true")
    record(ws, agent.pid)
    agent.wait(timeout=10)
    ended, adoptable, gone = await manager.reap()
    assert (ended, adoptable, gone) == ([], [], [f"ABC-7 {agent.pid}"])
    await manager.manifests.flush()
    assert read_section(ws, "session")["agent_group"] is None
