"""Console test fixtures: fixed data, frozen clock, UTC wall clock, no cursor blink."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from syrupy.extensions.image import SVGImageSnapshotExtension

from symphony_tui.console.app import SymphonyApp
from tests.console.fake_port import FakePort
from tests.console.sample import NOW, sample_port


@pytest.fixture(autouse=True)
def _fixed_environment(monkeypatch: pytest.MonkeyPatch):
    # log lines show local HH:MM:SS; pin the zone so screenshots do not depend on the host
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("NO_COLOR", raising=False)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def svg_snapshot(snapshot):
    """Screenshots compared as SVG files under ``__snapshots__``."""
    return snapshot.use_extension(SVGImageSnapshotExtension)


@pytest.fixture
def port() -> FakePort:
    return sample_port()


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., SymphonyApp]:
    def make(port: FakePort, **kwargs) -> SymphonyApp:
        kwargs.setdefault("keymap_path", tmp_path / "no-keymap.toml")
        kwargs.setdefault("clock", lambda: NOW)
        kwargs.setdefault("cursor_blink", False)
        # streamed text repaints on every tick (the once-a-second rate has its own tests)
        kwargs.setdefault("live_text_s", 0.0)
        return SymphonyApp(port, **kwargs)

    return make
