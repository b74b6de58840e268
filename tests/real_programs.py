"""The one rule for tests that need a real program: skip when it is missing on a developer's
machine, fail when it is missing in CI (`.ci/run` installs it; a skip there would hide that)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from symphony_tui_testing.codex_env import find_codex_bin
from symphony_tui_testing.opencode_env import find_opencode_bin
from symphony_tui_testing.openhands_env import find_openhands_venv


def missing(what: str, hint: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed ({hint}) and CI is set")
    pytest.skip(f"{what} is not installed")


def require_codex() -> Path:
    return find_codex_bin() or missing("codex", "set SYMPHONY_CODEX_BIN")


def require_openhands() -> Path:
    return find_openhands_venv() or missing(
        "the OpenHands agent-server venv", "set SYMPHONY_OPENHANDS_VENV"
    )


def require_opencode() -> Path:
    return find_opencode_bin() or missing("opencode", "set SYMPHONY_OPENCODE_BIN")


def require_tmux() -> str:
    return shutil.which("tmux") or missing("tmux", ".ci/run installs it")
