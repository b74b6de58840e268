"""Run the real OpenCode server in isolation against a local fake model.

:func:`find_opencode_bin` locates the pinned binary (``$SYMPHONY_OPENCODE_BIN``, then
``~/.cache/symphony-tui/opencode-1.18.33/node_modules/.bin/opencode``). :func:`opencode_env`
writes an OpenCode config whose only provider is a
:class:`~symphony_tui_testing.fake_model.FakeModelServer` (``@ai-sdk/openai-compatible``,
model ``fake/fake-model``, ``bash`` and ``edit`` set to ``ask``) and returns the
environment overlay that points a server at it (``OPENCODE_CONFIG``) with every stray
outbound call sent to a closed loopback port. :func:`opencode_settings` builds the
``opencode:`` settings block (managed ``command`` or ``base_url`` + ``password_env``).
Measured on a 2-core machine: about 1-2 s from launch to ``GET /global/health`` 200.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

from symphony_tui.config.settings import OpenCodeSettings, Settings

OPENCODE_VERSION = "1.18.33"
# The account's home from the password database: test runs give the process a private
# HOME (tests/conftest.py), which must not hide the pinned install.
OPENCODE_CACHE_BIN = (
    Path(pwd.getpwuid(os.getuid()).pw_dir)
    / ".cache"
    / "symphony-tui"
    / f"opencode-{OPENCODE_VERSION}"
    / "node_modules/.bin/opencode"
)
FAKE_MODEL = "fake/fake-model"
PROXY = "http://127.0.0.1:9"


def find_opencode_bin() -> Path | None:
    """The opencode binary: ``$SYMPHONY_OPENCODE_BIN``, then the pinned cache install."""
    env = os.environ.get("SYMPHONY_OPENCODE_BIN")
    for candidate in (Path(env) if env else None, OPENCODE_CACHE_BIN):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def fake_config(model_url: str, *, permission: str = "ask") -> dict[str, Any]:
    """An OpenCode config with the fake model as its only provider and default model."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "fake",
                "options": {"baseURL": model_url, "apiKey": "fake-key"},
                "models": {"fake-model": {"name": "fake model"}},
            }
        },
        "model": FAKE_MODEL,
        "permission": {"bash": permission, "edit": permission},
        "autoupdate": False,
        "share": "disabled",
    }


def opencode_env(dir: Path, model_url: str, *, permission: str = "ask") -> dict[str, str]:
    """Write ``dir/opencode.json`` (:func:`fake_config`) and return the env overlay:
    ``OPENCODE_CONFIG`` and loopback-only proxy settings."""
    dir.mkdir(parents=True, exist_ok=True)
    path = dir / "opencode.json"
    path.write_text(json.dumps(fake_config(model_url, permission=permission), indent=1))
    return {
        "OPENCODE_CONFIG": str(path),
        "HTTP_PROXY": PROXY,
        "HTTPS_PROXY": PROXY,
        "http_proxy": PROXY,
        "https_proxy": PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def server_command(binary: Path) -> str:
    """The ``opencode.command`` that launches a server from ``binary``."""
    return f"{binary} serve"


def opencode_settings(
    *,
    command: str | None = None,
    base_url: str | None = None,
    password_env: str | None = None,
    model: str | None = FAKE_MODEL,
    workspace_root: Path | None = None,
    startup_timeout_ms: int = 60_000,
) -> Settings:
    """Settings with ``agent.backend: opencode``."""
    oc = OpenCodeSettings(
        base_url=base_url,
        command=command,
        model=model,
        password_env=password_env,
        startup_timeout_ms=startup_timeout_ms,
    )
    raw: dict[str, Any] = {"agent": {"backend": "opencode"}}
    if workspace_root is not None:
        raw["workspace"] = {"root": str(workspace_root)}
    return Settings.model_validate(raw).model_copy(update={"opencode": oc})
