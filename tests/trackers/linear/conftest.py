"""Fixtures for the Linear tracker tests: a fake clock, a started FakeLinear, settings that
point at it, and a LinearTracker reading those settings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui_testing.fake_linear import FakeLinear
from tests.helpers import SettingsBox, WallClock

API_KEY = "lin_api_SECRET_7c2f4e9a1b3d5f60"


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def fake(clock: WallClock) -> Iterator[FakeLinear]:
    with FakeLinear(api_key=API_KEY, clock=clock) as linear:
        yield linear


def linear_settings(fake: FakeLinear, **tracker: object) -> Settings:
    raw = {
        "kind": "linear",
        "endpoint": fake.url,
        "api_key": API_KEY,
        "project_slug": fake.project_slug,
        **tracker,
    }
    return Settings.model_validate({"tracker": raw})


@pytest.fixture
def settings(fake: FakeLinear) -> SettingsBox:
    return SettingsBox(linear_settings(fake))


@pytest.fixture
async def tracker(settings: SettingsBox, clock: WallClock) -> AsyncIterator[LinearTracker]:
    t = LinearTracker(settings, clock=clock)
    yield t
    await t.aclose()
