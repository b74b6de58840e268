"""Fixtures for the real agent-server tests: the venv, one shared server, a fake model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from symphony_tui.agents.openhands.server import ManagedServer
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.openhands_env import (
    isolated_env,
    server_command,
)
from tests.real_programs import require_openhands


@pytest.fixture(scope="session")
def oh_venv() -> Path:
    return require_openhands()


@pytest.fixture(scope="session")
def oh_server(oh_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedServer]:
    """One real server for the tests that use ``base_url`` mode (started once: ~3-15 s)."""
    state = tmp_path_factory.mktemp("oh-shared")
    server = ManagedServer(
        server_command(oh_venv),
        state,
        env=isolated_env(state / "home"),
        startup_timeout_s=120,
    )
    asyncio.run(server.start())
    print(f"openhands agent-server healthy after {server.startup_s:.1f}s")
    try:
        yield server
    finally:
        asyncio.run(server.stop())


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    with FakeModelServer(slow_delay=0.2) as fm:
        yield fm
