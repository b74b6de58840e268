"""Workspace manifests: atomic JSON sections that never break a reader (spec §9)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from symphony_tui.domain import RunStatus, TokenUsage
from symphony_tui.workspaces.manifest import (
    manifest_dir,
    read_manifest,
    read_section,
    update_manifest,
)


def test_update_merges_fields_into_a_section(tmp_path: Path) -> None:
    assert update_manifest(tmp_path, "run", attempt=1, status="running")
    assert update_manifest(tmp_path, "run", status="succeeded", error=None)
    assert read_section(tmp_path, "run") == {"attempt": 1, "status": "succeeded", "error": None}
    assert read_manifest(tmp_path) == {"run": {"attempt": 1, "status": "succeeded", "error": None}}


def test_values_are_made_json_safe(tmp_path: Path) -> None:
    when = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    update_manifest(
        tmp_path,
        "session",
        started_at=when,
        tokens=TokenUsage(input_tokens=3, total_tokens=5),
        status=RunStatus.STREAMING_TURN,
        path=tmp_path,
        ids=("a", "b"),
    )
    data = json.loads((manifest_dir(tmp_path) / "session.json").read_text())
    assert data["started_at"] == "2026-11-30T07:00:00+00:00"
    assert data["tokens"]["input_tokens"] == 3
    assert data["status"] == "streaming_turn"
    assert data["path"] == str(tmp_path)
    assert data["ids"] == ["a", "b"]


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    for i in range(20):
        update_manifest(tmp_path, "issue", n=i)
    names = sorted(p.name for p in manifest_dir(tmp_path).iterdir())
    assert names == [".gitignore", "issue.json"]
    assert read_section(tmp_path, "issue") == {"n": 19}


def test_manifest_folder_is_git_ignored(tmp_path: Path) -> None:
    update_manifest(tmp_path, "issue", id="x")
    assert (manifest_dir(tmp_path) / ".gitignore").read_text() == "*\n"


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", "", "\x00\x01"])
def test_corrupt_manifest_reads_as_empty_with_a_warning(
    tmp_path: Path, garbage: str, caplog: pytest.LogCaptureFixture
) -> None:
    manifest_dir(tmp_path).mkdir()
    (manifest_dir(tmp_path) / "run.json").write_text(garbage)
    update_manifest(tmp_path, "issue", id="x")
    with caplog.at_level(logging.WARNING):
        assert read_manifest(tmp_path) == {"issue": {"id": "x"}}
    assert any("manifest" in r.getMessage() for r in caplog.records)
    # A corrupt section is replaced by the next update rather than blocking it.
    assert update_manifest(tmp_path, "run", status="ok")
    assert read_section(tmp_path, "run") == {"status": "ok"}


def test_unknown_section_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        update_manifest(tmp_path, "secrets", x=1)


def test_unwritable_manifest_returns_false_instead_of_raising(tmp_path: Path) -> None:
    (tmp_path / ".symphony").write_text("a file where the folder should be")
    assert update_manifest(tmp_path, "run", status="x") is False
    assert read_manifest(tmp_path) == {}
