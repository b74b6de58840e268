"""Spec §17.1 / §6.2: reload on change, last-known-good on invalid reloads, file watching."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.store import WorkflowStore

GOOD = "---\ntracker:\n  kind: local\npolling:\n  interval_ms: {ms}\n---\nPrompt {n}\n"


def test_load_initial_raises_so_startup_fails(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path / "WORKFLOW.md")
    with pytest.raises(WorkflowError):
        store.load_initial()
    with pytest.raises(RuntimeError):
        _ = store.current


def test_workflow_file_changes_are_detected_and_reapplied(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    store = WorkflowStore(path)
    store.load_initial()
    assert store.reload_if_changed() is False
    path.write_text(GOOD.format(ms=2000, n=2))
    assert store.reload_if_changed() is True
    assert store.current.settings.polling.interval_ms == 2000
    assert store.current.prompt_template == "Prompt 2"
    assert store.error is None
    assert store.reload_if_changed() is False


def test_invalid_reload_keeps_last_known_good_and_sets_an_error(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    store = WorkflowStore(path)
    good = store.load_initial()
    # Valid YAML, invalid settings.
    path.write_text("---\npolling:\n  interval_ms: soon\n---\nPrompt\n")
    assert store.reload_if_changed() is False
    assert store.current is good
    assert store.current.settings.polling.interval_ms == 1000
    assert store.error is not None
    assert store.error.startswith("invalid_settings: polling.interval_ms: Input should be")
    # The same bad content again changes nothing.
    assert store.reload_if_changed() is False
    assert store.error.startswith("invalid_settings")
    # Broken YAML replaces the error message; good settings still stand.
    path.write_text("---\npolling: [\n---\n")
    assert store.reload_if_changed() is False
    assert store.error.startswith("workflow_parse_error")
    assert store.current is good
    # A prompt with an unknown variable: the last good prompt stays in use.
    path.write_text("---\npolling:\n  interval_ms: 5\n---\n{{ issue.titel }}\n")
    assert store.reload_if_changed() is False
    assert store.error == "template_render_error: issue.titel is undefined (line 5)"
    assert store.current is good
    # A good file clears the error.
    path.write_text(GOOD.format(ms=3000, n=3))
    assert store.reload_if_changed() is True
    assert store.error is None
    assert store.current.settings.polling.interval_ms == 3000


def test_reverting_to_the_current_content_clears_the_error(write_workflow) -> None:
    text = GOOD.format(ms=1000, n=1)
    path = write_workflow(text)
    store = WorkflowStore(path)
    store.load_initial()
    path.write_text("---\n- not a map\n---\n")
    store.reload_if_changed()
    assert store.error and store.error.startswith("workflow_front_matter_not_a_map")
    path.write_text(text)
    assert store.reload_if_changed() is False
    assert store.error is None


def test_deleted_file_keeps_last_good_with_an_error(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    store = WorkflowStore(path)
    store.load_initial()
    path.unlink()
    assert store.reload_if_changed() is False
    assert store.error and store.error.startswith("missing_workflow_file")
    assert store.current.settings.polling.interval_ms == 1000
    path.write_text(GOOD.format(ms=1000, n=1))
    store.reload_if_changed()
    assert store.error is None


async def _next(queue: asyncio.Queue) -> object:
    return await asyncio.wait_for(queue.get(), timeout=15)


async def test_watch_reloads_on_change_and_survives_replacing_editors(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    (path.parent / "unrelated.txt").write_text("x")
    store = WorkflowStore(path)
    store.load_initial()
    seen: asyncio.Queue = asyncio.Queue()
    ready = asyncio.Event()
    task = asyncio.create_task(
        store.watch(
            lambda: seen.put_nowait((store.current.settings.polling.interval_ms, store.error)),
            ready=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), timeout=15)
        assert seen.empty()
        path.write_text(GOOD.format(ms=2000, n=2))
        assert await _next(seen) == (2000, None)

        # An editor that writes a temp file and renames it over the original.
        tmp = path.with_name(".WORKFLOW.md.swp")
        tmp.write_text(GOOD.format(ms=3000, n=3))
        os.replace(tmp, path)
        assert await _next(seen) == (3000, None)

        path.write_text("---\npolling:\n  interval_ms: soon\n---\n")
        ms, error = await _next(seen)
        assert ms == 3000 and error and error.startswith("invalid_settings")
        (path.parent / "unrelated.txt").write_text("y")
        path.write_text(GOOD.format(ms=4000, n=4))
        assert await _next(seen) == (4000, None)
        assert seen.empty()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watch_survives_a_failing_callback(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    store = WorkflowStore(path)
    store.load_initial()
    calls: asyncio.Queue = asyncio.Queue()

    def on_change() -> None:
        calls.put_nowait(store.current.settings.polling.interval_ms)
        raise RuntimeError("consumer bug")

    ready = asyncio.Event()
    task = asyncio.create_task(store.watch(on_change, ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=15)
        path.write_text(GOOD.format(ms=2000, n=2))
        assert await _next(calls) == 2000
        path.write_text(GOOD.format(ms=5000, n=5))
        assert await _next(calls) == 5000
        assert not task.done()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_change_before_the_watcher_is_armed_is_not_lost(write_workflow) -> None:
    path = write_workflow(GOOD.format(ms=1000, n=1))
    store = WorkflowStore(path)
    store.load_initial()
    path.write_text(GOOD.format(ms=7000, n=7))
    seen: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(
        store.watch(lambda: seen.put_nowait(store.current.settings.polling.interval_ms))
    )
    try:
        assert await _next(seen) == 7000
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
