"""Workspaces on a worker host: created under the host's root, the hooks run
there (a hung one is killed there), manifests land there atomically, removal runs
``before_remove`` there, recovery lists them with their host, and a full or read-only disk
there is a one-line reason. Real sshd on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings
from symphony_tui.domain import Issue
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.paths import workspace_key

pytestmark = pytest.mark.slow

ISSUE = Issue(id="id-1", identifier="ABC/1 x", title="T", state="Todo")


def manager(tmp_path: Path, fleet, **hooks) -> tuple[WorkspaceManager, str, Path]:
    host = fleet.names[0]
    root = tmp_path / "remote-root"
    settings = Settings.model_validate(
        {
            "workspace": {"root": str(tmp_path / "local-root")},
            "hooks": {**hooks, "env": {"FROM_HOOKS": "yes", "LINEAR_API_KEY": "$LINEAR_API_KEY"}},
            "worker": {
                "ssh_hosts": fleet.names,
                "hosts": {host: {"workspace_root": str(root), "env": {"HOST_VAR": "h1"}}},
            },
        }
    )
    return WorkspaceManager(lambda: settings, env={"LINEAR_API_KEY": "lin_secret"}), host, root


async def test_a_workspace_and_its_hooks_live_on_the_host(tmp_path, fleet) -> None:
    mgr, host, root = manager(
        tmp_path,
        fleet,
        after_create="echo created > made.txt; env > env.txt",
        before_run="printf 'line one\\nline two\\n'; exit 4",
    )
    path, created = await mgr.ensure(ISSUE, host=host)
    assert created and path == root.resolve() / workspace_key("ABC/1 x")
    assert not (tmp_path / "local-root").exists()  # nothing here
    assert (path / "made.txt").read_text() == "created\n"
    env = dict(
        line.split("=", 1) for line in (path / "env.txt").read_text().splitlines() if "=" in line
    )
    assert env["SYMPHONY_ISSUE_IDENTIFIER"] == "ABC/1 x" and env["SYMPHONY_WORKSPACE"] == str(path)
    assert env["FROM_HOOKS"] == "yes" and env["HOST_VAR"] == "h1"
    assert "LINEAR_API_KEY" not in env  # a tracker secret never reaches a host
    hook = await mgr.run_hook("before_run", path, ISSUE, host=host)
    assert hook is not None and not hook.ok and hook.exit_code == 4
    assert hook.output == "line one\nline two\n"
    await mgr.manifests.flush()
    issue = json.loads((path / ".symphony" / "issue.json").read_text())
    assert issue["identifier"] == "ABC/1 x" and issue["workspace_key"] == workspace_key("ABC/1 x")
    run = json.loads((path / ".symphony" / "run.json").read_text())
    assert run["hooks"] == {"after_create": "ok", "before_run": "exit 4"}
    assert not [p for p in (path / ".symphony").iterdir() if p.name.startswith(".run")]
    again, created = await mgr.ensure(ISSUE, host=host)
    assert again == path and not created


async def test_a_hung_hook_is_killed_on_the_host(tmp_path, fleet) -> None:
    mgr, host, _ = manager(tmp_path, fleet, before_run="sleep 3301 & sleep 3302; echo never")
    path, _ = await mgr.ensure(ISSUE, host=host)
    settings = mgr._settings()
    short = settings.model_copy(
        update={"hooks": settings.hooks.model_copy(update={"timeout_ms": 1500})}
    )
    mgr._settings = lambda: short
    mgr.remote._settings = lambda: short
    hook = await mgr.run_hook("before_run", path, ISSUE, host=host)
    assert hook is not None and hook.timed_out and not hook.ok
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _sleepers(fleet):
        time.sleep(0.1)
    assert _sleepers(fleet) == []


async def test_a_hooks_background_children_end_with_it_on_the_host(tmp_path, fleet) -> None:
    """A hook that returns at once, ok, leaves nothing running there: its ``sleep 3101 &``
    (same process group) ends with it, and the ssh channel it held closes."""
    mgr, host, _ = manager(tmp_path, fleet, before_run="sleep 3101 & echo started")
    path, _ = await mgr.ensure(ISSUE, host=host)
    hook = await asyncio.wait_for(mgr.run_hook("before_run", path, ISSUE, host=host), 50)
    assert hook is not None and hook.ok and hook.output == "started\n"
    assert _sleepers(fleet, b"3101") == []


async def test_a_hung_hook_on_the_host_is_cut_short_by_a_stopping_scheduler(
    tmp_path, fleet
) -> None:
    # hooks.timeout_ms is its default (60 s): only the cutoff ends it before the bound
    mgr, host, _ = manager(tmp_path, fleet, after_run="touch started; sleep 347 & sleep 348")
    path, _ = await mgr.ensure(ISSUE, host=host)
    hook = asyncio.ensure_future(mgr.run_hook("after_run", path, ISSUE, host=host))
    for _ in range(1500):  # the hook says it started through the (loopback) host's disk
        if (path / "started").exists():
            break
        await asyncio.sleep(0.02)
    mgr.stop_hooks("scheduler shutdown", 0.0)
    result = await asyncio.wait_for(hook, 50)
    assert result is not None and result.cut_short == "scheduler shutdown" and not result.ok
    assert mgr.hooks_cut_short == [
        "ABC/1 x: after_run hook cut short (scheduler shutdown); its process group was ended"
    ]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _sleepers(fleet, b"347"):
        time.sleep(0.1)
    assert _sleepers(fleet, b"347") == []


def _sleepers(fleet, seconds: bytes = b"3301") -> list[int]:
    out = []
    for host in fleet.hosts:
        for pid in host.sessions():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"sleep\x00" + seconds in cmd and state != "Z":
                out.append(pid)
    # Reparented sleepers (their group leader died) are not the sshd's children any more.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if (
                cmd.startswith(b"sleep\x00" + seconds)
                and state != "Z"
                and int(entry.name) not in out
            ):
                out.append(int(entry.name))
    return out


async def test_remove_runs_before_remove_there_and_recovery_names_the_host(tmp_path, fleet) -> None:
    marker = tmp_path / "removed-from"
    mgr, host, root = manager(tmp_path, fleet, before_remove=f"pwd > {marker}")
    path, _ = await mgr.ensure(ISSUE, host=host)
    mgr.manifests.write(path, "run", "run", attempt=2, status="failed", error="boom")
    await mgr.manifests.flush()
    found = [r for r in mgr.recover() if r.host == host]
    assert len(found) == 1
    assert (found[0].issue_identifier, found[0].attempt, found[0].error) == ("ABC/1 x", 2, "boom")
    assert found[0].path == str(path)
    # A fresh manager (a restarted scheduler) removes it from the identifier alone.
    fresh, _, _ = manager(tmp_path, fleet, before_remove=f"pwd > {marker}")
    hook = await fresh.remove(ISSUE.identifier, host=host)
    assert hook is not None and hook.ok
    assert marker.read_text().strip() == str(path)
    assert not path.exists() and root.is_dir()
    assert [r for r in fresh.recover() if r.host == host] == []


async def test_a_symlink_in_place_of_a_workspace_is_refused(tmp_path, fleet) -> None:
    mgr, host, root = manager(tmp_path, fleet)
    root.mkdir(parents=True)
    os.symlink("/etc", root / workspace_key("ABC/1 x"))
    with pytest.raises(WorkspaceError) as err:
        await mgr.ensure(ISSUE, host=host)
    assert err.value.code == "workspace_outside_root" and "\n" not in str(err.value)


async def test_an_unreachable_host_is_a_one_line_workspace_error(tmp_path, fleet) -> None:
    mgr, host, _ = manager(tmp_path, fleet)
    fleet.hosts[0].kill()
    with pytest.raises(WorkspaceError) as err:
        await mgr.ensure(ISSUE, host=host)
    assert err.value.code == "workspace_host_unreachable"
    assert err.value.host_lost and "\n" not in str(err.value)


async def test_a_hook_whose_host_drops_says_the_host_was_lost(tmp_path, fleet) -> None:
    # Not "failed to start" / "exit None": the scheduler marks the host down at once.
    mgr, host, _ = manager(tmp_path, fleet, before_run="true")
    path, _ = await mgr.ensure(ISSUE, host=host)
    fleet.hosts[0].kill()
    result = await mgr.run_hook("before_run", path, ISSUE, host=host)
    assert result is not None and not result.ok and result.exit_code is None
    assert result.host_lost and "\n" not in result.host_lost
    assert result.summary().startswith("host unreachable: ")


class _SweepState:
    """What ``sweep_terminal_workspaces`` uses of the scheduler state."""

    def __init__(self, mgr: WorkspaceManager) -> None:
        self.workspaces = mgr
        self.events: list[str] = []

    @property
    def settings(self):
        return self.workspaces._settings()

    def emit_system(self, kind, message, **kw) -> None:
        self.events.append(message)

    def log(self, level, msg, **fields) -> None:
        self.events.append(f"{level}: {msg} {fields}")


class _Tracker:
    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues

    async def fetch_issues_by_states(self, states):
        return self.issues


async def test_the_start_up_sweep_removes_terminal_workspaces_on_the_hosts(tmp_path, fleet) -> None:
    from symphony_tui.scheduler.startup import sweep_terminal_workspaces

    mgr, host, _ = manager(tmp_path, fleet, before_remove="true")
    done = Issue(id="id-2", identifier="ABC-2", title="T", state="Done")
    kept, _ = await mgr.ensure(ISSUE, host=host)
    gone, _ = await mgr.ensure(done, host=host)
    await mgr.manifests.flush()
    state = _SweepState(mgr)
    await sweep_terminal_workspaces(state, _Tracker([done]))  # type: ignore[arg-type]
    assert not gone.exists() and kept.is_dir()
    assert state.events == [f"removed workspace of terminal issue on {host}"]


async def test_a_hold_on_a_host_survives_a_restart_and_its_release_clears_it_there(
    tmp_path, fleet
) -> None:
    from symphony_tui.scheduler.holds import Holds

    mgr, host, _root = manager(tmp_path, fleet)
    path, _ = await mgr.ensure(ISSUE, host=host)
    Holds(mgr).hold(ISSUE, path)  # the operator stopped the run
    mgr.manifests.write(path, "run", "budget", budget_extra=5000)
    await mgr.manifests.flush()

    fresh, _, _ = manager(tmp_path, fleet)  # a restarted scheduler
    found = [r for r in fresh.recover() if r.host == host]
    assert [(r.held, r.budget_extra) for r in found] == [(True, 5000)]  # read over SSH
    holds = Holds(fresh)
    holds.restore(found)
    assert ISSUE.id in holds
    holds.release(ISSUE.id, None)  # e.g. the issue left the candidates: no Issue at hand
    await fresh.manifests.flush()
    assert [r.held for r in fresh.recover() if r.host == host] == [False]


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs with few inodes (a disk about to fill up); needs root to mount."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=16", "tmpfs", str(mnt)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(folder: Path) -> None:
    """Use up the space, then the inodes, of the file system of ``folder``."""
    with contextlib.suppress(OSError), (folder / "fill").open("wb") as out:
        while True:
            out.write(b"\0" * 4096)
            out.flush()
    for n in range(100):
        try:
            (folder / f"f{n}").touch()
        except OSError:
            return


async def test_a_full_or_read_only_disk_on_the_host_is_one_line(tmp_path, fleet, tiny_fs) -> None:
    host = fleet.names[0]
    settings = Settings.model_validate(
        {
            "workspace": {"root": str(tmp_path / "local-root")},
            "worker": {"ssh_hosts": fleet.names, "workspace_root": str(tiny_fs / "root")},
        }
    )
    mgr = WorkspaceManager(lambda: settings)
    path, _ = await mgr.ensure(ISSUE, host=host)
    await mgr.manifests.flush()
    _fill(tiny_fs)
    store = mgr.remote.store(host)
    with pytest.raises(OSError) as full:
        await asyncio.to_thread(store.merge, path, "run", {"status": "running", "pad": "x" * 8192})
    assert "No space left on device" in str(full.value) and "\n" not in str(full.value)
    other = Issue(id="id-2", identifier="ABC-2", title="T", state="Todo")
    with pytest.raises(WorkspaceError) as err:
        await mgr.ensure(other, host=host)
    assert err.value.code == "workspace_create_failed"
    assert "No space left on device" in str(err.value) and "\n" not in str(err.value)
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    with pytest.raises(WorkspaceError) as err:
        await mgr.ensure(other, host=host)
    assert "Read-only file system" in str(err.value) and "\n" not in str(err.value)
    # The other host is not held up by any of it.
    assert (await mgr.remote._target(fleet.names[1]).run("exit 0")).ok


async def test_the_start_up_sweep_on_a_host_leaves_a_folder_its_manifest_does_not_name(
    tmp_path, fleet
) -> None:
    from symphony_tui.scheduler.startup import sweep_terminal_workspaces
    from symphony_tui.workspaces.manifest import update_manifest

    mgr, host, _ = manager(tmp_path, fleet, before_remove="true")
    done = Issue(id="id-2", identifier="ABC-2", title="T", state="Done")
    path, _ = await mgr.ensure(done, host=host)
    await mgr.manifests.flush()
    update_manifest(path, "issue", id="id-9", identifier="ABC-9")  # another issue's folder
    state = _SweepState(mgr)
    await sweep_terminal_workspaces(state, _Tracker([done]))  # type: ignore[arg-type]
    assert path.is_dir() and state.events == []
