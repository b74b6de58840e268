"""The control token of a scheduler a test started as a program (docs/security.md): read
from its API note in the state folder of the environment it was started with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from symphony_tui.api.auth import CONTROL_HEADER, find_control_token

_TOKENS: dict[str, str] = {}


def state_api_dir(env: Mapping[str, str]) -> Path:
    """``<state dir>/symphony-tui/api`` of a program run with ``env`` (Linux layout)."""
    base = env.get("XDG_STATE_HOME") or os.path.join(env["HOME"], ".local", "state")
    return Path(base) / "symphony-tui" / "api"


def remember_control(url: str, env: Mapping[str, str]) -> str:
    """Find and keep the control token of the scheduler serving ``url``; returns it."""
    port = urlsplit(url).port
    token = find_control_token(port, state_api_dir(env)) if port else None
    assert token, f"no control token for {url} in {state_api_dir(env)}"
    _TOKENS[url.rstrip("/")] = token
    return token


def control_headers(url: str) -> dict[str, str]:
    """The header carrying the remembered token of ``url``'s scheduler (none if unknown)."""
    token = _TOKENS.get(url.rstrip("/"))
    return {CONTROL_HEADER: token} if token else {}
