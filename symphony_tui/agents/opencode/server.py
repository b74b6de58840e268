"""A local ``opencode serve`` the backend starts, probes and stops (managed mode).

Launch (PROTOCOLS.md "OpenCode server"): ``<command> --hostname 127.0.0.1 --port <free>``
(the port defaults to random: always passed) in its own process group, working directory
``cwd`` (the workspace root: the project; every request still names its workspace with
``directory=``). Isolation: ``HOME`` and ``XDG_CONFIG_HOME`` / ``XDG_DATA_HOME`` /
``XDG_CACHE_HOME`` / ``XDG_STATE_HOME`` under the state directory, so the user's global
config, auth and plugins stay out and the sessions (``XDG_DATA_HOME/opencode``) survive a
console restart; the ``OPENCODE_DISABLE_*`` switches keep it from updating itself,
fetching model lists, downloading language servers, sharing sessions or loading default
plugins. A fresh random ``OPENCODE_SERVER_PASSWORD`` per launch: only this process can
drive it. Ready when ``GET /global/health`` answers ``healthy``. Output goes to
``<state>/server.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.opencode.client import OpenCodeClient

LOG_TAIL_LINES = 20
DISABLE_SWITCHES = (
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
)


def isolated_env(state_dir: Path, base: Mapping[str, str], password: str) -> dict[str, str]:
    """``base`` with a private home and XDG dirs under ``state_dir``, the disable switches
    and the server password. ``OPENCODE_CONFIG`` / ``OPENCODE_CONFIG_CONTENT`` in ``base``
    pass through: that is how a provider is configured for a managed server."""
    home = state_dir / "home"
    dirs = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": state_dir / "data",
        "XDG_CACHE_HOME": state_dir / "cache",
        "XDG_STATE_HOME": state_dir / "state",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env = {**base, **{k: str(v) for k, v in dirs.items()}}
    env.update({name: "1" for name in DISABLE_SWITCHES})
    env["OPENCODE_SERVER_PASSWORD"] = password
    env.pop("OPENCODE_SERVER_USERNAME", None)  # the client authenticates as the default user
    return env


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ManagedServer:
    """One ``opencode serve`` process. ``start()`` returns once it is healthy; ``stop()``
    ends its whole process group. ``base_url`` / ``pid`` are set once started, ``password``
    at construction; ``startup_s`` is how long readiness took."""

    def __init__(
        self,
        command: str,
        state_dir: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.command = command
        self.state_dir = state_dir
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.startup_timeout_s = startup_timeout_s
        self.password = secrets.token_urlsafe(24)
        self.base_url: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.state_dir / "server.log"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())

    async def start(self) -> None:
        """Launch and wait for ``GET /global/health``. Raises ``AgentError("launch_failed")``."""
        try:
            argv = shlex.split(self.command)
        except ValueError as e:
            raise AgentError("launch_failed", f"opencode.command: {e}") from e
        if not argv:
            raise AgentError("launch_failed", "opencode.command is empty")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        argv += ["--hostname", "127.0.0.1", "--port", str(port)]
        env = isolated_env(self.state_dir, self.env, self.password)
        cwd = self.cwd if self.cwd is not None and self.cwd.is_dir() else self.state_dir
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,  # own process group: stop() ends every child
                )
            except OSError as e:
                raise AgentError("launch_failed", f"{argv[0]}: {e.strerror or e}") from e
        self.base_url = f"http://127.0.0.1:{port}"
        probe = OpenCodeClient(self.base_url, password=self.password)
        try:
            while True:
                if self._proc.poll() is not None:
                    raise AgentError(
                        "launch_failed",
                        f"opencode serve exited with {self._proc.returncode}: {self.log_tail()}",
                    )
                if await probe.health():
                    self.startup_s = time.monotonic() - t0
                    return
                if time.monotonic() - t0 > self.startup_timeout_s:
                    raise AgentError(
                        "launch_failed",
                        f"opencode serve not healthy after {self.startup_timeout_s:g}s: "
                        f"{self.log_tail()}",
                    )
                await asyncio.sleep(0.2)
        except BaseException:
            await self.stop()
            raise
        finally:
            await probe.aclose()

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        # The group may hold children (tool shells) even after the leader is gone.
        _signal_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            await asyncio.to_thread(proc.wait)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
