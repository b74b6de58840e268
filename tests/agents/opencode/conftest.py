"""Fixtures for the real OpenCode server tests: the binary, one shared fake model and one
shared server (a launch costs about 4 s on a 2-core machine), per-test usage accounting."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from symphony_tui.agents.opencode.server import ManagedServer
from symphony_tui.domain import TokenUsage
from symphony_tui_testing.fake_model import FakeModelServer
from symphony_tui_testing.opencode_env import opencode_env, server_command
from tests.real_programs import require_opencode


@pytest.fixture(scope="session")
def oc_bin() -> Path:
    return require_opencode()


@pytest.fixture(scope="session")
def oc_model() -> Iterator[FakeModelServer]:
    """The fake model every server of the session talks to (its URL is in their config)."""
    with FakeModelServer(slow_delay=0.05) as fm:
        yield fm


@pytest.fixture(scope="session")
def oc_env(oc_model: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {**os.environ, **opencode_env(tmp_path_factory.mktemp("oc-cfg"), oc_model.url)}


@pytest.fixture(scope="session")
def oc_server(
    oc_bin: Path, oc_env: dict, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedServer]:
    """One real server for the tests that use ``base_url`` mode."""
    server = ManagedServer(server_command(oc_bin), tmp_path_factory.mktemp("oc-shared"), env=oc_env)
    asyncio.run(server.start())
    try:
        yield server
    finally:
        asyncio.run(server.stop())


class ModelWindow:
    """The shared fake model as seen by one test: its requests and delivered usage since
    the test began."""

    def __init__(self, model: FakeModelServer) -> None:
        self.model = model
        self._requests = len(model.requests)
        self._usage = len(model.usage_log)

    @property
    def requests(self) -> list[dict]:
        return self.model.requests[self._requests :]

    @property
    def usage_total(self) -> TokenUsage:
        total = TokenUsage()
        for u in self.model.usage_log[self._usage :]:
            total = total + u
        return total


@pytest.fixture
def fake_model(oc_model: FakeModelServer) -> Iterator[ModelWindow]:
    window = ModelWindow(oc_model)
    yield window
    oc_model._fail.clear()  # an injected failure never leaks into the next test
