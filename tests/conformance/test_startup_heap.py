"""After start-up the heap built so far is frozen out of the collector's scans."""

from __future__ import annotations

import argparse
import gc
import logging

import pytest

from symphony_tui.cli import main

from .conftest import write_project


@pytest.fixture(autouse=True)
def _root_logging():
    """Each start-up adds its log file to the root logger: remove it and restore the level."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in set(root.handlers) - set(handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


def test_headless_start_freezes_the_startup_heap(tmp_path, monkeypatch):
    project = write_project(tmp_path / "project", [])  # nothing to run: exits when idle
    monkeypatch.chdir(project.folder)
    gc.unfreeze()
    try:
        code = main(["--headless", "--exit-when-idle", "--no-lock", "--log-dir", str(tmp_path)])
        assert code == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_no_collection_during_start_up_and_collector_back_on_after(tmp_path, monkeypatch):
    import symphony_tui.runtime as runtime_module

    project = write_project(tmp_path / "project", [])
    monkeypatch.chdir(project.folder)
    seen = []
    real = runtime_module.build_runtime

    def build(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime_module, "build_runtime", build)
    try:
        code = main(["--headless", "--exit-when-idle", "--no-lock", "--log-dir", str(tmp_path)])
        assert code == 0
        assert seen == [False]  # start-up ran with the collector off
        assert gc.isenabled()
        monkeypatch.setattr(runtime_module, "build_runtime", _fails)
        assert main(["--headless", "--no-lock", "--log-dir", str(tmp_path)]) != 0
        assert gc.isenabled()  # a failed start-up turns it back on too
    finally:
        gc.enable()
        gc.unfreeze()


def _fails(*args, **kwargs):
    from symphony_tui.scheduler.orchestrator import StartupError

    assert not gc.isenabled()
    raise StartupError("no start-up today")


def test_start_up_runs_no_full_collection_before_the_freeze(tmp_path, monkeypatch):
    """The freeze keeps start-up's little garbage rather than scan the whole import heap
    once more right before the first frame (80-100 ms of CPU)."""
    project = write_project(tmp_path / "project", [])
    monkeypatch.chdir(project.folder)
    unfrozen_collections = []

    def watch(phase: str, info: dict) -> None:
        # A full pass (generation 2) is the one that scans the whole import heap; the young
        # generations' passes while the parser is built are cheap and not what this guards.
        if phase == "start" and gc.get_freeze_count() == 0 and info["generation"] == 2:
            unfrozen_collections.append(info["generation"])

    gc.unfreeze()
    gc.callbacks.append(watch)
    try:
        code = main(["--headless", "--exit-when-idle", "--no-lock", "--log-dir", str(tmp_path)])
        assert code == 0
        assert gc.get_freeze_count() > 0
        assert unfrozen_collections == []
    finally:
        gc.callbacks.remove(watch)
        gc.unfreeze()


def test_a_console_attaching_to_the_running_scheduler_runs_with_the_collector_on(
    tmp_path, monkeypatch
):
    """``symphony-tui WORKFLOW.md`` for a project whose scheduler runs builds none of its
    own: the collector, off during start-up, is on while it is attached (off, its cyclic
    garbage grew it by about 40 MB a minute with 8 issues re-dispatched all the time)."""
    import symphony_tui.cli as cli
    import symphony_tui.console.app as app_module
    import symphony_tui.detach as detach

    seen = []

    def build(*args, **kwargs):
        raise cli._AlreadyRunning("project_locked: another scheduler (pid 1)", {"pid": 1})

    async def attach(found, attachments, path):
        return "attached"

    class App:  # the console's app, reduced to its start-up
        detached = start_error = failed = None
        return_code = 0

        def __init__(self, *, start, **kwargs):
            self.start = start

        async def run_async(self):
            assert await self.start() == "attached"
            seen.append(gc.isenabled())

    monkeypatch.setattr(detach, "hold_terminal", lambda: None)  # no fork
    monkeypatch.setattr(cli, "_build", build)
    monkeypatch.setattr(cli, "_attach_to_running", attach)
    monkeypatch.setattr(app_module, "SymphonyApp", App)
    args = argparse.Namespace(log_dir=tmp_path, log_level="info", headless=False)
    gc.unfreeze()
    try:
        assert cli._run(tmp_path / "WORKFLOW.md", args, lock=True, detachable=True) == 0
        assert seen == [True]
    finally:
        gc.enable()
        gc.unfreeze()
