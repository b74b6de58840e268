"""A two-host fleet of real sshd on loopback for the worker-host tests (tests/hosts/sshd.py)."""

from __future__ import annotations

import pytest

from tests.hosts.sshd import HAVE_SSHD, Fleet


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    if not HAVE_SSHD:
        pytest.skip("openssh-server is not installed (.ci/run installs it)")
    fleet = Fleet(tmp_path / "fleet", 2)
    for key, value in fleet.env.items():
        monkeypatch.setenv(key, value)
    try:
        yield fleet
    finally:
        fleet.close()
