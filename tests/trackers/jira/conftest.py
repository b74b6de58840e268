"""Fixtures for the Jira tracker tests: a fake clock, a started FakeJira that checks every
request and answer against Atlassian's published description, settings pointing at it and a
JiraTracker. Every test using ``fake`` ends by asserting that nothing broke the description."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from tests.helpers import SettingsBox, WallClock

TOKEN = "jira_SECRET_9c2e41b7d05a"
EMAIL = "bot@example.com"
PROJECT = "SD"


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def fake(clock: WallClock) -> Iterator:
    from symphony_tui_testing.fake_jira import FakeJira

    with FakeJira(email=EMAIL, token=TOKEN, project=PROJECT, clock=clock) as jira:
        yield jira
    assert jira.violations == [], jira.violations[:10]


def jira_settings(fake, **tracker: object) -> Settings:
    """Resolved settings for ``fake`` as the reference's Jira adapter documents them."""
    provider = {
        "base_url": fake.url,
        "email": EMAIL,
        "api_token": "$JIRA_TEST_TOKEN",
        "project_key": PROJECT,
    }
    raw = {"kind": "jira", "provider": provider, **tracker}
    return resolve_settings(
        {"tracker": raw}, workflow_dir=Path("."), env={"JIRA_TEST_TOKEN": TOKEN}
    )


@pytest.fixture
def settings(fake) -> SettingsBox:
    return SettingsBox(jira_settings(fake))


@pytest.fixture
async def tracker(settings: SettingsBox, clock: WallClock) -> AsyncIterator:
    from symphony_tui.trackers.jira import JiraTracker

    t = JiraTracker(settings, clock=clock)
    yield t
    await t.aclose()
