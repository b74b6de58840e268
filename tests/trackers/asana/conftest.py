"""Fixtures for the Asana tracker tests: a fake clock, a started FakeAsana that checks every
request and answer against Asana's published description, settings pointing at it and an
AsanaTracker. Every test using ``fake`` ends by asserting that nothing broke the description."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from symphony_tui.config.settings import Settings, resolve_settings
from tests.helpers import SettingsBox, WallClock

TOKEN = "asana_SECRET_2/1200:5e8c0a"
PROJECT = "1200000000000100"
STATES = {"active_states": ["To do", "Doing"], "terminal_states": ["Done"]}


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def fake(clock: WallClock) -> Iterator:
    from symphony_tui_testing.fake_asana import FakeAsana

    with FakeAsana(token=TOKEN, project=PROJECT, clock=clock) as asana:
        yield asana
    assert asana.violations == [], asana.violations[:10]


def asana_settings(fake, **tracker: object) -> Settings:
    """Resolved settings for ``fake`` as the reference's Asana adapter documents them."""
    provider = {"endpoint": fake.url, "api_key": "$ASANA_TEST_PAT", "project_gid": PROJECT}
    raw = {"kind": "asana", "provider": provider, **STATES, **tracker}
    return resolve_settings({"tracker": raw}, workflow_dir=Path("."), env={"ASANA_TEST_PAT": TOKEN})


@pytest.fixture
def settings(fake) -> SettingsBox:
    return SettingsBox(asana_settings(fake))


@pytest.fixture
async def tracker(settings: SettingsBox, clock: WallClock) -> AsyncIterator:
    from symphony_tui.trackers.asana import AsanaTracker

    t = AsanaTracker(settings, clock=clock)
    yield t
    await t.aclose()
