"""End to end with real processes: a headless scheduler, a real ``sshd`` on 127.0.0.1, the
console's port attached through ``ssh://``; and a scheduler stopped with SIGSTOP."""

from __future__ import annotations

import asyncio
import getpass
import shutil
import signal

import httpx
import pytest

from symphony_tui.api.attach import open_attach
from symphony_tui.api.client import RemotePort
from symphony_tui.domain.commands import Approve
from tests.api.remote_scheduler import HeadlessScheduler, Sshd, issues_yaml

pytestmark = pytest.mark.slow


async def until(predicate, timeout: float, what: str) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():
        if loop.time() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.1)
    return loop.time() - start


@pytest.mark.skipif(
    shutil.which("sshd") is None and not shutil.os.path.exists("/usr/sbin/sshd"),
    reason="openssh-server is not installed (.ci/run installs it)",
)
async def test_attach_through_ssh_and_approve_a_request(tmp_path, monkeypatch):
    state = tmp_path / "state"
    sched = HeadlessScheduler(
        tmp_path, issues_yaml(1, "Release it. [demo: approval]"), state_home=state
    )
    # SHLVL=1: bash then counts itself as a nested shell and skips the .bashrc it sources
    # for ssh commands (this machine's runs `pyenv init`, slow while others use pyenv)
    sshd = Sshd(tmp_path / "sshd", session_env={"XDG_STATE_HOME": str(state), "SHLVL": "1"})
    monkeypatch.setenv("SYMPHONY_SSH", sshd.ssh_command)
    attachment = None
    try:
        target = f"ssh://{getpass.getuser()}@127.0.0.1:{sshd.port}"
        attachment = await asyncio.to_thread(open_attach, target)
        assert attachment.tunnel is not None
        assert attachment.tunnel.api_port == int(sched.url.rsplit(":", 1)[1])
        remote = attachment.port()
        task = asyncio.create_task(remote.run())
        try:
            await until(lambda: remote.snapshot().approvals, 60, "the approval request")
            assert remote.link().state == "live" and remote.link().via == "stream"
            approval = remote.snapshot().approvals[0]
            result = await remote.send(Approve(approval_id=approval.id))
            assert result.ok, result.message
            await until(lambda: not remote.snapshot().approvals, 20, "the approval to go")
            again = await remote.send(Approve(approval_id=approval.id))
            assert not again.ok
            await until(
                lambda: (
                    any(
                        e.kind.value == "approval_resolved" or "approv" in e.message.lower()
                        for e in remote.events_since(0)
                        if e.seq > 0
                    )
                    and not remote.snapshot().approvals
                ),
                20,
                "the answer in the event log",
            )
        finally:
            await remote.close()
            task.cancel()
    finally:
        if attachment is not None:
            attachment.close()
        sshd.stop()
        sched.stop()


async def test_a_stopped_scheduler_shows_stale_and_catches_up_without_losing_events(tmp_path):
    sched = HeadlessScheduler(
        tmp_path,
        issues_yaml(6, "Steady work. [demo: slow, two-turns]"),
        state_home=tmp_path / "state",
    )
    remote = RemotePort(sched.url)
    task = asyncio.create_task(remote.run())
    try:
        await until(lambda: len(remote.events_since(0)) > 5, 60, "events before the stop")
        assert remote.link().state == "live"
        sched.signal(signal.SIGSTOP)
        stopped_for = await until(lambda: remote.link().state == "stale", 20, "stale")
        assert stopped_for <= 20
        assert remote.link().age_s > remote.stale_after_s
        sched.signal(signal.SIGCONT)
        await until(lambda: remote.link().state == "live", 30, "live again")
        async with httpx.AsyncClient(base_url=sched.url, timeout=10) as raw:

            async def server_seqs() -> list[int]:
                got = await raw.get("/api/v1/events", params={"since": 0, "limit": 10000})
                return [e["seq"] for e in got.json()]

            held = await server_seqs()
            await until(lambda: remote.events_since(0)[-1].seq >= held[-1], 30, "caught up")
            held = await server_seqs()
        mine = [e.seq for e in remote.events_since(0)]
        common_end = min(mine[-1], held[-1])
        assert [s for s in mine if s <= common_end] == [s for s in held if s <= common_end]
        assert len(mine) == len(set(mine))  # nothing twice
        assert remote.gaps == 0
    finally:
        await remote.close()
        task.cancel()
        sched.stop()
