"""Backend set-up errors, managed-server launch failures and token arithmetic (no server)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.openhands import OpenHandsBackend
from symphony_tui.agents.openhands.server import ManagedServer
from symphony_tui.agents.openhands.translate import state_update, translate, usage_from_stats
from symphony_tui.config.settings import OpenHandsSettings, Settings
from symphony_tui.domain import EventKind
from symphony_tui_testing.session_host import RecordingSessionHost


def settings_with(**oh: object) -> Settings:
    return Settings().model_copy(update={"openhands": OpenHandsSettings(**oh)})


async def start(settings: Settings, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    backend = OpenHandsBackend(lambda: settings, env=env or {}, state_dir=tmp_path / "state")
    try:
        with pytest.raises(AgentError) as info:
            await backend.start_session(RecordingSessionHost(tmp_path))
    finally:
        await backend.aclose()
    return str(info.value)


async def test_neither_base_url_nor_command(tmp_path: Path) -> None:
    assert "set base_url" in await start(settings_with(), tmp_path)


async def test_missing_session_key_env(tmp_path: Path) -> None:
    s = settings_with(base_url="http://127.0.0.1:9", session_api_key_env="OH_KEY")
    assert "$OH_KEY is unset" in await start(s, tmp_path)


async def test_launch_failures_are_one_line_errors(tmp_path: Path) -> None:
    missing = await start(settings_with(command="/nonexistent/oh-server"), tmp_path)
    assert missing.startswith("launch_failed: /nonexistent/oh-server")
    code = f"{sys.executable} -c 'import sys; print(\"boom\"); sys.exit(3)'"
    exited = await start(settings_with(command=code), tmp_path)
    assert exited.startswith("launch_failed: agent-server exited with 3") and "boom" in exited
    assert "\n" not in exited


async def test_unhealthy_server_times_out_and_is_stopped(tmp_path: Path) -> None:
    server = ManagedServer(
        f"{sys.executable} -c 'import time; time.sleep(60)'", tmp_path, startup_timeout_s=0.5
    )
    with pytest.raises(AgentError, match=r"not healthy after 0\.5s"):
        await server.start()
    assert not server.running


def test_managed_server_gets_a_clean_home_unless_openhands_env_says_otherwise(
    tmp_path: Path,
) -> None:
    base = {"HOME": "/home/someone", "PATH": "/bin", "REAL_HOME": "/home/real"}
    backend = OpenHandsBackend(lambda: Settings(), env=base, state_dir=tmp_path / "state")
    env = backend.server_env(OpenHandsSettings())
    assert env["HOME"] == str(tmp_path / "state" / "home")
    assert (tmp_path / "state" / "home").is_dir() and env["PATH"] == "/bin"
    custom = OpenHandsSettings(env={"HOME": "$REAL_HOME", "EXTRA": "1", "PATH": "$UNSET_VAR"})
    env = backend.server_env(custom)
    assert env["HOME"] == "/home/real" and env["EXTRA"] == "1"
    assert "PATH" not in env  # an unset $VAR removes the variable


async def test_launch_uses_the_clean_home(tmp_path: Path) -> None:
    code = f"{sys.executable} -c 'import os, sys; print(os.environ[\"HOME\"]); sys.exit(4)'"
    exited = await start(settings_with(command=code), tmp_path, env={"HOME": "/nope"})
    assert exited.startswith("launch_failed: agent-server exited with 4")
    assert str(tmp_path / "state" / "home") in exited


def test_usage_is_summed_over_usage_ids() -> None:
    def metrics(p: int, c: int, cached: int, r: int, cost: float) -> dict:
        return {
            "accumulated_cost": cost,
            "accumulated_token_usage": {
                "prompt_tokens": p,
                "completion_tokens": c,
                "cache_read_tokens": cached,
                "reasoning_tokens": r,
            },
        }

    stats = {
        "usage_to_metrics": {
            "agent": metrics(300, 40, 20, 5, 0.25),
            "condenser": metrics(100, 10, 0, 0, 0.05),
            "broken": "x",
        }
    }
    u = usage_from_stats(stats)
    assert u is not None
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (400, 50, 450)
    assert (u.cached_input_tokens, u.reasoning_tokens) == (20, 5)
    assert u.cost_usd == pytest.approx(0.30)
    assert usage_from_stats({"metrics": None}) is None
    full = {"kind": "ConversationStateUpdateEvent", "key": "full_state", "id": "s"}
    full["value"] = {"execution_status": "running", "stats": stats, "confirmation_policy": {}}
    status, usage, policy = state_update(full)
    assert (status, usage, policy) == ("running", u, None)


def test_usage_derives_what_a_trimmed_stats_payload_leaves_out() -> None:
    # A metrics entry without accumulated totals counts its per-call usages; the server's
    # TokenUsage has no total, so the total is input + output; omitted counts are 0.
    stats = {
        "usage_to_metrics": {
            "agent": {
                "accumulated_cost": 0.1,
                "token_usages": [
                    {"prompt_tokens": 100, "completion_tokens": 10, "cache_read_tokens": 40},
                    {"prompt_tokens": 150, "completion_tokens": 20},
                    "garbage",
                ],
            },
            "condenser": {"accumulated_token_usage": {"prompt_tokens": 50}},
        }
    }
    u = usage_from_stats(stats)
    assert u is not None
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (300, 30, 330)
    assert u.cached_input_tokens == 40 and u.reasoning_tokens == 0


def test_translation_of_terminal_action_and_observation() -> None:
    action = {
        "id": "a1",
        "kind": "ActionEvent",
        "tool_name": "terminal",
        "action": {"command": "ls -la", "kind": "TerminalAction"},
    }
    obs = {
        "id": "o1",
        "kind": "ObservationEvent",
        "tool_name": "terminal",
        "action_id": "a1",
        "observation": {"content": [{"type": "text", "text": "total 0"}], "exit_code": 0},
    }
    started, done = translate(action), translate(obs)
    assert started is not None and started.kind == EventKind.COMMAND_STARTED
    assert started.message == "ls -la" and started.payload.wire_id == "a1"
    assert done is not None and done.kind == EventKind.COMMAND_COMPLETED
    assert (done.message, done.payload.exit_code, done.payload.item_id) == ("total 0", 0, "a1")
    assert translate({"id": "u", "kind": "MessageEvent", "source": "user"}) is None
    unknown = translate({"id": "z", "kind": "SomethingNew"})
    assert unknown is not None and unknown.kind == EventKind.NOTIFICATION
