"""The scheduler's manifest writes run on the manifest writer's thread, never on the event
loop (fsyncs on it stall the loop at run turnover), and are on disk after
``barrier()`` and after shutdown."""

from __future__ import annotations

import threading

from symphony_tui.workspaces import manifest
from symphony_tui.workspaces.manifest import read_manifest

from .conftest import make_issue


async def test_manifest_writes_are_off_the_event_loop_and_flushed_by_barrier(
    make_harness, monkeypatch
):
    loop_thread = threading.get_ident()
    writers: list[int] = []
    real = manifest.atomic_write_bytes

    def recording(path, data, mode):
        writers.append(threading.get_ident())
        real(path, data, mode)

    monkeypatch.setattr(manifest, "atomic_write_bytes", recording)
    h = make_harness([make_issue(1, state="Todo")])
    await h.start()
    await h.settle()
    await h.until(lambda: "id-1" not in h.orch.running)
    await h.orch.barrier()
    written = read_manifest(h.ws("ABC-1"))
    assert written["run"]["status"] == "succeeded" and written["issue"]["identifier"] == "ABC-1"
    assert writers and loop_thread not in writers
    await h.orch.shutdown()
    assert h.orch.workspaces.manifests.idle


async def test_shutdown_waits_for_queued_manifest_writes(make_harness, monkeypatch):
    gate = threading.Event()
    real = manifest.atomic_write_bytes

    def held(path, data, mode):
        gate.wait(5)
        real(path, data, mode)

    h = make_harness([])
    await h.start()
    ws = h.root / "ws" / "ABC-9"
    ws.mkdir(parents=True)
    monkeypatch.setattr(manifest, "atomic_write_bytes", held)
    h.orch.state.hold(make_issue(9), ws)  # a manifest write, queued
    threading.Timer(0.2, gate.set).start()
    await h.orch.shutdown()
    assert read_manifest(ws)["run"]["held"] is True
