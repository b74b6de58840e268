"""Spec §17.2 Workspace Manager and Safety (plus recovery from manifests)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from symphony_tui.domain import Issue
from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui.workspaces.manifest import read_section, update_manifest
from symphony_tui.workspaces.paths import workspace_key


def make_issue(identifier: str = "ABC-1", **kw) -> Issue:
    return Issue(id=f"id-{identifier}", identifier=identifier, title="T", state="Todo", **kw)


class Config:
    """A mutable settings provider, like a reloading WorkflowStore."""

    def __init__(self, tmp_path: Path, **hooks: object) -> None:
        self.tmp_path = tmp_path
        self.set(**hooks)

    def set(self, **hooks: object) -> None:
        raw = {"workspace": {"root": str(self.tmp_path / "ws")}, "hooks": hooks}
        self.settings = resolve_settings(raw, self.tmp_path, {})

    def __call__(self) -> Settings:
        return self.settings


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(tmp_path)


async def test_missing_workspace_directory_is_created(config: Config) -> None:
    mgr = WorkspaceManager(config)
    path, created = await mgr.ensure(make_issue("ABC/1"))
    assert created and path.is_dir()
    assert path == (config.tmp_path / "ws").resolve() / workspace_key("ABC/1")
    await mgr.manifests.flush()  # manifest writes are queued to the writer thread
    issue = read_section(path, "issue")
    assert issue["id"] == "id-ABC/1" and issue["identifier"] == "ABC/1"
    assert issue["workspace_key"] == workspace_key("ABC/1") and issue["created_at"]


async def test_existing_workspace_directory_is_reused(config: Config) -> None:
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    (path / "work.txt").write_text("keep me")
    await mgr.manifests.flush()
    created_at = read_section(path, "issue")["created_at"]
    again, created = await mgr.ensure(make_issue())
    assert again == path and not created
    assert (path / "work.txt").read_text() == "keep me"
    await mgr.manifests.flush()
    assert read_section(path, "issue")["created_at"] == created_at


async def test_existing_non_directory_path_fails_safely(config: Config) -> None:
    mgr = WorkspaceManager(config)
    (config.tmp_path / "ws").mkdir()
    blocker = config.tmp_path / "ws" / "ABC-1"
    blocker.write_text("not a dir")
    with pytest.raises(WorkspaceError) as info:
        await mgr.ensure(make_issue())
    assert info.value.code == "workspace_not_a_directory"
    assert blocker.read_text() == "not a dir"


async def test_temporary_artifacts_are_removed_during_prep(config: Config) -> None:
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    (path / "tmp" / "deep").mkdir(parents=True)
    (path / "tmp" / "deep" / "x").write_text("x")
    (path / ".elixir_ls").mkdir()
    (path / "src").mkdir()
    await mgr.ensure(make_issue())
    assert not (path / "tmp").exists() and not (path / ".elixir_ls").exists()
    assert (path / "src").is_dir()


async def test_after_create_hook_runs_only_on_new_workspace_creation(config: Config) -> None:
    config.set(after_create='echo "$SYMPHONY_ISSUE_IDENTIFIER" >> ../created.log; ls -A')
    mgr = WorkspaceManager(config)
    await mgr.ensure(make_issue())
    await mgr.ensure(make_issue())
    await mgr.ensure(make_issue("ABC-2"))
    log = (config.tmp_path / "ws" / "created.log").read_text().split()
    assert log == ["ABC-1", "ABC-2"]


async def test_after_create_sees_an_empty_folder(config: Config) -> None:
    # `git clone <url> .` needs an empty folder: manifests are written after the hook.
    config.set(after_create='test -z "$(ls -A)"')
    mgr = WorkspaceManager(config)
    path, created = await mgr.ensure(make_issue())
    await mgr.manifests.flush()
    assert created and read_section(path, "run")["hooks"] == {"after_create": "ok"}


async def test_after_create_failure_aborts_creation_and_removes_the_folder(
    config: Config,
) -> None:
    config.set(after_create="echo partial > f; echo boom >&2; exit 7")
    mgr = WorkspaceManager(config)
    with pytest.raises(WorkspaceError) as info:
        await mgr.ensure(make_issue())
    err = info.value
    assert err.code == "after_create_failed" and "exit 7" in str(err)
    assert err.hook is not None and err.hook.exit_code == 7 and "boom" in err.hook.output
    assert not mgr.path_for("ABC-1").exists()
    # The next attempt creates it again (and runs the hook again).
    config.set(after_create="true")
    _, created = await mgr.ensure(make_issue())
    assert created


async def test_after_create_timeout_is_fatal_to_creation(config: Config) -> None:
    config.set(after_create="sleep 30", timeout_ms=1500)
    mgr = WorkspaceManager(config)
    with pytest.raises(WorkspaceError) as info:
        await mgr.ensure(make_issue())
    assert info.value.hook is not None and info.value.hook.timed_out
    assert not mgr.path_for("ABC-1").exists()


async def test_before_run_failure_and_timeout_are_reported_to_abort_the_attempt(
    config: Config,
) -> None:
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    config.set(before_run="exit 4")
    result = await mgr.run_hook("before_run", path, make_issue())
    assert result is not None and not result.ok and result.exit_code == 4
    config.set(before_run="sleep 30", timeout_ms=1500)
    result = await mgr.run_hook("before_run", path, make_issue())
    assert result is not None and result.timed_out and not result.ok
    await mgr.manifests.flush()
    assert read_section(path, "run")["hooks"]["before_run"].startswith("timed out")


async def test_before_run_runs_before_each_attempt_with_issue_env(config: Config) -> None:
    config.set(before_run='echo "$SYMPHONY_ISSUE_ID $SYMPHONY_WORKSPACE" >> runs.log')
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    for _ in range(2):
        result = await mgr.run_hook("before_run", path, make_issue())
        assert result is not None and result.ok
    assert (path / "runs.log").read_text().splitlines() == [f"id-ABC-1 {path}"] * 2


async def test_after_run_failure_is_logged_and_ignored(config: Config) -> None:
    config.set(after_run="exit 9")
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    result = await mgr.run_hook("after_run", path, make_issue())
    assert result is not None and result.exit_code == 9  # a result, not an exception
    assert path.is_dir()


async def test_unconfigured_hook_returns_none(config: Config) -> None:
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    assert await mgr.run_hook("after_run", path) is None
    with pytest.raises(ValueError):
        await mgr.run_hook("before_lunch", path)


async def test_hook_in_a_path_outside_the_root_is_refused(config: Config) -> None:
    config.set(before_run="true")
    mgr = WorkspaceManager(config)
    with pytest.raises(WorkspaceError):
        await mgr.run_hook("before_run", config.tmp_path)


async def test_before_remove_runs_on_cleanup_and_failures_are_ignored(config: Config) -> None:
    config.set(before_remove='echo "$PWD" > ../removed.log; exit 1')
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    result = await mgr.remove("ABC-1")
    assert result is not None and result.exit_code == 1
    assert not path.exists()
    assert (config.tmp_path / "ws" / "removed.log").read_text().strip() == str(path)


async def test_before_remove_timeout_is_ignored(config: Config) -> None:
    config.set(before_remove="sleep 30", timeout_ms=1500)
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    result = await mgr.remove("ABC-1")
    assert result is not None and result.timed_out
    assert not path.exists()


async def test_remove_is_a_no_op_when_missing(config: Config) -> None:
    config.set(before_remove="exit 1")
    assert await WorkspaceManager(config).remove("NOPE-1") is None


async def test_remove_handles_read_only_trees(config: Config) -> None:
    mgr = WorkspaceManager(config)
    path, _ = await mgr.ensure(make_issue())
    ro = path / "pkg" / "mod"
    ro.mkdir(parents=True)
    (ro / "f.go").write_text("package x")
    os.chmod(ro / "f.go", 0o444)
    os.chmod(ro, 0o555)
    await mgr.remove("ABC-1")
    assert not path.exists()


async def test_remove_unlinks_a_symlink_without_following_it(config: Config) -> None:
    mgr = WorkspaceManager(config)
    other, _ = await mgr.ensure(make_issue("OTHER-1"))
    (other / "precious").write_text("x")
    os.symlink(other, other.parent / "ABC-1")
    await mgr.remove("ABC-1")
    assert not (other.parent / "ABC-1").exists()
    assert (other / "precious").read_text() == "x"


async def test_workspace_outside_root_is_rejected_before_use(config: Config) -> None:
    mgr = WorkspaceManager(config)
    (config.tmp_path / "ws").mkdir()
    (config.tmp_path / "elsewhere").mkdir()
    os.symlink(config.tmp_path / "elsewhere", config.tmp_path / "ws" / "ABC-1")
    with pytest.raises(WorkspaceError) as info:
        await mgr.ensure(make_issue())
    assert info.value.code == "workspace_outside_root"
    with pytest.raises(WorkspaceError):
        await mgr.remove("ABC-1")
    assert (config.tmp_path / "elsewhere").is_dir()


async def test_reloaded_settings_apply_to_the_next_call(config: Config, tmp_path: Path) -> None:
    mgr = WorkspaceManager(config)
    first, _ = await mgr.ensure(make_issue())
    config.settings = resolve_settings({"workspace": {"root": str(tmp_path / "ws2")}}, tmp_path, {})
    second, created = await mgr.ensure(make_issue())
    assert created and second.parent == (tmp_path / "ws2").resolve() != first.parent


async def test_concurrent_ensure_of_one_issue_creates_once(config: Config) -> None:
    config.set(after_create="echo x >> ../count.log")
    mgr = WorkspaceManager(config)
    results = await asyncio.gather(*(mgr.ensure(make_issue()) for _ in range(5)))
    assert sum(created for _, created in results) == 1
    assert (config.tmp_path / "ws" / "count.log").read_text() == "x\n"


async def test_recover_lists_workspaces_from_manifests_newest_first(config: Config) -> None:
    mgr = WorkspaceManager(config)
    old, _ = await mgr.ensure(make_issue("OLD-1"))
    update_manifest(
        old, "run", attempt=2, status="failed", error="boom", started_at="2026-11-30T07:00:00Z"
    )
    new, _ = await mgr.ensure(make_issue("NEW-1"))
    update_manifest(new, "run", attempt=None, status="streaming_turn", hooks={"before_run": "ok"})
    update_manifest(
        new,
        "session",
        backend="codex",
        session_id="t-u",
        thread_id="t",
        tokens={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        last_event="turn_started",
    )
    await mgr.manifests.flush()  # its writer thread has written issue.json by now
    os.utime(old / ".symphony" / "run.json", (1, 1))
    os.utime(old / ".symphony" / "issue.json", (1, 1))
    # Garbage that recovery must tolerate.
    root = config.tmp_path / "ws"
    (root / "no-manifest").mkdir()
    (root / "stray-file").write_text("x")
    (root / "broken" / ".symphony").mkdir(parents=True)
    (root / "broken" / ".symphony" / "issue.json").write_text("{nope")
    bad = root / "bad-values"
    bad.mkdir()
    update_manifest(bad, "issue", id="b", identifier="BAD-1")
    update_manifest(bad, "run", attempt="many", started_at="yesterday-ish", hooks=[1])

    found = mgr.recover()
    keys = [r.key for r in found]
    assert set(keys) == {"OLD-1", "NEW-1", "bad-values"}
    assert keys[-1] == "OLD-1"
    by_key = {r.key: r for r in found}
    n = by_key["NEW-1"]
    assert n.issue_identifier == "NEW-1" and n.issue_id == "id-NEW-1" and n.issue_state == "Todo"
    assert n.backend == "codex" and n.session_id == "t-u" and n.thread_id == "t"
    assert n.tokens.total_tokens == 15 and n.last_event == "turn_started"
    assert n.status == "streaming_turn" and n.attempt is None
    assert n.hooks == {"before_run": "ok"}
    o = by_key["OLD-1"]
    assert o.attempt == 2 and o.status == "failed" and o.error == "boom"
    assert o.started_at is not None and o.started_at.year == 2026
    b = by_key["bad-values"]
    assert b.issue_identifier == "BAD-1" and b.attempt is None and b.started_at is None


async def test_recover_with_missing_root_is_empty(config: Config) -> None:
    assert WorkspaceManager(config).recover() == []


def _legacy_workspace(root: Path, name: str, identifier: str) -> Path:
    """A workspace as an earlier release left it: folder ``name``, manifest naming
    ``identifier``, some work inside."""
    ws = root / name
    ws.mkdir(parents=True)
    (ws / "work.txt").write_text("half done\n")
    update_manifest(ws, "issue", id=f"id-{identifier}", identifier=identifier, workspace_key=name)
    return ws


async def test_a_workspace_under_its_earlier_key_is_carried_over_not_recreated(
    config: Config,
) -> None:
    config.set(after_create="touch created-by-hook")
    root = (config.tmp_path / "ws").resolve()
    old = _legacy_workspace(root, "A_B", "A/B")
    mgr = WorkspaceManager(config)
    path, created = await mgr.ensure(make_issue("A/B"))
    assert path == root / workspace_key("A/B") and path.name != "A_B"
    assert not created and not old.exists()
    assert (path / "work.txt").read_text() == "half done\n"
    assert not (path / "created-by-hook").exists()  # after_create is for new workspaces
    await mgr.manifests.flush()
    assert read_section(path, "issue")["workspace_key"] == path.name


async def test_the_folder_of_an_issue_whose_key_did_not_change_is_never_taken(
    config: Config,
) -> None:
    root = (config.tmp_path / "ws").resolve()
    mine = _legacy_workspace(root, "A_B", "A_B")  # issue A_B's own workspace
    mgr = WorkspaceManager(config)
    path, created = await mgr.ensure(make_issue("A/B"))
    assert created and path.name == workspace_key("A/B")
    assert (mine / "work.txt").exists()
    again, created_again = await mgr.ensure(make_issue("A_B"))
    assert again == mine and not created_again


async def test_start_up_carries_workspaces_over_and_recovery_still_lists_them(
    config: Config,
) -> None:
    root = (config.tmp_path / "ws").resolve()
    _legacy_workspace(root, "A_B", "A/B")
    _legacy_workspace(root, "X_1", "X 1")
    _legacy_workspace(root, "ABC-1", "ABC-1")  # unchanged identifier: stays
    (root / "no-manifest").mkdir()  # not ours to move
    mgr = WorkspaceManager(config)
    moved = await asyncio.to_thread(mgr.carry_over_all)
    assert sorted(moved) == sorted([("A_B", workspace_key("A/B")), ("X_1", workspace_key("X 1"))])
    assert sorted(p.name for p in root.iterdir()) == sorted(
        ["ABC-1", "no-manifest", workspace_key("A/B"), workspace_key("X 1")]
    )
    listed = {w.issue_identifier: w.key for w in mgr.recover()}
    assert listed == {
        "A/B": workspace_key("A/B"),
        "X 1": workspace_key("X 1"),
        "ABC-1": "ABC-1",
    }
    assert await asyncio.to_thread(mgr.carry_over_all) == []  # idempotent


def test_a_worker_hosts_workspace_under_its_earlier_key_is_carried_over_by_its_script(
    tmp_path: Path,
) -> None:
    # The shell a worker host runs before ensuring a workspace (workspaces/remote.py), run
    # here with bash: the folder whose manifest names the issue moves, another issue's stays.
    import shlex
    import subprocess

    from symphony_tui.workspaces.remote import _carry_over_script

    _legacy_workspace(tmp_path, "A_B", "A/B")
    _legacy_workspace(tmp_path, "X_1", "X_1")  # issue X_1's own, not issue "X 1"'s
    for identifier in ("A/B", "X 1"):
        key = workspace_key(identifier)
        script = f'root={shlex.quote(str(tmp_path))}; ws="$root"/{shlex.quote(key)}; '
        done = subprocess.run(["bash", "-c", script + _carry_over_script(identifier, key)])
        assert done.returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([workspace_key("A/B"), "X_1"])
    assert (tmp_path / workspace_key("A/B") / "work.txt").read_text() == "half done\n"
