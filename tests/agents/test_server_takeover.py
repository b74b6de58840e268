"""A managed HTTP agent server outlives a crashed scheduler and the next one takes it over
from its record (agents/local_server.py ``LocalServer.record`` / ``take_over``); a real
process stands in for the server, a stub for its health check."""

from __future__ import annotations

import json
import subprocess

from symphony_tui.agents.codex.detached import start_ticks
from symphony_tui.agents.local_server import LocalServer

IDENTITY = {"command": "opencode serve", "cwd": "/srv/ws"}


class Probe:
    def __init__(self, healthy: bool = True) -> None:
        self.healthy = healthy
        self.asked: list[tuple[str, str]] = []

    def __call__(self, url: str, secret: str) -> Probe:
        self.asked.append((url, secret))
        return self

    async def health(self) -> bool:
        return self.healthy

    async def aclose(self) -> None:
        pass


def left_by_a_dead_scheduler(tmp_path, **changes):
    """A server process and the record a scheduler that has since died wrote for it."""
    server = subprocess.Popen(["sleep", "60"], start_new_session=True)
    owner = subprocess.Popen(["true"])
    owner.wait()
    data = {
        "pid": server.pid,
        "start_ticks": start_ticks(server.pid),
        "base_url": "http://127.0.0.1:4096",
        "secret": "pw",
        "identity": IDENTITY,
        "extra": {"tmux_dir": "/tmp/t"},
        "owner_pid": owner.pid,
        "owner_ticks": 1,
        **changes,
    }
    (tmp_path / "server.json").write_text(json.dumps(data))
    return server


async def test_a_live_healthy_server_of_a_dead_scheduler_is_taken_over_and_ended(tmp_path):
    server = left_by_a_dead_scheduler(tmp_path)
    try:
        local = LocalServer("opencode serve", tmp_path / "server.log")
        probe = Probe()
        taken = await local.take_over(IDENTITY, probe)
        assert taken == ("pw", {"tmux_dir": "/tmp/t"})
        assert probe.asked == [("http://127.0.0.1:4096", "pw")]
        assert (local.pid, local.base_url, local.running) == (server.pid, probe.asked[0][0], True)
        record = tmp_path / "server.json"
        assert record.stat().st_mode & 0o777 == 0o600  # it holds the secret
        again = LocalServer("opencode serve", tmp_path / "server.log")
        assert await again.take_over(IDENTITY, Probe()) is None  # this process owns it now
        await local.stop(grace_s=1)
        assert server.wait(timeout=5) is not None and not record.exists()
        assert not local.running
    finally:
        server.kill()
        server.wait()


async def test_a_server_is_not_taken_over_when_it_is_not_the_recorded_one(tmp_path):
    cases = [
        {"identity": {**IDENTITY, "cwd": "/elsewhere"}},  # another project's
        {"start_ticks": 1},  # its pid now names another process
    ]
    for changes in cases:
        server = left_by_a_dead_scheduler(tmp_path, **changes)
        try:
            local = LocalServer("opencode serve", tmp_path / "server.log")
            assert await local.take_over(IDENTITY, Probe()) is None
            assert local.pid is None and server.poll() is None  # left alone
        finally:
            server.kill()
            server.wait()
    server = left_by_a_dead_scheduler(tmp_path)
    try:  # not healthy: not taken
        assert (
            await LocalServer("x", tmp_path / "server.log").take_over(
                IDENTITY, Probe(healthy=False)
            )
            is None
        )
    finally:
        server.kill()
        server.wait()


async def test_a_server_whose_scheduler_lives_is_not_taken_over(tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    server = left_by_a_dead_scheduler(
        tmp_path, owner_pid=owner.pid, owner_ticks=start_ticks(owner.pid)
    )
    try:
        local = LocalServer("opencode serve", tmp_path / "server.log")
        assert await local.take_over(IDENTITY, Probe()) is None
    finally:
        for proc in (server, owner):
            proc.kill()
            proc.wait()
