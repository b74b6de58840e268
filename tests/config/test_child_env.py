"""One child-environment recipe for every backend and the hooks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from symphony_tui.agents.acp import AcpBackend
from symphony_tui.agents.codex import CodexBackend
from symphony_tui.agents.opencode import OpenCodeBackend
from symphony_tui.agents.openhands import OpenHandsBackend
from symphony_tui.config.child_env import (
    CHILD_MARKER,
    ChildEnv,
    env_reference,
    secret_env_names,
)
from symphony_tui.config.settings import Settings, resolve_settings

BASE = {
    "PATH": "/bin",
    "LINEAR_API_KEY": "lin-value-1",
    "TRACKER_KEY": "tracker-value-2",
    "REAL": "real-value",
    "DROP": "1",
}
OVERRIDES = {
    "EXTRA": "literal",
    "COPIED": "$REAL",
    "BRACED": "${REAL}",
    "DROP": "$UNSET_VARIABLE",
    "LEAK": "$TRACKER_KEY",  # a secret under another name
    "LINEAR_API_KEY": "literal-is-ignored-too",
}


def settings_with(section: str) -> Settings:
    raw = {"tracker": {"kind": "local", "path": "i.yaml", "api_key": "$TRACKER_KEY"}}
    raw[section] = {"env": OVERRIDES}
    return resolve_settings(raw, Path("/tmp"), BASE)


def codex_env(tmp_path: Path) -> dict[str, str | None]:
    settings = settings_with("codex")
    return dict(CodexBackend(lambda: settings, env=BASE).child_env(settings))


def openhands_env(tmp_path: Path) -> dict[str, str | None]:
    settings = settings_with("openhands")
    backend = OpenHandsBackend(lambda: settings, env=BASE, state_dir=tmp_path)
    env = backend.server_env(settings.openhands)
    assert env.pop("HOME") == str(tmp_path / "home")  # the backend's own default
    return dict(env)


def opencode_env(tmp_path: Path) -> dict[str, str | None]:
    settings = settings_with("opencode")
    backend = OpenCodeBackend(lambda: settings, env=BASE, state_dir=tmp_path)
    env: dict[str, str | None] = dict(backend.server_env())
    for name, value in backend.extra_env(settings.opencode).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def acp_env(tmp_path: Path) -> dict[str, str | None]:
    settings = settings_with("acp")
    return dict(AcpBackend(lambda: settings, env=BASE).child_env(settings))


@pytest.mark.parametrize("built", [codex_env, openhands_env, opencode_env, acp_env])
def test_every_backend_applies_the_same_recipe(built, tmp_path: Path) -> None:
    env = built(tmp_path)
    assert env["PATH"] == "/bin" and env["EXTRA"] == "literal"
    assert env["COPIED"] == env["BRACED"] == "real-value"
    assert "DROP" not in env  # an unset $VAR removes the name
    for secret in ("LINEAR_API_KEY", "TRACKER_KEY", "LEAK"):
        assert secret not in env


def test_hooks_may_pass_a_secret_explicitly() -> None:
    recipe = ChildEnv(BASE, {"TRACKER_KEY"})
    env = recipe.build(
        {"LEAK": "$TRACKER_KEY", "LINEAR_API_KEY": "$LINEAR_API_KEY"}, pass_secrets=True
    )
    assert env["LEAK"] == "tracker-value-2" and env["LINEAR_API_KEY"] == "lin-value-1"
    assert "TRACKER_KEY" not in env


def test_secret_names_come_from_every_credential_setting() -> None:
    raw = {
        "tracker": {"api_key": "${A}", "provider": {"api_key": "$B"}, "secret_env_names": ["C"]},
        "openhands": {"session_api_key_env": "D"},
        "opencode": {"password_env": "E"},
        "server": {"auth_token_env": "F"},
    }
    always = {"LINEAR_API_KEY", "SYMPHONY_API_TOKEN"}
    assert secret_env_names(raw) == always | {"A", "B", "C", "D", "E", "F"}
    assert secret_env_names({"tracker": {"api_key": "literal"}}) == always
    assert env_reference("$X_1") == "X_1" and env_reference("${Y}") == "Y"
    assert env_reference("a$X") is None and env_reference("$1X") is None


def test_the_api_token_never_reaches_a_child_and_each_child_is_marked(monkeypatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "api-secret")
    monkeypatch.setenv("SYMPHONY_API_TOKEN", "attach-secret")
    raw = {"server": {"auth_token_env": "MY_API_TOKEN"}}
    recipe = ChildEnv({}, secret_env_names(raw))
    env = recipe.build({"AGAIN": "$MY_API_TOKEN", "MY_API_TOKEN": "$MY_API_TOKEN"})
    assert "api-secret" not in env.values() and "attach-secret" not in env.values()
    assert env[CHILD_MARKER] == str(os.getpid())
