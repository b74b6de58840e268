"""Fixtures for codex backend unit tests: a scripted fake app-server program."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import Settings
from symphony_tui_testing.codex_env import CodexSchema, find_codex_bin, generate_schema
from symphony_tui_testing.session_host import RecordingSessionHost

FAKE_APP_SERVER = Path(__file__).with_name("fake_app_server.py")

HANDSHAKE: list[dict[str, Any]] = [
    {
        "expect": "initialize",
        "result": {
            "userAgent": "fake/0.0",
            "codexHome": "/tmp",
            "platformFamily": "unix",
            "platformOs": "linux",
        },
    },
    {"expect_notification": "initialized"},
    {"expect": "thread/start", "result": {"thread": {"id": "th-1"}}},
]


def turn_start(turn: str = "tu-1") -> dict[str, Any]:
    return {"expect": "turn/start", "result": {"turn": {"id": turn, "status": "inProgress"}}}


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"send": {"method": method, "params": params}}


def server_request(rid: int, method: str, **params: Any) -> dict[str, Any]:
    return {"send": {"id": rid, "method": method, "params": params}}


def turn_completed(
    turn: str = "tu-1", status: str = "completed", error: dict | None = None
) -> dict[str, Any]:
    return note(
        "turn/completed", threadId="th-1", turn={"id": turn, "status": status, "error": error}
    )


@dataclass
class FakeRun:
    backend: CodexBackend
    log: Path
    sent: list[dict[str, Any]]

    def received(self) -> list[dict[str, Any]]:
        """What the fake app-server read from the backend, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def responses(self) -> dict[Any, dict[str, Any]]:
        return {m["id"]: m for m in self.received() if "method" not in m and "id" in m}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def host(workspace: Path) -> RecordingSessionHost:
    return RecordingSessionHost(workspace)


@pytest.fixture(scope="session")
def codex_schema(tmp_path_factory: pytest.TempPathFactory) -> CodexSchema | None:
    """The pinned binary's schema when codex is installed (else these unit tests only skip
    the extra schema check; the real-codex tests insist on it)."""
    found = find_codex_bin()
    if found is None:
        return None
    return CodexSchema(generate_schema(found, tmp_path_factory.mktemp("codex-schema")))


@pytest.fixture
async def fake_codex(tmp_path: Path, codex_schema: CodexSchema | None):
    """``make(steps, **codex_settings) -> FakeRun``; backends are closed at teardown and
    everything they sent is validated against the codex schema when it is available."""
    made: list[CodexBackend] = []
    runs: list[FakeRun] = []

    def make(steps: list[dict[str, Any]], **codex: Any) -> FakeRun:
        n = len(made)
        script = tmp_path / f"script-{n}.json"
        script.write_text(json.dumps(steps))
        log = tmp_path / f"received-{n}.jsonl"
        cmd = " ".join(shlex.quote(str(a)) for a in (sys.executable, FAKE_APP_SERVER, script, log))
        settings = Settings.model_validate(
            {"codex": {"command": cmd, "read_timeout_ms": 5_000, **codex}}
        )
        sent: list[dict[str, Any]] = []
        # A private HOME keeps `bash -lc` from running the machine's login profile (pyenv
        # rehash takes a global lock; a shell killed mid-rehash would stall every later one).
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        backend = CodexBackend(lambda: settings, env={"HOME": str(home)}, sent=sent)
        made.append(backend)
        runs.append(FakeRun(backend, log, sent))
        return runs[-1]

    yield make
    for b in made:
        await b.aclose()
    if codex_schema is not None:
        for run in runs:
            codex_schema.validate_all(run.sent)
