"""One scheduler per project: ProjectLock (flock; dead owners are taken over)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from symphony_tui.config.settings import resolve_settings
from symphony_tui.scheduler.project_lock import (
    WORKSPACE_LOCK_NAME,
    ProjectLock,
    ProjectLockedError,
    project_key_for,
)

HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from symphony_tui.scheduler.project_lock import ProjectLock\n"
    "lock = ProjectLock.acquire(sys.argv[1], Path(sys.argv[2]))\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


def spawn_holder(key: str, state_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, key, str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_acquire_records_the_owner_and_release_frees_it(tmp_path: Path) -> None:
    lock = ProjectLock.acquire("linear:x#p", tmp_path)
    assert lock.held and lock.path.parent == tmp_path
    with pytest.raises(ProjectLockedError):  # a second holder, even in the same process
        ProjectLock.acquire("linear:x#p", tmp_path)
    lock.release()
    lock.release()  # idempotent
    with ProjectLock.acquire("linear:x#p", tmp_path) as again:
        assert again.held
    assert not again.held


def test_different_projects_do_not_conflict(tmp_path: Path) -> None:
    with ProjectLock.acquire("a", tmp_path), ProjectLock.acquire("b", tmp_path):
        pass


def test_a_live_owner_is_named_in_the_error(tmp_path: Path) -> None:
    proc = spawn_holder("local:/x/issues.yaml", tmp_path)
    try:
        with pytest.raises(ProjectLockedError) as info:
            ProjectLock.acquire("local:/x/issues.yaml", tmp_path)
        message = str(info.value)
        assert f"pid {proc.pid}" in message and socket.gethostname() in message
        assert "local:/x/issues.yaml" in message and "\n" not in message
        assert info.value.owner["key"] == "local:/x/issues.yaml"
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    proc = spawn_holder("k", tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with ProjectLock.acquire("k", tmp_path) as lock:
        assert lock.held


def test_child_processes_do_not_inherit_the_lock(tmp_path: Path) -> None:
    # The owner starts a long-lived child (as it starts agents), then dies: the child must
    # not keep the project locked.
    script = HOLDER.replace(
        "print('locked', flush=True)\n",
        "import subprocess\n"
        "child = subprocess.Popen(['sleep', '60'], close_fds=False)\n"
        "print('locked', child.pid, flush=True)\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "k", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    word, child_pid = proc.stdout.readline().split()
    assert word == "locked"
    try:
        with pytest.raises(ProjectLockedError):
            ProjectLock.acquire("k", tmp_path)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with ProjectLock.acquire("k", tmp_path) as lock:
            assert lock.held
    finally:
        os.kill(int(child_pid), signal.SIGKILL)


def test_project_key_for_linear_and_local(tmp_path: Path) -> None:
    linear = resolve_settings(
        {"tracker": {"kind": "linear", "project_slug": "proj", "endpoint": "https://e/graphql/"}},
        tmp_path,
        {},
    )
    assert project_key_for(linear) == "linear:https://e/graphql#proj"
    local = resolve_settings({"tracker": {"kind": "local", "path": "i.yaml"}}, tmp_path, {})
    assert project_key_for(local) == f"local:{os.path.realpath(tmp_path / 'i.yaml')}"


def test_project_key_for_jira_gitlab_and_asana(tmp_path: Path) -> None:
    """One scheduler per Jira project, GitLab project and Asana project, wherever the
    workflow file is."""
    raw = {
        "jira": {"base_url": "https://s.atlassian.net/", "project_key": "SD"},
        "gitlab": {"project_path": "group/app"},
        "asana": {"provider": {"project_gid": "1200"}},
    }
    keys = {
        kind: project_key_for(resolve_settings({"tracker": {"kind": kind, **extra}}, tmp_path, {}))
        for kind, extra in raw.items()
    }
    assert keys == {
        "jira": "jira:https://s.atlassian.net#SD",
        "gitlab": "gitlab:https://gitlab.com/api/v4#group/app",
        "asana": "asana:https://app.asana.com/api/1.0#1200",
    }


ROOT_HOLDER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from symphony_tui.config.settings import resolve_settings\n"
    "from symphony_tui.scheduler.project_lock import ProjectLock\n"
    "settings = resolve_settings(\n"
    "    {'tracker': {'kind': 'local', 'path': sys.argv[1]}, 'workspace': {'root': sys.argv[2]}},\n"
    "    Path(sys.argv[1]).parent, {},\n"
    ")\n"
    "lock = ProjectLock.acquire_for(settings)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_schedulers_with_different_tmpdir_share_the_workspace_root_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The project-lock folder follows $TMPDIR, so a second scheduler with another TMPDIR
    # finds a free project lock and would run the same issues in the same workspaces. The
    # lock inside the workspace root refuses it and names the owner.
    issues, root = tmp_path / "issues.yaml", tmp_path / "ws"
    first_tmp, second_tmp = tmp_path / "tmp-1", tmp_path / "tmp-2"
    first_tmp.mkdir()
    second_tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SYMPHONY_LOCK_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-c", ROOT_HOLDER, str(issues), str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "TMPDIR": str(first_tmp)},
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "locked"
        monkeypatch.delenv("SYMPHONY_LOCK_DIR", raising=False)
        monkeypatch.setenv("TMPDIR", str(second_tmp))
        monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
        settings = resolve_settings(
            {"tracker": {"kind": "local", "path": str(issues)}, "workspace": {"root": str(root)}},
            tmp_path,
            {},
        )
        # The project lock alone is free here: another TMPDIR, another lock folder.
        with ProjectLock.acquire(project_key_for(settings)):
            pass
        with pytest.raises(ProjectLockedError) as info:
            ProjectLock.acquire_for(settings)
        message = str(info.value)
        assert f"pid {proc.pid}" in message and socket.gethostname() in message
        assert str(root / WORKSPACE_LOCK_NAME) in message and "\n" not in message
        # Refused: nothing stays locked, the project lock included.
        with ProjectLock.acquire(project_key_for(settings)):
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with ProjectLock.acquire_for(settings) as lock:  # a dead owner is taken over
            assert lock.held and len(lock.paths) == 2
            assert lock.paths[1] == root / WORKSPACE_LOCK_NAME
        assert not lock.held
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("identifier", [".symphony-tui.lock", WORKSPACE_LOCK_NAME])
async def test_an_issue_named_like_the_lock_never_removes_it(make_harness, identifier: str) -> None:
    """The start-up sweep of a terminal issue whose identifier is the lock's name (today's
    or an earlier version's) leaves the lock in place: a second scheduler stays refused."""
    from symphony_tui.domain import Issue

    finished = Issue(id="id-lock", identifier=identifier, title="named like the lock", state="Done")
    h = make_harness([finished])
    settings = h.store.current.settings
    with ProjectLock.acquire_for(settings) as lock:
        held = lock.paths[1]
        await h.start()
        assert held.exists()
        with pytest.raises(ProjectLockedError):
            ProjectLock.acquire_for(settings)
        await h.orch.shutdown()
