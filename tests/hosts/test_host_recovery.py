"""A worker host coming back (real sshd on loopback): its manifests are written again as
soon as it answers (not after the fail-fast hold), and what earlier runs left running
under its workspace root is ended, but never a group a pgid file names by a reused pid,
another machine's, or one of a workspace in use."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from symphony_tui.config.worker_hosts import parse_host
from symphony_tui.hosts.remote_group import reap_script
from symphony_tui.hosts.ssh import SshTarget
from symphony_tui.workspaces.remote_manifest import RemoteManifests

pytestmark = pytest.mark.slow


async def test_a_host_back_takes_its_manifests_at_once(tmp_path, fleet) -> None:
    host = fleet.hosts[0]
    store = RemoteManifests(SshTarget(parse_host(host.name), connect_timeout_ms=3000))
    ws = tmp_path / "remote-ws" / "A-1"
    ws.mkdir(parents=True)
    await asyncio.to_thread(store.merge, ws, "run", {"status": "running"})
    host.kill()
    with pytest.raises(OSError, match="refused the connection"):
        await asyncio.to_thread(store.merge, ws, "run", {"status": "lost"})
    host.start()
    # The scheduler's probe (a target of its own) finds the host back...
    await SshTarget(parse_host(host.name), connect_timeout_ms=3000).probe()
    # ...and the next write goes through, not held for the rest of the hold.
    await asyncio.to_thread(store.merge, ws, "run", {"status": "failed"})
    written = json.loads((ws / ".symphony" / "run.json").read_text())
    assert written["status"] == "failed"


def _group(cwd) -> subprocess.Popen:
    """A process group of its own here (the hosts are this machine), led in ``cwd``."""
    return subprocess.Popen(["sleep", "600"], cwd=cwd, start_new_session=True)


async def test_the_reap_ends_leftover_groups_only(tmp_path, fleet) -> None:
    root = tmp_path / "root"
    left, reused, busy, foreign = (root / k for k in ("L-1", "R-2", "B-3", "F-4"))
    for ws in (left, reused, busy, foreign):
        (ws / ".symphony").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    procs = {"left": _group(left), "reused": _group(elsewhere), "busy": _group(busy)}
    procs["foreign"] = _group(foreign)
    node = subprocess.run(["uname", "-n"], capture_output=True, text=True).stdout.strip()
    (left / ".symphony" / "agent-1.pgid").write_text(f"{procs['left'].pid}\n{node}\n")
    # A pid the file names, now another process's (the group it named ended long ago).
    (reused / ".symphony" / "agent-2.pgid").write_text(f"{procs['reused'].pid}\n")
    (busy / ".symphony" / "agent-3.pgid").write_text(f"{procs['busy'].pid}\n{node}\n")
    (foreign / ".symphony" / "agent-4.pgid").write_text(f"{procs['foreign'].pid}\nother-box\n")
    try:
        target = SshTarget(parse_host(fleet.names[0]))
        done = await target.run(reap_script(str(root), ["B-3"], grace_s=1))
        assert done.ok, done.stderr
        assert done.stdout.decode().split() == ["killed", "L-1", str(procs["left"].pid)]
        assert procs["left"].wait(timeout=10) is not None
        for name in ("reused", "busy", "foreign"):
            assert procs[name].poll() is None, f"the {name} group was killed"
        assert not (left / ".symphony" / "agent-1.pgid").exists()
        assert not (reused / ".symphony" / "agent-2.pgid").exists()
        assert (busy / ".symphony" / "agent-3.pgid").exists()
        assert (foreign / ".symphony" / "agent-4.pgid").exists()
        # Nothing left to end: a second reap says nothing; a missing root is no error.
        again = await target.run(reap_script(str(root), ["B-3"]))
        assert again.ok and again.stdout == b""
        missing = await target.run(reap_script(str(tmp_path / "none")))
        assert missing.ok and missing.stdout == b""
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
