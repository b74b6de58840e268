"""Worker hosts for tests: real ``sshd`` processes on loopback (127.0.0.1, 127.0.0.2) high
ports with generated host keys and one generated user key (the pattern of
tests/api/remote_scheduler.py's ``Sshd``); no traffic leaves loopback.

``Fleet(folder, n)`` starts ``n`` of them and writes one client config that trusts them
all; ``fleet.env`` is what ``$SYMPHONY_SSH_CONFIG`` should be; ``fleet.names`` are the
``worker.ssh_hosts`` entries. ``Host.kill()`` ends the host's sshd *and* every session
process it forked (the host dies; its programs stay, as on a machine whose network went
away), ``Host.stop()`` ends the listener only.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

from tests.helpers import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HAVE_SSHD = os.path.exists(SSHD)


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            parent_of[int(entry.name)] = int(fields[1])
    out: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        kids = [p for p, pp in parent_of.items() if pp == current]
        out.extend(kids)
        frontier.extend(kids)
    return out


class Host:
    """One sshd on ``address``:<free port>."""

    def __init__(self, folder: Path, address: str, client_pub: Path, env: dict[str, str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "host_key")],
            check=True,
        )
        shutil.copy(client_pub, folder / "authorized_keys")
        self.folder = folder
        self.address = address
        self.port = free_port(address)
        self.name = f"{address}:{self.port}"
        setenv = " ".join(f"{k}={v}" for k, v in env.items())
        self.config = folder / "sshd_config"
        self.config.write_text(
            textwrap.dedent(
                f"""\
                Port {self.port}
                ListenAddress {address}
                HostKey {folder / "host_key"}
                PidFile {folder / "sshd.pid"}
                AuthorizedKeysFile {folder / "authorized_keys"}
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                PubkeyAuthentication yes
                PermitRootLogin prohibit-password
                StrictModes no
                UsePAM no
                AllowTcpForwarding yes
                MaxSessions 100
                MaxStartups 100:30:200
                SetEnv {setenv}
                """
            )
        )
        self.proc: subprocess.Popen | None = None
        self.start()

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {(self.folder / 'host_key.pub').read_text()}"

    def start(self) -> None:
        self.log = self.folder / "sshd.log"
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("a"),
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((self.address, self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                raise AssertionError(f"sshd exited: {self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError("sshd did not listen")

    def sessions(self) -> list[int]:
        """Pids of every process this sshd forked (sessions and what they run)."""
        return [] if self.proc is None else children(self.proc.pid)

    def kill(self) -> list[int]:
        """SIGKILL the listener and its session processes (sshd children), so every
        connection drops; returns the pids of what the sessions were running that were
        left (reparented: they are no longer the sshd's)."""
        if self.proc is None:
            return []
        tree = self.sessions()
        sshds = [p for p in tree if _comm(p).startswith("sshd")]
        for pid in [self.proc.pid, *sshds]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        self.proc = None
        return [p for p in tree if p not in sshds]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Fleet:
    """``n`` hosts sharing one user key and one client config (``env``)."""

    def __init__(self, folder: Path, n: int = 2, *, session_env: dict[str, str] | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        key = folder / "client_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        # An empty HOME on the hosts (as tests/conftest.py gives the suite): the login
        # shell the agents and hooks run under reads none of this machine's rc files
        # (slow here); SHLVL=1 also skips the .bashrc bash sources for ssh commands.
        home = folder / "host-home"
        home.mkdir(exist_ok=True)
        env = {"SHLVL": "1", "HOME": str(home), **(session_env or {})}
        self.hosts = [
            Host(folder / f"host{i}", f"127.0.0.{i + 1}", folder / "client_key.pub", env)
            for i in range(n)
        ]
        known = folder / "known_hosts"
        known.write_text("".join(h.known_hosts_line() for h in self.hosts))
        self.client_config = folder / "ssh_config"
        self.client_config.write_text(
            textwrap.dedent(
                f"""\
                Host *
                  IdentityFile {key}
                  IdentitiesOnly yes
                  UserKnownHostsFile {known}
                  StrictHostKeyChecking yes
                  BatchMode yes
                  LogLevel ERROR
                """
            )
        )
        self.env = {"SYMPHONY_SSH_CONFIG": str(self.client_config)}

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def close(self) -> None:
        for host in self.hosts:
            for pid in host.sessions():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            host.stop()
