"""Fixtures for the Linear tracker tests: a fake clock, a started FakeLinear, settings that
point at it, and a LinearTracker reading those settings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.linear import LinearTracker
from symphony_tui_testing.fake_linear import FakeLinear

API_KEY = "lin_api_SECRET_7c2f4e9a1b3d5f60"


class FakeClock:
    """Aware UTC time that moves only when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class SettingsBox:
    """Mutable holder so a test can 'reload' settings; the tracker calls it every request."""

    def __init__(self, settings: Settings) -> None:
        self.value = settings

    def __call__(self) -> Settings:
        return self.value

    def update(self, **tracker: object) -> None:
        self.value = self.value.model_copy(
            update={"tracker": self.value.tracker.model_copy(update=tracker)}
        )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeLinear]:
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
async def tracker(settings: SettingsBox, clock: FakeClock) -> AsyncIterator[LinearTracker]:
    t = LinearTracker(settings, clock=clock)
    yield t
    await t.aclose()
