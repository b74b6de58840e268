"""The real codex 0.171.0 in exec-server mode (``worker.hosts.<h>.codex_mode:
exec-server``; agents/codex/exec_server.py): the app-server runs here, its commands run
in the workspace on a worker host (a real sshd on 127.0.0.2) through an exec-server
started there and an ssh forward; the fake model server stands in for the model.

Two sessions (a run attempt, then the next one resuming its thread), three turns:

1. a command that writes the host's environment (a ``worker.hosts.<h>.env`` name, which
   only the exec-server there is given, and the ``HOME`` the host's sshd gives its
   sessions) into a file of the workspace;
2. a slow command during which every forward client is killed again and again for 3 s:
   the link reconnects, and the turn completes with the command's full output;
3. the host's sshd killed: the turn fails and the session names the host lost, only
   after ``worker.host_lost_after_ms``; the exec-server left there is ended by the host's
   reaper once the host is back.

All along the capability token appears in no event, no process's command line, no
message the scheduler could log, and not on the host's disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from pathlib import Path

import psutil
import pytest

from symphony_tui.agents.base import AgentError, TurnStatus
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.agents.codex.exec_server import ENVIRONMENT_ID, LOG_FILE
from symphony_tui.config.settings import Settings
from symphony_tui.domain import EventKind
from symphony_tui.domain.payloads import CommandEnded, LinkChanged
from symphony_tui.hosts.remote_group import reap_script
from symphony_tui_testing.codex_env import CodexSchema, generate_schema, make_codex_home
from symphony_tui_testing.fake_model import FakeModelServer
from tests.hosts.test_codex_over_ssh import HostedSession
from tests.real_programs import require_codex

pytestmark = [pytest.mark.real_codex, pytest.mark.slow]

LOST_AFTER_MS = 4_000


async def cut(control: str, seconds: float) -> int:
    """Kill every ssh client of the link's own connection (its control socket
    ``control``), again and again for ``seconds`` (the link's attempts to make it again
    fail meanwhile); returns how many were killed."""
    killed = 0
    needle = f"ControlPath={control}"
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmdline = proc.info["cmdline"] or []
            if proc.info["name"] == "ssh" and needle in cmdline:
                try:
                    proc.kill()
                    killed += 1
                except psutil.Error:
                    pass
        await asyncio.sleep(0.05)
    return killed


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left to an init that does not reap does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def command_lines() -> str:
    """Every process's command line and environment that this user may read, joined."""
    out = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        out.append(" ".join(proc.info["cmdline"] or []))
        out.extend(f"{k}={v}" for k, v in (proc.info["environ"] or {}).items())
    return "\n".join(out)


async def test_exec_server_runs_commands_on_the_host_and_survives_a_cut(tmp_path, fleet) -> None:
    codex_bin = require_codex()
    schema = CodexSchema(generate_schema(codex_bin, tmp_path / "schema"))
    workspace = tmp_path / "ws" / "EXEC-1"
    workspace.mkdir(parents=True)
    host_name = fleet.names[1]
    sent: list[dict] = []
    with FakeModelServer(slow_delay=0.05) as fake:
        codex_env = make_codex_home(tmp_path / "codex-home", fake.url)
        settings = Settings.model_validate(
            {
                "codex": {
                    "command": f"{shlex.quote(str(codex_bin))} app-server",
                    "read_timeout_ms": 30_000,
                    "env": codex_env,
                },
                "worker": {
                    "ssh_hosts": fleet.names,
                    "host_lost_after_ms": LOST_AFTER_MS,
                    "hosts": {
                        host_name: {"codex_mode": "exec-server", "env": {"WHERE_AM_I": "host-2"}}
                    },
                },
            }
        )
        backend = CodexBackend(lambda: settings, sent=sent)
        first = await backend.start_session(HostedSession(Path(workspace), host_name))
        assert first._exec is not None
        tokens = [first._exec.token()]
        first_pid = first._exec.pid
        assert first_pid is not None
        try:
            assert first.link_mode == "exec-server"
            # 1. the command runs in the workspace, in the host's environment
            result = await first.run_turn(
                'SHELL: echo "$WHERE_AM_I $HOME" > where.txt; cat where.txt'
            )
            assert result.status is TurnStatus.COMPLETED, result
            where, home = (workspace / "where.txt").read_text().split()
            assert where == "host-2"  # the host's env: only the exec-server there has it
            assert home == str(tmp_path / "fleet" / "host-home")  # the host's login environment
            assert os.environ["HOME"] != home
        finally:
            await first.close()
        assert not running(first_pid)  # its close ended the exec-server on the host
        # the next attempt: a new session, a new exec-server, the same thread resumed
        host = HostedSession(Path(workspace), host_name, resume={"thread_id": first.thread_id})
        session = await backend.start_session(host)
        assert session.thread_id == first.thread_id
        link = session._exec
        assert link is not None and link.local_port is not None
        tokens.append(link.token())
        exec_pid = link.pid
        assert exec_pid is not None and tokens[0] != tokens[1]
        try:
            # 2. every forward killed for 3 s in the middle of a slow command
            turn = asyncio.create_task(
                session.run_turn("SHELL: for i in 1 2 3 4 5 6; do echo EXEC-$i; sleep 1; done")
            )
            await host.wait_for(EventKind.COMMAND_STARTED, timeout=60)
            await asyncio.sleep(0.5)
            assert await cut(link.control, 3.0) >= 1
            result = await asyncio.wait_for(turn, 60)
            assert result.status is TurnStatus.COMPLETED, result
            ended = [e.payload for e in host.of_kind(EventKind.COMMAND_COMPLETED)]
            outputs = [p.output for p in ended if isinstance(p, CommandEnded)]
            assert any(all(f"EXEC-{i}" in out for i in range(1, 7)) for out in outputs), outputs
            states = [
                (e.payload.mode, e.payload.state)
                for e in host.events
                if isinstance(e.payload, LinkChanged)
            ]
            assert ("exec-server", "reconnecting") in states
            assert states[-1] == ("exec-server", "connected"), states
            assert link.reconnects >= 1

            # the tokens: only in the environment/add requests, nowhere else
            processes = command_lines()  # here and on the host (one machine)
            assert not any(token in processes for token in tokens)
            events = "\n".join(
                e.message + json.dumps(e.payload.model_dump(mode="json") if e.payload else {})
                for e in host.events
            )
            assert not any(token in events for token in tokens)
            added = [m for m in sent if m.get("method") == "environment/add"]
            assert [m["params"]["environmentId"] for m in added] == [ENVIRONMENT_ID] * 2
            others = json.dumps([m for m in sent if m not in added])
            assert not any(token in others for token in tokens)
            assert "ws://127.0.0.1:" in (workspace / LOG_FILE).read_text()  # its log there
            for folder in (workspace, tmp_path / "fleet"):  # the host's side of the disk
                files = [p for p in folder.rglob("*") if p.is_file()]
                assert not any(t.encode() in p.read_bytes() for p in files for t in tokens)
            recorded = json.dumps(host.recorded)
            assert not any(token in recorded for token in tokens)

            # 3. the host goes away for good: host down after the deadline, not before
            turn = asyncio.create_task(session.run_turn("SHELL: sleep 20"))
            await host.wait_for(
                lambda e: (
                    e.kind is EventKind.COMMAND_STARTED
                    and len(host.of_kind(EventKind.COMMAND_STARTED)) == 2
                ),
                timeout=60,
            )
            fleet.hosts[1].kill()
            killed_at = time.monotonic()
            with pytest.raises(AgentError) as failed:
                await asyncio.wait_for(turn, 60)
            assert time.monotonic() - killed_at >= LOST_AFTER_MS / 1000
            assert session.host_lost == host_name
            assert f"host {host_name} not reached" in failed.value.message
            assert link.state == "lost"
            # what runs there outlives the dead connection, its pgid file left for the reaper
            assert running(exec_pid)
            assert list(workspace.glob(".symphony/agent-*.pgid"))
            await session.close()  # the host is down: its stop cannot reach it
            assert link.token_file is None and not link.folder.exists()  # the token file
            # the host back: its reaper ends what the run left there, as for any agent
            fleet.hosts[1].start()
            done = await backend._targets(host_name).run(
                reap_script(str(workspace.parent)), timeout_s=30
            )
            assert f"killed {workspace.name} {exec_pid}" in done.stdout.decode()
            assert not list(workspace.glob(".symphony/agent-*.pgid"))
        finally:
            await session.close()
            await backend.aclose()
            with contextlib.suppress(ProcessLookupError):  # its host was killed: ours to end
                os.killpg(exec_pid, signal.SIGKILL)
    assert schema.validate_all(sent) > 0
