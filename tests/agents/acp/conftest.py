"""Fixtures for the ACP backend tests: the scripted agent program and a backend on it."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.base import TurnResult
from symphony_tui.config.settings import AcpSettings, Settings
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

FAKE_AGENT = f"{shlex.quote(sys.executable)} -m symphony_tui_testing.fake_acp_agent"


def acp_settings(command: str = FAKE_AGENT, **acp: Any) -> Settings:
    raw: dict[str, Any] = {"agent": {"backend": "acp"}}
    settings = Settings.model_validate(raw)
    return settings.model_copy(update={"acp": AcpSettings(command=command, **acp)})


class FakeAgentRun:
    """A backend on the scripted agent, the messages it wrote and its log file."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None, **acp: Any) -> None:
        self.log = tmp / "fake-acp.jsonl"
        self.sent: list[dict[str, Any]] = []
        self.settings = acp_settings(**acp)
        self.env = {"FAKE_ACP_LOG": str(self.log), "FAKE_ACP_STATE": str(tmp / "state")}
        self.env.update(env or {})
        self.backend = AcpBackend(lambda: self.settings, env=self.env, sent=self.sent)
        self.tmp = tmp

    def host(self, identifier: str = "ACP-1", **kw: Any) -> RecordingSessionHost:
        ws = self.tmp / "ws" / identifier
        ws.mkdir(parents=True, exist_ok=True)
        return RecordingSessionHost(ws, issue=make_issue(identifier), **kw)

    async def turns(self, host: RecordingSessionHost, *prompts: str) -> list[TurnResult]:
        """Open a session for ``host``, run ``prompts`` as turns, close the backend."""
        session = await self.backend.start_session(host)
        try:
            return [await session.run_turn(p, continuation=i > 0) for i, p in enumerate(prompts)]
        finally:
            await self.backend.aclose()

    def outcomes(self) -> list[dict[str, Any]]:
        """The permission outcomes the agent received, in order."""
        return [
            m["result"]["outcome"]
            for side, m in self.exchange()
            if side == "client" and isinstance(m.get("result"), dict) and "outcome" in m["result"]
        ]

    def exchange(self) -> list[tuple[str, dict[str, Any]]]:
        """What the agent read (``client``) and wrote (``agent``), in order."""
        out = []
        for line in self.log.read_text().splitlines():
            entry = json.loads(line)
            out.append(("client" if entry["dir"] == "in" else "agent", entry["msg"]))
        return out


@pytest.fixture
def fake_agent(tmp_path: Path) -> FakeAgentRun:
    return FakeAgentRun(tmp_path)
