"""``agent.backend: acp`` in the settings: validation, the registry, worker hosts and the
child's environment (the scheduler's secrets stay out)."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.registry import create_backend
from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.validate import validate_dispatch

BASE = {"tracker": {"kind": "linear", "api_key": "k", "project_slug": "p"}}


def test_acp_needs_a_command(tmp_path: Path) -> None:
    bad = resolve_settings({**BASE, "agent": {"backend": "acp"}}, tmp_path, {})
    assert validate_dispatch(bad) == ["invalid_agent_config: agent.backend acp needs acp.command"]
    good = resolve_settings(
        {
            **BASE,
            "agent": {"backend": "acp"},
            "acp": {"command": "opencode acp", "mcp_servers": [{"name": "x", "command": "y"}]},
        },
        tmp_path,
        {},
    )
    assert validate_dispatch(good) == []
    assert good.acp.mcp_servers == [{"name": "x", "command": "y"}]
    assert good.acp.read_timeout_ms == 60_000 and good.acp.auth_method is None


def test_worker_hosts_may_name_their_own_acp_command(tmp_path: Path) -> None:
    raw = {
        **BASE,
        "agent": {"backend": "acp"},
        "worker": {
            "ssh_hosts": ["127.0.0.1"],
            "hosts": {"127.0.0.1": {"commands": {"acp": "gemini --experimental-acp"}}},
        },
    }
    s = resolve_settings(raw, tmp_path, {})
    assert validate_dispatch(s) == []
    assert s.worker.command_for("127.0.0.1", "acp", "") == "gemini --experimental-acp"


def test_the_registry_builds_it_and_secrets_never_reach_the_agent(tmp_path: Path) -> None:
    s = resolve_settings(
        {**BASE, "agent": {"backend": "acp"}, "acp": {"command": "x", "env": {"MODE": "$MODE"}}},
        tmp_path,
        {},
    )
    env = {"HOME": "/home/u", "MODE": "fast", "LINEAR_API_KEY": "lin_secret"}
    backend = create_backend("acp", lambda: s, env=env, unset=("LINEAR_API_KEY",))
    assert isinstance(backend, AcpBackend) and backend.name == "acp"
    child = backend.child_env(s)
    assert "LINEAR_API_KEY" not in child
    assert child["MODE"] == "fast" and child["HOME"] == "/home/u"


def test_doctor_starts_the_agent_and_reads_its_initialize_answer(tmp_path: Path) -> None:
    from symphony_tui.doctor import _agent_check

    from .conftest import FAKE_AGENT

    raw = {**BASE, "agent": {"backend": "acp"}, "acp": {"command": FAKE_AGENT}}
    check = _agent_check(resolve_settings(raw, tmp_path, {}), raw, 30.0)
    assert check.ok, check
    assert check.detail.endswith("answered initialize (ACP 1, no agentInfo)")
    raw["acp"] = {"command": "sleep 30"}
    slow = _agent_check(resolve_settings(raw, tmp_path, {}), raw, 1.0)
    assert not slow.ok and "initialize got no response within 1000 ms" in slow.detail
