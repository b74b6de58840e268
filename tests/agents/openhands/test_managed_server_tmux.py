"""The managed agent-server's terminal tool runs shells in tmux servers that daemonize out of
its process group; stopping the server must end them too (no orphan tmux per run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from symphony_tui.agents.openhands.server import ManagedServer


@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"), reason="no tmux")
async def test_stop_ends_tmux_servers_started_under_the_private_tmux_dir(tmp_path):
    server = ManagedServer("unused", tmp_path / "state")
    server._tmux_dir = Path(tempfile.mkdtemp(prefix="symphony-oh-tmux-"))
    env = {**os.environ, "TMUX_TMPDIR": str(server._tmux_dir)}
    env.pop("TMUX", None)
    subprocess.run(
        ["tmux", "-L", "openhands-probe", "new-session", "-d", "-s", "probe", "sleep 600"],
        env=env,
        check=True,
        timeout=10,
    )
    sockets = list(server._tmux_dir.glob("tmux-*/openhands-probe"))
    assert sockets, "tmux did not put its socket under TMUX_TMPDIR"
    alive = subprocess.run(["tmux", "-S", str(sockets[0]), "has-session"], timeout=5, check=False)
    assert alive.returncode == 0
    await server.stop()
    assert server._tmux_dir is None
    gone = subprocess.run(
        ["tmux", "-S", str(sockets[0]), "has-session"],
        timeout=5,
        check=False,
        stderr=subprocess.DEVNULL,
    )
    assert gone.returncode != 0
    assert not sockets[0].parent.parent.exists()
