"""Spec §17.2: deterministic, sanitized workspace paths contained in the root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from symphony_tui.workspaces.errors import WorkspaceError
from symphony_tui.workspaces.paths import (
    MAX_KEY_LENGTH,
    ensure_inside_root,
    identifier_hash,
    legacy_workspace_key,
    workspace_key,
    workspace_path,
)


@pytest.mark.parametrize(
    ("identifier", "key"),
    [
        ("ABC-123", "ABC-123"),
        ("abc.def_ghi-1", "abc.def_ghi-1"),
        ("ABC/123", "ABC_123"),
        ("../../etc/passwd", ".._.._etc_passwd"),
        ("a b\tc\nd", "a_b_c_d"),
        ("ünï", "_n_"),
        ("$(rm -rf ~)", "__rm_-rf___"),
        ("", "_"),
        (".", "_"),
        ("..", "__"),
    ],
)
def test_workspace_path_sanitization(identifier: str, key: str) -> None:
    # The sanitized text, plus the original's hash whenever sanitizing changed it (§4.2).
    expected = key if key == identifier else f"{key}--{identifier_hash(identifier)}"
    assert workspace_key(identifier) == expected
    assert legacy_workspace_key(identifier) == key


def test_identifiers_that_sanitize_alike_get_distinct_keys() -> None:
    keys = {i: workspace_key(i) for i in ("A/B", "A_B", "A B", "A\tB")}
    assert len(set(keys.values())) == 4
    assert keys["A_B"] == "A_B"  # unchanged by sanitizing: keeps its key
    for identifier in ("A/B", "A B"):
        prefix, _, suffix = keys[identifier].partition("--")
        assert prefix == "A_B"
        assert len(suffix) * 4 >= 64 and suffix == identifier_hash(identifier)
        assert re.fullmatch(r"[A-Za-z0-9._-]+", keys[identifier])
    assert workspace_key("A/B") == workspace_key("A/B")  # stable


@pytest.mark.parametrize("identifier", ["ABC-123", "abc.def_ghi-1", "PROJ-7", "x" * MAX_KEY_LENGTH])
def test_identifiers_unchanged_by_sanitization_keep_their_key(identifier: str) -> None:
    assert workspace_key(identifier) == identifier == legacy_workspace_key(identifier)


def test_deterministic_workspace_path_per_issue_identifier(tmp_path: Path) -> None:
    a = workspace_path(tmp_path, "ABC/1")
    assert a == workspace_path(tmp_path, "ABC/1") == tmp_path.resolve() / workspace_key("ABC/1")
    assert workspace_path(tmp_path, "ABC-1") == tmp_path.resolve() / "ABC-1"


def test_long_identifiers_get_a_bounded_unique_key() -> None:
    one, two = workspace_key("X" * 500), workspace_key("X" * 499 + "Y")
    assert len(one) <= MAX_KEY_LENGTH and len(two) <= MAX_KEY_LENGTH
    assert one != two and one == workspace_key("X" * 500)


def test_symlink_pointing_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "ABC-1")
    with pytest.raises(WorkspaceError) as info:
        workspace_path(root, "ABC-1")
    assert info.value.code == "workspace_outside_root"


def test_symlink_to_the_root_itself_is_refused(tmp_path: Path) -> None:
    os.symlink(tmp_path, tmp_path / "ABC-1")
    with pytest.raises(WorkspaceError):
        workspace_path(tmp_path, "ABC-1")


def test_symlinked_root_is_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    assert workspace_path(tmp_path / "link", "A-1") == real.resolve() / "A-1"


def test_agent_cwd_outside_the_root_is_rejected(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "A-1").mkdir(parents=True)
    assert ensure_inside_root(root, root / "A-1") == root / "A-1"
    for bad in (tmp_path, root, root / ".." / "elsewhere", Path("/")):
        with pytest.raises(WorkspaceError):
            ensure_inside_root(root, bad)
