"""Run the real OpenHands agent-server in isolation against a local fake model.

:func:`find_openhands_venv` locates the pinned venv (``$SYMPHONY_OPENHANDS_VENV``, then
``~/.cache/symphony-tui/openhands-1.58.2``). :func:`openhands_server` starts the server on a
free 127.0.0.1 port with its state in a given directory and yields a
:class:`RunningOpenHands` (base URL, session API key, start-up seconds). Measured on a
2-core machine: about 3-8 s from launch to ``GET /health`` 200.

:func:`openhands_settings` builds the ``openhands:`` settings block that points the backend
at that server (or lets it manage its own) with the fake model as LLM.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symphony_tui.agents.openhands.server import ManagedServer
from symphony_tui.config.settings import OpenHandsSettings, Settings

OPENHANDS_VERSION = "1.58.2"
OPENHANDS_CACHE_VENV = Path.home() / ".cache" / "symphony-tui" / f"openhands-{OPENHANDS_VERSION}"
FAKE_MODEL = "openai/fake-model"
FAKE_API_KEY = "fake-key"


def find_openhands_venv() -> Path | None:
    """The agent-server venv: ``$SYMPHONY_OPENHANDS_VENV``, then the pinned cache install.

    A venv counts when ``bin/python`` exists and ``openhands/agent_server`` is installed.
    """
    candidates = []
    env = os.environ.get("SYMPHONY_OPENHANDS_VENV")
    if env:
        candidates.append(Path(env))
    candidates.append(OPENHANDS_CACHE_VENV)
    for venv in candidates:
        if (venv / "bin" / "python").exists() and any(
            (venv / "lib").glob("python3*/site-packages/openhands/agent_server")
        ):
            return venv
    return None


def isolated_env(home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with ``HOME`` set to an empty directory.

    The agent's terminal is an interactive bash that reads ``~/.bashrc``. A slow rc file
    (``eval "$(pyenv init -)"`` on a busy machine) races the tool's own prompt setup and the
    first command then hangs for the tool's 30 s no-output timeout and returns the setup
    text instead of its output (measured on 1.58.2). A clean home makes tests deterministic.
    """
    home.mkdir(parents=True, exist_ok=True)
    return {**(os.environ if base is None else base), "HOME": str(home)}


def server_command(venv: Path) -> str:
    """The ``openhands.command`` that launches the server from ``venv``."""
    return f"{venv / 'bin' / 'python'} -m openhands.agent_server"


@dataclass(frozen=True)
class RunningOpenHands:
    """A started server: ``base_url`` (``http://127.0.0.1:P``), ``api_key`` (session API
    key), ``startup_s`` (seconds until healthy), ``pid`` and ``state_dir``."""

    base_url: str
    api_key: str
    startup_s: float
    pid: int | None
    state_dir: Path
    server: ManagedServer


@asynccontextmanager
async def openhands_server(
    state_dir: Path,
    *,
    venv: Path | None = None,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 90.0,
) -> AsyncIterator[RunningOpenHands]:
    """Start the real server (state in ``state_dir``), yield it, stop its process group.

    Raises ``FileNotFoundError`` when no venv is found and ``AgentError("launch_failed")``
    when the server does not become healthy. ``env`` defaults to :func:`isolated_env`
    with a home under ``state_dir``.
    """
    venv = venv or find_openhands_venv()
    env = isolated_env(state_dir / "home") if env is None else env
    if venv is None:
        raise FileNotFoundError("no OpenHands agent-server venv (set SYMPHONY_OPENHANDS_VENV)")
    server = ManagedServer(
        server_command(venv), state_dir, env=env, startup_timeout_s=startup_timeout_s
    )
    await server.start()
    try:
        assert server.base_url is not None and server.startup_s is not None
        yield RunningOpenHands(
            server.base_url, server.api_key, server.startup_s, server.pid, state_dir, server
        )
    finally:
        await server.stop()


def fake_llm(model_url: str) -> dict[str, Any]:
    """``openhands.llm`` for a :class:`~symphony_tui_testing.fake_model.FakeModelServer`."""
    return {"model": FAKE_MODEL, "base_url": model_url, "api_key": FAKE_API_KEY, "num_retries": 0}


def openhands_settings(
    model_url: str,
    *,
    base_url: str | None = None,
    key_env: str | None = None,
    command: str | None = None,
    ws_auth: str = "first_frame",
    confirmation_policy: str = "AlwaysConfirm",
    read_timeout_ms: int = 30_000,
    startup_timeout_ms: int = 120_000,
) -> Settings:
    """Settings with ``agent.backend: openhands`` and the fake model as LLM."""
    oh = OpenHandsSettings(
        base_url=base_url,
        command=command,
        session_api_key_env=key_env,
        ws_auth=ws_auth,
        confirmation_policy=confirmation_policy,
        llm=fake_llm(model_url),
        read_timeout_ms=read_timeout_ms,
        startup_timeout_ms=startup_timeout_ms,
    )
    return Settings.model_validate({"agent": {"backend": "openhands"}}).model_copy(
        update={"openhands": oh}
    )
