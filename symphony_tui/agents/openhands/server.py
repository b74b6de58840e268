"""A local OpenHands agent-server the backend starts, probes and stops (managed mode).

Launch (PROTOCOLS.md "OpenHands agent-server"): ``<command> --host 127.0.0.1 --port <free>``
in its own process group, with ``OH_CONVERSATIONS_PATH`` / ``OH_WORKSPACE_PATH`` under the
state directory, VS Code / VNC / tool preloading off, ``OH_SECRET_KEY`` (kept in
``<state>/secret_key`` so conversations resume across restarts) and a fresh random
``OH_SESSION_API_KEYS_0`` per launch. Stray outbound calls go to a closed loopback proxy.
Ready when ``GET /health`` answers 200. Output goes to ``<state>/server.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.openhands.client import OpenHandsClient

LOG_TAIL_LINES = 20


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def secret_key(state_dir: Path) -> str:
    """The persistent ``OH_SECRET_KEY`` (created once, mode 0600)."""
    path = state_dir / "secret_key"
    try:
        value = path.read_text().strip()
        if value:
            return value
    except FileNotFoundError:
        pass
    state_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


def server_env(state_dir: Path, api_key: str, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for the server process (``base`` plus the OpenHands settings)."""
    proxy = "http://127.0.0.1:9"
    env = dict(base)
    env.update(
        {
            "OH_CONVERSATIONS_PATH": str(state_dir / "conversations"),
            "OH_WORKSPACE_PATH": str(state_dir / "workspace"),
            "OH_ENABLE_VSCODE": "false",
            "OH_ENABLE_VNC": "false",
            "OH_PRELOAD_TOOLS": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENHANDS_SUPPRESS_BANNER": "1",
            "OH_SECRET_KEY": secret_key(state_dir),
            "OH_SESSION_API_KEYS_0": api_key,
            "HTTP_PROXY": proxy,
            "HTTPS_PROXY": proxy,
            "http_proxy": proxy,
            "https_proxy": proxy,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    return env


class ManagedServer:
    """One agent-server process. ``start()`` returns when it is healthy; ``stop()`` ends
    the whole process group. ``base_url`` / ``api_key`` / ``pid`` are set once started;
    ``startup_s`` is how long readiness took."""

    def __init__(
        self,
        command: str,
        state_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.command = command
        self.state_dir = state_dir
        self.env = dict(os.environ if env is None else env)
        self.startup_timeout_s = startup_timeout_s
        self.api_key = secrets.token_urlsafe(24)
        self.base_url: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        # The server's terminal tool runs each shell in a tmux server of its own, which
        # daemonizes out of our process group; a private TMUX_TMPDIR lets stop() find and
        # end them (short path: tmux sockets have a length limit).
        self._tmux_dir: Path | None = None

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
        """Launch and wait for ``GET /health``. Raises ``AgentError("launch_failed")``."""
        try:
            argv = shlex.split(self.command)
        except ValueError as e:
            raise AgentError("launch_failed", f"openhands.command: {e}") from e
        if not argv:
            raise AgentError("launch_failed", "openhands.command is empty")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "workspace").mkdir(exist_ok=True)
        port = free_port()
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        self._tmux_dir = Path(tempfile.mkdtemp(prefix="symphony-oh-tmux-"))
        env = server_env(self.state_dir, self.api_key, self.env)
        env["TMUX_TMPDIR"] = str(self._tmux_dir)
        env.pop("TMUX", None)
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.state_dir,
                    start_new_session=True,  # own process group: stop() ends every child
                )
            except OSError as e:
                raise AgentError("launch_failed", f"{argv[0]}: {e.strerror or e}") from e
        self.base_url = f"http://127.0.0.1:{port}"
        probe = OpenHandsClient(self.base_url, api_key=self.api_key, timeout_s=2.0)
        try:
            while True:
                if self._proc.poll() is not None:
                    raise AgentError(
                        "launch_failed",
                        f"agent-server exited with {self._proc.returncode}: {self.log_tail()}",
                    )
                if await probe.health():
                    self.startup_s = time.monotonic() - t0
                    return
                if time.monotonic() - t0 > self.startup_timeout_s:
                    raise AgentError(
                        "launch_failed",
                        f"agent-server not healthy after {self.startup_timeout_s:g}s: "
                        f"{self.log_tail()}",
                    )
                await asyncio.sleep(0.2)
        except BaseException:
            await self.stop()
            raise
        finally:
            await probe.aclose()

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL after ``grace_s``; then end the tmux
        servers the terminal tool started. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            await self._stop_tmux()
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
        await self._stop_tmux()

    async def _stop_tmux(self) -> None:
        folder, self._tmux_dir = self._tmux_dir, None
        if folder is None:
            return
        sockets = [p for p in folder.glob("tmux-*/*") if p.is_socket()]
        tmux = shutil.which("tmux")
        for sock in sockets if tmux else []:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                await asyncio.to_thread(
                    subprocess.run,
                    [tmux, "-S", str(sock), "kill-server"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=5,
                    check=False,
                )
        await asyncio.to_thread(shutil.rmtree, folder, True)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
