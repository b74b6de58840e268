"""A local ``opencode serve`` the backend starts, probes and stops (managed mode).

Launch (docs/protocols.md "OpenCode server"): ``<command> --hostname 127.0.0.1 --port <free>``
(the port defaults to random: always passed) in its own process group, working directory
``cwd`` (the workspace root: the project; every request still names its workspace with
``directory=``). Isolation: ``HOME`` and ``XDG_CONFIG_HOME`` / ``XDG_DATA_HOME`` /
``XDG_CACHE_HOME`` / ``XDG_STATE_HOME`` under the state directory, so the user's global
config, auth and plugins stay out and the sessions (``XDG_DATA_HOME/opencode``) survive a
console restart; the ``OPENCODE_DISABLE_*`` switches keep it from updating itself,
fetching model lists, downloading language servers, sharing sessions or loading default
plugins. A fresh random ``OPENCODE_SERVER_PASSWORD`` per launch: only this process can
drive it. Ready when ``GET /global/health`` answers ``healthy``. Output goes to
``<state>/server.log``. It is recorded in ``<state>/server.json`` (0600: it holds the
password), so a scheduler started after a crash takes over the server the crashed one left
serving, for the same command and folder (``LocalServer.take_over``): the sessions it was
running go on and are re-attached.

On a worker host (:func:`remote_script`, run by agents/remote_server.py) the same
isolation is set up by the host's shell in ``<workspace>/.symphony/opencode`` (so a
session survives to the workspace's next attempt), after the login shell has read the
host's profile (its ``PATH`` finds the program); the password arrives on stdin.
"""

from __future__ import annotations

import os
import secrets
import shlex
from collections.abc import Mapping
from pathlib import Path

from symphony_tui.agents.local_server import LocalServer, command_argv
from symphony_tui.agents.opencode.client import OpenCodeClient
from symphony_tui.hosts.ssh import env_exports

#: The server's folder in a workspace on a worker host (relative to the workspace).
REMOTE_STATE = ".symphony/opencode"

DISABLE_SWITCHES = (
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
)


def isolated_env(
    state_dir: Path,
    base: Mapping[str, str],
    password: str,
    extra: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """``base`` with a private home and XDG dirs under ``state_dir`` and the disable
    switches, then ``extra`` laid over them (a ``None`` value removes the name: that is
    ``opencode.env``, so ``HOME: $HOME`` restores the user's home), then the server
    password (never overridden: the client must know it). ``OPENCODE_CONFIG`` /
    ``OPENCODE_CONFIG_CONTENT`` in ``base`` pass through: that is how a provider is
    configured for a managed server."""
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
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env["OPENCODE_SERVER_PASSWORD"] = password
    env.pop("OPENCODE_SERVER_USERNAME", None)  # the client authenticates as the default user
    return env


class ManagedServer(LocalServer):
    """One ``opencode serve`` process (see :class:`LocalServer`). ``env`` is its base
    environment (default ``os.environ``), ``extra_env`` what ``opencode.env`` lays over the
    isolated one (see :func:`isolated_env`). ``start()`` returns once it is healthy;
    ``stop()`` ends its whole process group. ``password`` is set at construction,
    ``base_url`` / ``pid`` once started."""

    def __init__(
        self,
        command: str,
        state_dir: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str | None] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(
            "opencode serve", state_dir / "server.log", startup_timeout_s=startup_timeout_s
        )
        self.command = command
        self.state_dir = state_dir
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.extra_env = dict(extra_env or {})
        self.password = secrets.token_urlsafe(24)

    async def start(self) -> None:
        """Launch and wait for ``GET /global/health``. Raises ``AgentError("launch_failed")``."""
        argv = command_argv(self.command, "opencode.command")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cwd = self.cwd if self.cwd is not None and self.cwd.is_dir() else self.state_dir
        identity = {"command": self.command, "cwd": str(cwd)}
        taken = await self.take_over(
            identity, lambda url, secret: OpenCodeClient(url, password=secret)
        )
        if taken is not None:  # the server an earlier scheduler left serving
            self.password = taken[0]
            return
        env = isolated_env(self.state_dir, self.env, self.password, self.extra_env)
        await self.launch(
            argv,
            host_flag="--hostname",
            env=env,
            cwd=cwd,
            probe=lambda url: OpenCodeClient(url, password=self.password),
        )
        self.record(self.password, identity)


def remote_script(command: str, port: int, log: str, overrides: Mapping[str, str | None]) -> str:
    """The shell command line that starts ``command`` on a worker host, in the workspace:
    reads the server password from stdin, isolates ``HOME`` and the XDG folders under
    :data:`REMOTE_STATE`, sets the disable switches, then ``overrides`` (``opencode.env``
    and the host's ``env``, resolved here; None unsets), and binds 127.0.0.1:``port``,
    appending its output to ``log``."""
    keep = {k: v for k, v in overrides.items() if k != "OPENCODE_SERVER_PASSWORD"}
    sets = env_exports({k: v for k, v in keep.items() if v is not None})
    unsets = "".join(f"unset {k}; " for k, v in keep.items() if v is None)
    switches = " ".join(f"{name}=1" for name in DISABLE_SWITCHES)
    return (
        "IFS= read -r OPENCODE_SERVER_PASSWORD; export OPENCODE_SERVER_PASSWORD; "
        f'd="$PWD"/{REMOTE_STATE}; '
        'mkdir -p "$d/home/.config" "$d/data" "$d/cache" "$d/state" || exit 1; '
        'export HOME="$d/home" XDG_CONFIG_HOME="$d/home/.config" XDG_DATA_HOME="$d/data" '
        'XDG_CACHE_HOME="$d/cache" XDG_STATE_HOME="$d/state"; '
        f"export {switches}; {unsets}{sets}unset OPENCODE_SERVER_USERNAME; "
        f"{command} --hostname 127.0.0.1 --port {port} </dev/null >> {shlex.quote(log)} 2>&1"
    )
