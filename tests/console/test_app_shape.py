"""The console's App is one class in one file: its behaviour comes from helpers it builds
(console/app.py), not from base classes spread over other modules."""

from __future__ import annotations

import inspect

from symphony_tui.console.app import SymphonyApp
from symphony_tui.console.ui import Ui


def test_the_app_inherits_from_textual_only():
    project = [c.__qualname__ for c in SymphonyApp.__mro__ if c.__module__.startswith("symphony")]
    assert project == ["SymphonyApp"]
    assert inspect.getsourcefile(SymphonyApp).endswith("symphony_tui/console/app.py")


def test_the_app_offers_everything_its_helpers_use():
    """Helpers reach the app as ``Ui`` only; each of its names is the app's (or Textual's)."""
    wanted = sorted(n for n in vars(Ui) if not n.startswith("_"))
    assert "launch" in wanted and "handed_over" in wanted
    assert [n for n in wanted if not callable(getattr(SymphonyApp, n, None))] == []
