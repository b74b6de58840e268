from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_login_shell(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Hooks run as ``bash -lc``: give them an empty HOME so the machine's login profile
    (pyenv rehash, cargo env, ...) neither slows the tests nor changes their outcome."""
    home: Path = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home
