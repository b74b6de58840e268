"""After start-up the heap built so far is frozen out of the collector's scans (issue 11)."""

from __future__ import annotations

import gc
import logging

from symphony_tui.cli import main

from .conftest import write_project


def test_headless_start_freezes_the_startup_heap(tmp_path, monkeypatch):
    project = write_project(tmp_path / "project", [])  # nothing to run: exits when idle
    monkeypatch.chdir(project.folder)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    gc.unfreeze()
    try:
        code = main(["--headless", "--exit-when-idle", "--no-lock", "--log-dir", str(tmp_path)])
        assert code == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        for handler in set(root.handlers) - set(handlers):  # the run's log file
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
