"""A local OpenHands agent-server the backend starts, probes and stops (managed mode).

Launch (docs/protocols.md "OpenHands agent-server"): ``<command> --host 127.0.0.1 --port <free>``
in its own process group, with ``OH_CONVERSATIONS_PATH`` / ``OH_WORKSPACE_PATH`` under the
state directory, VS Code / VNC / tool preloading off, ``OH_SECRET_KEY`` (kept in
``<state>/secret_key`` so conversations resume across restarts) and a fresh random
``OH_SESSION_API_KEYS_0`` per launch. Stray outbound calls go to a closed loopback proxy.
Ready when ``GET /health`` answers 200. Output goes to ``<state>/server.log``.

On a worker host (:func:`remote_script`) the same settings are made by the host's shell,
the state in ``<workspace>/.symphony/openhands`` (conversations resume at the workspace's
next attempt) and the session API key arriving on stdin; :func:`remote_tmux_stop` ends the
terminal tool's tmux servers there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from symphony_tui.agents.local_server import LocalServer, command_argv
from symphony_tui.agents.openhands.client import OpenHandsClient
from symphony_tui.hosts.ssh import env_exports


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


_PROXY = "http://127.0.0.1:9"
#: The settings that do not depend on the state folder (here or on a worker host).
FIXED_ENV = {
    "OH_ENABLE_VSCODE": "false",
    "OH_ENABLE_VNC": "false",
    "OH_PRELOAD_TOOLS": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "OPENHANDS_SUPPRESS_BANNER": "1",
    "HTTP_PROXY": _PROXY,
    "HTTPS_PROXY": _PROXY,
    "http_proxy": _PROXY,
    "https_proxy": _PROXY,
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
#: The server's folder in a workspace on a worker host (relative to the workspace).
REMOTE_STATE = ".symphony/openhands"


def server_env(state_dir: Path, api_key: str, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for the server process (``base`` plus the OpenHands settings)."""
    env = dict(base)
    env.update(
        {
            "OH_CONVERSATIONS_PATH": str(state_dir / "conversations"),
            "OH_WORKSPACE_PATH": str(state_dir / "workspace"),
            **FIXED_ENV,
            "OH_SECRET_KEY": secret_key(state_dir),
            "OH_SESSION_API_KEYS_0": api_key,
        }
    )
    return env


def remote_script(
    command: str, port: int, log: str, tmux_dir: str, overrides: Mapping[str, str | None]
) -> str:
    """The shell command line that starts ``command`` on a worker host, in the workspace
    (agents/remote_server.py): the session API key from stdin, the state (conversations,
    the persistent ``OH_SECRET_KEY``, an empty ``HOME``) under :data:`REMOTE_STATE`, the
    fixed settings, ``TMUX_TMPDIR`` = ``tmux_dir`` (so :func:`remote_tmux_stop` finds the
    terminal tool's tmux servers), then ``overrides`` (``openhands.env`` and the host's
    ``env``, resolved here; None unsets); bound to 127.0.0.1:``port``, output appended to
    ``log``."""
    keep = {k: v for k, v in overrides.items() if k != "OH_SESSION_API_KEYS_0"}
    sets = env_exports({k: v for k, v in keep.items() if v is not None})
    unsets = "".join(f"unset {k}; " for k, v in keep.items() if v is None)
    fixed = env_exports(FIXED_ENV)
    return (
        "IFS= read -r OH_SESSION_API_KEYS_0; export OH_SESSION_API_KEYS_0; "
        f'd="$PWD"/{REMOTE_STATE}; '
        'mkdir -p "$d/home" "$d/conversations" "$d/workspace" || exit 1; '
        '[ -s "$d/secret_key" ] || (umask 077; '
        'od -An -N32 -tx1 /dev/urandom | tr -d " \n" > "$d/secret_key"); '
        'OH_SECRET_KEY=$(cat "$d/secret_key"); export OH_SECRET_KEY; '
        f"mkdir -p -m 700 {shlex.quote(tmux_dir)} || exit 1; "
        f"export TMUX_TMPDIR={shlex.quote(tmux_dir)}; unset TMUX; "
        'export HOME="$d/home" OH_CONVERSATIONS_PATH="$d/conversations" '
        'OH_WORKSPACE_PATH="$d/workspace"; '
        f"{fixed}{unsets}{sets}"
        f"{command} --host 127.0.0.1 --port {port} </dev/null >> {shlex.quote(log)} 2>&1"
    )


def remote_tmux_stop(tmux_dir: str) -> str:
    """The shell script ending every tmux server under ``tmux_dir`` on the host (they
    daemonize out of the server's process group) and removing the folder."""
    folder = shlex.quote(tmux_dir)
    return (
        f"for s in {folder}/tmux-*/*; do "
        '[ -S "$s" ] && tmux -S "$s" kill-server >/dev/null 2>&1; done; '
        f"rm -rf {folder}; exit 0"
    )


class ManagedServer(LocalServer):
    """One agent-server process (see :class:`LocalServer`). ``start()`` returns when it is
    healthy; ``stop()`` ends the whole process group and the tmux servers of its terminal
    tool. ``api_key`` is set at construction, ``base_url`` / ``pid`` once started."""

    def __init__(
        self,
        command: str,
        state_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(
            "agent-server", state_dir / "server.log", startup_timeout_s=startup_timeout_s
        )
        self.command = command
        self.state_dir = state_dir
        self.env = dict(os.environ if env is None else env)
        self.api_key = secrets.token_urlsafe(24)
        # The server's terminal tool runs each shell in a tmux server of its own, which
        # daemonizes out of our process group; a private TMUX_TMPDIR lets stop() find and
        # end them (short path: tmux sockets have a length limit).
        self._tmux_dir: Path | None = None

    async def start(self) -> None:
        """Launch and wait for ``GET /health``. Raises ``AgentError("launch_failed")``."""
        argv = command_argv(self.command, "openhands.command")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "workspace").mkdir(exist_ok=True)
        identity = {"command": self.command, "state_dir": str(self.state_dir)}
        taken = await self.take_over(
            identity, lambda url, key: OpenHandsClient(url, api_key=key, timeout_s=2.0)
        )
        if taken is not None:  # the server an earlier scheduler left serving
            self.api_key, extra = taken
            self._tmux_dir = Path(extra["tmux_dir"]) if extra.get("tmux_dir") else None
            return
        self._tmux_dir = Path(tempfile.mkdtemp(prefix="symphony-oh-tmux-"))
        env = server_env(self.state_dir, self.api_key, self.env)
        env["TMUX_TMPDIR"] = str(self._tmux_dir)
        env.pop("TMUX", None)
        await self.launch(
            argv,
            host_flag="--host",
            env=env,
            cwd=self.state_dir,
            probe=lambda url: OpenHandsClient(url, api_key=self.api_key, timeout_s=2.0),
        )
        self.record(self.api_key, identity, {"tmux_dir": str(self._tmux_dir)})

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL after ``grace_s``; then end the tmux
        servers the terminal tool started. Idempotent."""
        await super().stop(grace_s)
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
