"""Workspace diffs (workspaces/diff.py): the base, counts, binary files, paging, escapes."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from symphony_tui.workspaces import diff

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def cloned(tmp_path: Path) -> Path:
    """A workspace cloned from an upstream, on a feature branch with one commit, plus
    uncommitted, untracked and binary changes."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "keep.txt").write_text("one\ntwo\nthree\n")
    (upstream / "gone.txt").write_text("bye\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "base")
    ws = tmp_path / "ws"
    git(tmp_path, "clone", "-q", str(upstream), str(ws))
    git(ws, "checkout", "-q", "-b", "agent/work")
    (ws / "keep.txt").write_text("one\nTWO\nthree\nfour\n")
    git(ws, "commit", "-q", "-am", "agent commit")
    (ws / "gone.txt").unlink()
    (ws / "new.py").write_text("print('hi')\n\x1b[31mred\x1b[0m\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    # upstream moves on after the branch point: not part of the agent's change
    (upstream / "later.txt").write_text("not ours\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "later")
    git(ws, "fetch", "-q")
    return ws


def test_changes_against_the_merge_base_with_the_default_branch(cloned: Path):
    found = diff.workspace_diff(cloned, issue_identifier="ABC-1")
    assert found.error is None
    assert found.base_kind == "merge-base" and found.base.startswith("origin/")
    by_path = {f.path: f for f in found.files}
    assert set(by_path) == {"blob.bin", "gone.txt", "keep.txt", "new.py"}  # not later.txt
    assert (by_path["keep.txt"].added, by_path["keep.txt"].removed) == (2, 1)
    assert by_path["gone.txt"].status == "D" and by_path["gone.txt"].removed == 1
    assert by_path["new.py"].status == "?" and by_path["new.py"].added == 2
    assert by_path["blob.bin"].binary and by_path["blob.bin"].added is None
    assert found.added == 4 and found.removed == 2


def test_file_pages_binary_and_untracked(cloned: Path):
    page = diff.file_diff(cloned, "keep.txt")
    assert "-two" in page.lines and "+TWO" in page.lines and "+four" in page.lines
    first = diff.file_diff(cloned, "keep.txt", offset=0, limit=2)
    rest = diff.file_diff(cloned, "keep.txt", offset=2, limit=1000)
    assert first.lines + rest.lines == page.lines and first.total_lines == page.total_lines
    assert len(first.lines) == 2
    untracked = diff.file_diff(cloned, "new.py")
    assert "+print('hi')" in untracked.lines
    # raw text: the escape arrives as it is; the console makes it inert
    assert any("\x1b[31m" in line for line in untracked.lines)
    assert diff.file_diff(cloned, "blob.bin").binary


def test_names_outside_the_workspace_are_refused(cloned: Path, tmp_path: Path):
    (tmp_path / "secret.txt").write_text("no\n")
    for name in ("../secret.txt", str(tmp_path / "secret.txt"), "", "a\0b"):
        page = diff.file_diff(cloned, name)
        assert page.error and not page.lines
    os.symlink(tmp_path / "secret.txt", cloned / "link.txt")
    assert diff.file_diff(cloned, "link.txt").error


def test_a_repository_without_upstream_is_diffed_against_head(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    git(ws, "add", ".")
    git(ws, "commit", "-q", "-m", "first")
    (ws / "a.txt").write_text("a\nb\n")
    found = diff.workspace_diff(ws)
    assert found.base_kind == "head" and found.base.startswith("HEAD @ ")
    assert [(f.path, f.added, f.removed) for f in found.files] == [("a.txt", 1, 0)]


def test_an_empty_repository_lists_untracked_files(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / "x.txt").write_text("x\n")
    found = diff.workspace_diff(ws)
    assert found.error is None and found.base == "no commits yet"
    assert [f.path for f in found.files] == ["x.txt"]


def test_without_a_repository_the_files_changed_since_the_run_started(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    old = ws / "old.txt"
    old.write_text("before\n")
    past = time.time() - 3600
    os.utime(old, (past, past))
    started = datetime.fromtimestamp(time.time() - 60, UTC)
    (ws / "sub").mkdir()
    (ws / "sub" / "made.txt").write_text("l1\nl2\n")
    found = diff.workspace_diff(ws, since=started)
    assert found.base_kind == "since-start" and "not a git repository" in found.base
    assert [(f.path, f.status, f.added) for f in found.files] == [("sub/made.txt", "C", 2)]
    page = diff.file_diff(ws, "sub/made.txt", since=started)
    assert page.lines[-2:] == ("+l1", "+l2")


def test_a_workspace_inside_an_unrelated_repository_is_not_diffed_with_it(tmp_path: Path):
    git(tmp_path, "init", "-q")
    ws = tmp_path / "workspaces" / "ABC-1"
    ws.mkdir(parents=True)
    (ws / "f.txt").write_text("f\n")
    found = diff.workspace_diff(ws, since=datetime.fromtimestamp(time.time() - 60, UTC))
    assert found.base_kind == "since-start" and [f.path for f in found.files] == ["f.txt"]


def test_a_missing_folder_is_an_error(tmp_path: Path):
    assert "no workspace folder" in (diff.workspace_diff(tmp_path / "nope").error or "")


def test_a_long_diff_is_cut_at_the_byte_cap(cloned: Path, monkeypatch):
    (cloned / "keep.txt").write_text("x" * 50 + "\n" + "line\n" * 5000)
    monkeypatch.setattr(diff, "MAX_DIFF_BYTES", 4096)
    page = diff.file_diff(cloned, "keep.txt", limit=10_000)
    assert page.truncated and 0 < page.total_lines < 5000
