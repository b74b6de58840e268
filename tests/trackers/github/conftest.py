"""Fixtures for the GitHub tracker tests: GitHub's contracts (skipped with a reason when they
are not installed, a failure under CI), a fake clock, a started FakeGitHub that validates
every request and answer against them, settings pointing at it and a GitHubTracker.

Every test using ``fake`` ends by asserting that no request or answer broke the contracts."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from symphony_tui_testing.github_contracts import missing_contracts
from tests.helpers import SettingsBox, WallClock

TOKEN = "ghp_SECRET_4f1b7c9e2d3a5b60"
REPO = "octo/app"


def require_contracts() -> None:
    """Skip (outside CI) or fail (``CI=true``) when the contract files are missing."""
    missing = missing_contracts()
    if not missing:
        return
    reason = (
        "GitHub's API contracts are not installed (.ci/run installs @octokit/openapi and "
        f"@octokit/graphql-schema): missing {', '.join(missing)}"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def fake(clock: WallClock) -> Iterator:
    require_contracts()
    from symphony_tui_testing.fake_github import FakeGitHub

    with FakeGitHub(token=TOKEN, repo=REPO, clock=clock) as gh:
        yield gh
    assert gh.violations == [], gh.violations[:10]


def github_settings(fake, **tracker: object) -> Settings:
    """Resolved settings for ``fake`` (``tracker`` keys override), as a WORKFLOW.md gives them."""
    raw = {"kind": "github", "repo": REPO, "api_url": fake.url, "token": TOKEN, **tracker}
    return resolve_settings({"tracker": raw}, workflow_dir=Path("."), env={})


@pytest.fixture
def settings(fake) -> SettingsBox:
    return SettingsBox(github_settings(fake))


@pytest.fixture
async def tracker(settings: SettingsBox, clock: WallClock) -> AsyncIterator:
    from symphony_tui.trackers.github import GitHubTracker

    t = GitHubTracker(settings, clock=clock)
    yield t
    await t.aclose()
