"""Process-group liveness while sessions close, without scanning all of /proc once per
check and group (under a flood that scan takes most of the scheduler's CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from symphony_tui.agents.codex import process

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")


def test_a_watched_group_rereads_its_known_members_instead_of_scanning_proc(monkeypatch):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    scans: list[int] = []
    full_scan = process.group_members

    def counted(pgid: int) -> list[int] | None:
        scans.append(pgid)
        return full_scan(pgid)

    monkeypatch.setattr(process, "group_members", counted)
    try:
        watch = process._GroupWatch(child.pid)
        assert all(watch.alive() for _ in range(20))
        assert scans == [child.pid]  # one scan; then only the member itself was read
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert not watch.alive()  # no member left at all: killpg says so, no scan
    assert scans == [child.pid]
