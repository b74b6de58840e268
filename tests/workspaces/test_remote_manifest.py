"""Manifests of a worker host that cannot be reached fail fast after the first
failure, so one dead host does not hold the manifest writer (and every other host's
writes) for ssh's connect timeout per write."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony_tui.hosts.ssh import Completed, SshError
from symphony_tui.workspaces import remote_manifest
from symphony_tui.workspaces.remote_manifest import RemoteManifests


class _Target:
    name = "build-1"

    def __init__(self) -> None:
        self.calls = 0
        self.up = False
        self.written: list[bytes] = []

    def run_sync(self, script, *, stdin=None, timeout_s=30.0):
        self.calls += 1
        if not self.up:
            raise SshError("refused", self.name, "refused the connection")
        if stdin is not None:
            self.written.append(stdin)
        return Completed(0, b"", b"")


def test_a_down_host_fails_fast_then_is_tried_again(monkeypatch) -> None:
    target = _Target()
    store = RemoteManifests(target)  # type: ignore[arg-type]
    ws = Path("/srv/ws/A-1")
    with pytest.raises(OSError, match="refused the connection"):
        store.merge(ws, "run", {"status": "running"})
    calls = target.calls
    with pytest.raises(OSError, match="held"):
        store.merge(ws, "run", {"status": "failed"})
    assert store.read(ws, "session") == {}
    assert target.calls == calls  # neither reached ssh
    target.up = True
    monkeypatch.setattr(remote_manifest, "DOWN_HOLD_S", 0.0)
    store._down_until = 0.0
    store.merge(ws, "run", {"status": "failed"})
    assert b'"status": "failed"' in target.written[-1]
