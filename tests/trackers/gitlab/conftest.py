"""Fixtures for the GitLab tracker tests: a fake clock, a started FakeGitLab that checks every
request against GitLab's published description, settings pointing at it and a
GitLabTracker. Every test using ``fake`` ends by asserting that nothing broke the description."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from tests.helpers import SettingsBox, WallClock

TOKEN = "glpat-SECRET-7f3a9c1e5b"
PROJECT = "group/app"
STATES = {
    "state_labels": ["Todo", "In Progress", "Human Review"],
    "active_states": ["Todo", "In Progress"],
    "terminal_states": ["closed"],
}


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def fake(clock: WallClock) -> Iterator:
    from symphony_tui_testing.fake_gitlab import FakeGitLab

    with FakeGitLab(token=TOKEN, project=PROJECT, clock=clock) as gitlab:
        yield gitlab
    assert gitlab.violations == [], gitlab.violations[:10]


def gitlab_settings(fake, **tracker: object) -> Settings:
    """Resolved settings for ``fake`` as the reference's GitLab adapter documents them, with
    labels as states (``tracker`` keys override)."""
    provider = {"api_url": fake.url, "api_key": "$GITLAB_TEST_TOKEN", "project_path": PROJECT}
    raw = {"kind": "gitlab", "provider": provider, **STATES, **tracker}
    env = {"GITLAB_TEST_TOKEN": TOKEN}
    return resolve_settings({"tracker": raw}, workflow_dir=Path("."), env=env)


@pytest.fixture
def settings(fake) -> SettingsBox:
    return SettingsBox(gitlab_settings(fake))


@pytest.fixture
async def tracker(settings: SettingsBox, clock: WallClock) -> AsyncIterator:
    from symphony_tui.trackers.gitlab import GitLabTracker

    t = GitLabTracker(settings, clock=clock)
    yield t
    await t.aclose()
