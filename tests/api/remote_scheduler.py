"""A real headless scheduler (the demo agent) in a subprocess, and a real ``sshd`` on a free
loopback port with its own host key, config and authorized key: for the attach tests."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from symphony_tui.cli import prepare_demo
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def issues_yaml(count: int, description: str) -> str:
    rows = []
    for n in range(1, count + 1):
        rows.append(
            f"  - id: t-{n}\n    identifier: T-{n}\n    title: Task {n}\n"
            f"    description: |\n      {description}\n    priority: 1\n    state: Todo\n"
        )
    return "issues:\n" + "".join(rows)


class HeadlessScheduler:
    """``symphony-tui WORKFLOW --headless --port 0`` on a demo copy (started again: on a
    free port, or on the same one); ``url`` once serving."""

    def __init__(
        self,
        tmp: Path,
        issues: str,
        *,
        state_home: Path,
        speed: str = "1",
        front_matter: str = "",
        env_extra: dict[str, str] | None = None,
        name: str = "project",
        max_agents: int | None = None,
    ) -> None:
        """``front_matter``: YAML lines added to the demo WORKFLOW.md's front matter;
        ``name``: the project's folder (its name in a fleet); ``max_agents``: its
        ``agent.max_concurrent_agents`` (the demo's 3 by default)."""
        folder = tmp / name
        folder.mkdir(parents=True)
        self.workflow = prepare_demo(folder)
        if front_matter:
            text = self.workflow.read_text()
            self.workflow.write_text(text.replace("---\n", "---\n" + front_matter, 1))
        if max_agents is not None:
            text = self.workflow.read_text()
            line = f"max_concurrent_agents: {max_agents}"
            self.workflow.write_text(text.replace("max_concurrent_agents: 3", line, 1))
        (folder / "issues.yaml").write_text(issues)
        self.state_home = state_home
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(ROOT),
            XDG_STATE_HOME=str(state_home),
            SYMPHONY_PYTHON=sys.executable,
            SYMPHONY_DEMO_SPEED=speed,
        )
        env.pop("SYMPHONY_API_TOKEN", None)
        env.update(env_extra or {})
        self.stderr_path = tmp / f"{name}.stderr"
        self._command = (folder, env, tmp / "logs")
        self._start()

    def _start(self, port: int = 0) -> None:
        folder, env, logs = self._command
        self._stderr = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "symphony_tui.cli",
                str(self.workflow),
                "--headless",
                "--port",
                str(port),
                "--no-lock",
                "--log-dir",
                str(logs),
            ],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            start_new_session=True,
        )
        self.url = self._wait_url()

    def _wait_url(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"HTTP API on (http://\S+)", self.stderr_path.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                raise AssertionError(f"scheduler exited: {self.stderr_path.read_text()}")
            time.sleep(0.1)
        raise AssertionError(f"no API after {timeout}s: {self.stderr_path.read_text()}")

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """``kill -9`` the scheduler and its agents (its API note stays behind)."""
        self.signal(signal.SIGKILL)
        self.proc.wait()
        self._stderr.close()

    def restart(self, *, same_port: bool = False) -> None:
        """Start the same workflow again (after :meth:`kill` or :meth:`stop`); ``url`` is
        the new API: on a free port, or with ``same_port`` on the stopped one's."""
        self._start(int(self.url.rsplit(":", 1)[1]) if same_port else 0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._stderr.close()


class Sshd:
    """``sshd -D`` on 127.0.0.1:<free port>; everything it reads lives in ``folder``.
    ``ssh_command`` is what ``$SYMPHONY_SSH`` should be for a client that trusts it."""

    def __init__(
        self, folder: Path, *, session_env: dict[str, str], address: str = "127.0.0.1"
    ) -> None:
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        self.address = address
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)],
                check=True,
            )
        shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
        self.port = free_port(address)
        setenv = " ".join(f"{k}={v}" for k, v in session_env.items())
        config = folder / "sshd_config"
        config.write_text(
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
                SetEnv {setenv}
                """
            )
        )
        known = folder / "known_hosts"
        known.write_text(f"[{address}]:{self.port} {(folder / 'host_key.pub').read_text()}")
        client_config = folder / "ssh_config"
        client_config.write_text(
            textwrap.dedent(
                f"""\
                Host *
                  IdentityFile {folder / "client_key"}
                  IdentitiesOnly yes
                  UserKnownHostsFile {known}
                  StrictHostKeyChecking yes
                  BatchMode yes
                  LogLevel ERROR
                """
            )
        )
        self.ssh_command = f"ssh -F {client_config}"
        self.log = folder / "sshd.log"
        self.proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((address, self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                raise AssertionError(f"sshd exited: {self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError("sshd did not listen")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
