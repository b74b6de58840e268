"""The manifest writer: one thread, per-file order, coalescing, flush, logged failures."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from symphony_tui.workspaces import manifest_writer
from symphony_tui.workspaces.manifest import read_section, update_manifest
from symphony_tui.workspaces.manifest_writer import ManifestWriter


def test_writes_land_in_order_per_file_and_later_fields_win(tmp_path: Path) -> None:
    writer = ManifestWriter()
    for n in range(200):
        writer.write(tmp_path, "run", attempt=n, status="running" if n < 199 else "succeeded")
        writer.write(tmp_path, "session", thread_tokens={"total": n})
    assert writer.flush_sync(timeout=10)
    assert read_section(tmp_path, "run") == {"attempt": 199, "status": "succeeded"}
    assert read_section(tmp_path, "session") == {"thread_tokens": {"total": 199}}
    assert writer.failures == 0 and writer.idle


def test_repeated_writes_of_one_file_are_coalesced(tmp_path: Path, monkeypatch) -> None:
    gate = threading.Event()
    real = manifest_writer.merge_section
    calls: list[dict] = []

    def slow(ws, section, fields):
        gate.wait(5)
        calls.append(fields)
        real(ws, section, fields)

    monkeypatch.setattr(manifest_writer, "merge_section", slow)
    writer = ManifestWriter()
    writer.write(tmp_path, "run", first=1)  # taken by the thread, held at the gate
    for n in range(50):
        writer.write(tmp_path, "run", n=n)
    gate.set()
    assert writer.flush_sync(timeout=10)
    assert len(calls) <= 2 and writer.files_written == len(calls)
    assert read_section(tmp_path, "run") == {"first": 1, "n": 49}


def test_defaults_and_nested_merge_against_the_file_on_disk(tmp_path: Path) -> None:
    update_manifest(tmp_path, "issue", created_at="then")
    update_manifest(tmp_path, "run", hooks={"after_create": "ok"}, attempt=1)
    writer = ManifestWriter()
    writer.write(tmp_path, "issue", defaults={"created_at": "now"}, state="Todo")
    writer.write(tmp_path, "run", nested={"hooks": {"before_run": "exit 2"}})
    writer.write(tmp_path, "run", nested={"hooks": {"after_run": "ok"}}, status="failed")
    other = tmp_path / "fresh"
    other.mkdir()
    writer.write(other, "issue", defaults={"created_at": "now"})
    writer.write(other, "issue", created_at="forced")  # a later field beats the default
    assert writer.flush_sync(timeout=10)
    assert read_section(tmp_path, "issue") == {"created_at": "then", "state": "Todo"}
    assert read_section(tmp_path, "run") == {
        "attempt": 1,
        "status": "failed",
        "hooks": {"after_create": "ok", "before_run": "exit 2", "after_run": "ok"},
    }
    assert read_section(other, "issue") == {"created_at": "forced"}


def test_a_failed_write_is_logged_counted_and_does_not_stop_the_rest(
    tmp_path: Path, caplog
) -> None:
    writer = ManifestWriter()
    gone = tmp_path / "removed-workspace"  # its folder does not exist: the write fails
    with caplog.at_level(logging.WARNING):
        writer.write(gone, "run", "attempt", status="running")
        writer.write(tmp_path, "run", "attempt", status="running")
        assert writer.flush_sync(timeout=10)
    assert writer.failures == 1
    assert read_section(tmp_path, "run") == {"status": "running"}
    failed = [r for r in caplog.records if "manifest write failed" in r.getMessage()]
    assert [r.getMessage() for r in failed] == ["attempt manifest write failed"]  # one line
    assert str(gone) in str(failed[0].__dict__) and "section" in str(failed[0].__dict__)


async def test_flush_waits_for_earlier_writes_and_returns_at_once_when_idle(
    tmp_path: Path,
) -> None:
    writer = ManifestWriter()
    assert await writer.flush()  # nothing queued
    writer.write(tmp_path, "session", backend="codex", thread_id="t-1")
    assert await writer.flush(timeout=10)
    assert read_section(tmp_path, "session") == {"backend": "codex", "thread_id": "t-1"}
    assert writer.idle


def test_writes_still_queued_at_interpreter_exit_land(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import time\n"
        "from pathlib import Path\n"
        "from symphony_tui.workspaces import manifest, manifest_writer\n"
        "real = manifest.atomic_write_bytes\n"
        "manifest.atomic_write_bytes = lambda *a: (time.sleep(0.5), real(*a))\n"
        f"w = manifest_writer.ManifestWriter()\nw.write(Path({str(tmp_path)!r}), 'run', x=1)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert read_section(tmp_path, "run") == {"x": 1}


def test_discard_drops_a_removed_workspaces_queued_writes(tmp_path: Path, monkeypatch) -> None:
    gate = threading.Event()
    real = manifest_writer.merge_section

    def held(ws, section, fields):
        gate.wait(5)
        real(ws, section, fields)

    monkeypatch.setattr(manifest_writer, "merge_section", held)
    busy, doomed = tmp_path / "busy", tmp_path / "doomed"
    busy.mkdir()
    doomed.mkdir()
    writer = ManifestWriter()
    writer.write(busy, "run", x=1)  # taken by the thread, held at the gate
    writer.write(doomed, "run", x=2)
    assert writer.discard(doomed) is False  # queued only: dropped, nothing in flight
    gate.set()
    assert writer.flush_sync(timeout=10)
    assert read_section(busy, "run") == {"x": 1} and read_section(doomed, "run") == {}
