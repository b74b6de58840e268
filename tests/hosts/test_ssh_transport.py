"""The ssh transport against real sshd on loopback: quoting survives the login
shell, connection reuse (a dead master's socket is replaced), and every connection failure
is a one-line reason."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from symphony_tui.config.worker_hosts import parse_host
from symphony_tui.hosts.ssh import SshError, SshTarget, control_dir
from tests.helpers import free_port

pytestmark = pytest.mark.slow

NASTY = 'it\'s "quoted" $HOME `date` \\ back\nline two; rm -rf /nope *'


async def test_a_script_and_its_environment_arrive_byte_for_byte(fleet) -> None:
    target = SshTarget(parse_host(fleet.names[0]))
    from symphony_tui.hosts.ssh import env_exports

    done = await target.run(env_exports({"NASTY": NASTY}) + 'printf %s "$NASTY"; exit 3')
    assert done.exit_code == 3
    assert done.stdout.decode() == NASTY.rstrip("\n")
    done = await target.run("cat; printf 'x\\ny\\n'", stdin=b"from stdin\n")
    assert done.stdout == b"from stdin\nx\ny\n"


async def test_connections_are_reused_through_a_private_control_socket(fleet) -> None:
    target = SshTarget(parse_host(fleet.names[0]))
    await target.probe()
    folder = control_dir()
    assert (os.stat(folder).st_mode & 0o777) == 0o700
    sockets = list(folder.iterdir())
    assert sockets, "no master connection socket"
    await asyncio.gather(*(target.run("exit 0") for _ in range(5)))
    # One authenticated connection (the master) carried all six commands.
    assert fleet.hosts[0].log.read_text().count("Accepted publickey") == 1
    plain = SshTarget(parse_host(fleet.names[0]), reuse=False)
    await asyncio.gather(*(plain.run("exit 0") for _ in range(3)))
    assert fleet.hosts[0].log.read_text().count("Accepted publickey") == 4


async def test_a_refused_connection_is_one_line() -> None:
    port = free_port("127.0.0.1")
    target = SshTarget(parse_host(f"127.0.0.1:{port}"), connect_timeout_ms=3000, reuse=False)
    with pytest.raises(SshError) as err:
        await target.run("exit 0")
    assert err.value.code == "refused"
    assert str(err.value).startswith(f"host 127.0.0.1:{port} refused the connection")
    assert "\n" not in str(err.value)


async def test_a_refused_key_is_one_line(fleet, tmp_path) -> None:
    other = tmp_path / "other_config"
    other.write_text(fleet.client_config.read_text().replace("client_key", "no_such_key"))
    target = SshTarget(parse_host(fleet.names[1]), config_file=str(other), reuse=False)
    with pytest.raises(SshError) as err:
        await target.run("exit 0")
    assert err.value.code == "auth" and "\n" not in str(err.value)


async def test_a_missing_program_is_its_exit_code_not_a_connection_error(fleet) -> None:
    target = SshTarget(parse_host(fleet.names[0]))
    done = await target.run("no-such-program-here --version")
    assert done.exit_code == 127 and "not found" in done.stderr_line()


async def test_a_hung_command_times_out(fleet) -> None:
    target = SshTarget(parse_host(fleet.names[0]))
    with pytest.raises(SshError) as err:
        await target.run("sleep 30", timeout_s=1)
    assert err.value.code == "timeout"


async def test_a_dead_masters_socket_is_replaced_not_bypassed_forever(fleet) -> None:
    target = SshTarget(parse_host(fleet.names[0]))
    await target.probe()
    assert target.control_path.exists()
    master = [
        p
        for p in (int(x) for x in os.listdir("/proc") if x.isdigit())
        if str(target.control_path).encode() in _cmdline(p) and b"ControlMaster=yes" in _cmdline(p)
    ]
    assert master, "no master connection process"
    for pid in master:
        os.kill(pid, signal.SIGKILL)  # killed (out of memory...): its socket stays behind
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in master) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert target.control_path.exists()
    for _ in range(3):
        done = await target.run("exit 0")
        assert done.ok and b"Control socket" not in done.stderr
    # One new master carried the three: not a handshake per command.
    assert fleet.hosts[0].log.read_text().count("Accepted publickey") == 2


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
