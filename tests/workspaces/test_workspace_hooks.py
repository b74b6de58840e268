"""Spec §9.4 hook execution: bash -lc in the workspace, timeouts kill the group, output tail."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from symphony_tui.workspaces.hooks import OUTPUT_LIMIT, run_hook


async def test_hook_runs_in_cwd_with_bash_and_env(tmp_path: Path) -> None:
    result = await run_hook(
        "after_create",
        'echo "cwd=$PWD"; echo "id=$SYMPHONY_ISSUE_ID"; echo err >&2; [[ -n "$BASH_VERSION" ]]',
        tmp_path,
        10_000,
        env={"SYMPHONY_ISSUE_ID": "i-1"},
    )
    assert result.ok and result.exit_code == 0 and not result.timed_out
    assert f"cwd={tmp_path}" in result.output
    assert "id=i-1" in result.output and "err" in result.output
    assert result.summary() == "ok"


async def test_failing_hook_is_a_result_not_an_exception(tmp_path: Path) -> None:
    result = await run_hook("before_run", "echo nope; exit 3", tmp_path, 10_000)
    assert not result.ok and result.exit_code == 3 and not result.timed_out
    assert result.output.strip() == "nope"
    assert result.summary() == "exit 3"


async def test_missing_cwd_fails_to_start(tmp_path: Path) -> None:
    result = await run_hook("before_run", "true", tmp_path / "gone", 10_000)
    assert not result.ok and result.exit_code is None
    assert "cannot start hook" in result.output


async def test_hook_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # A grandchild that ignores SIGTERM must still die (SIGKILL follows).
    script = f"(trap '' TERM; sleep 300) & echo $! > {pidfile}; wait"
    result = await run_hook("before_run", script, tmp_path, 2000)
    assert result.timed_out and not result.ok and result.exit_code is None
    assert "timed out" in result.summary()
    assert await _becomes_dead(int(pidfile.read_text()))


async def _becomes_dead(pid: int) -> bool:
    # Signal delivery is asynchronous and there is no event to await for another
    # process's death, so poll /proc for a bounded time.
    for _ in range(500):
        if _dead(pid):
            return True
        await asyncio.sleep(0.01)
    return False


def _dead(pid: int) -> bool:
    # A killed child of an already-dead shell may linger as a zombie until reaped.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


async def test_huge_output_keeps_only_a_truncated_tail(tmp_path: Path) -> None:
    script = "head -c 20000000 /dev/zero | tr '\\0' 'a'; echo; echo THE-END"
    result = await run_hook("after_run", script, tmp_path, 60_000)
    assert result.ok
    assert result.output.startswith("[... ")
    assert "bytes truncated ...]" in result.output
    assert result.output.rstrip().endswith("THE-END")
    assert len(result.output.encode()) < OUTPUT_LIMIT + 100


async def test_background_child_holding_the_pipe_does_not_hang_the_hook(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    result = await run_hook(
        "after_run", f"sleep 300 & echo $! > {pidfile}; echo done", tmp_path, 30_000
    )
    assert result.ok and "done" in result.output
    assert _dead(int(pidfile.read_text()))  # ended with its hook


@pytest.mark.parametrize("status", [0, 3])
async def test_nothing_the_hook_left_in_its_group_outlives_it(tmp_path: Path, status) -> None:
    """A hook that returns, ok or not, leaves nothing running: ``sleep 3101 &`` and a
    child that ignores SIGTERM are ended before the result is returned."""
    script = (
        f"sleep 3101 & echo $! > {tmp_path}/a.pid; "
        f"(trap '' TERM; sleep 3102) & echo $! > {tmp_path}/b.pid; exit {status}"
    )
    result = await run_hook("before_run", script, tmp_path, 30_000)
    assert result.ok == (status == 0) and result.exit_code == status
    for name in ("a.pid", "b.pid"):
        assert _dead(int((tmp_path / name).read_text()))


async def test_cancelling_the_caller_kills_the_hook(tmp_path: Path) -> None:
    pidfile = tmp_path / "c.pid"
    started = tmp_path / "started"
    task = asyncio.create_task(
        run_hook(
            "before_run",
            f"sleep 300 & echo $! > {pidfile}; touch {started}; wait",
            tmp_path,
            60_000,
        )
    )
    while not started.exists():  # the hook signals readiness through the filesystem
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _becomes_dead(int(pidfile.read_text()))


async def test_invalid_utf8_output_is_replaced(tmp_path: Path) -> None:
    result = await run_hook("after_run", "printf 'ok\\xff\\xfe\\n'", tmp_path, 10_000)
    assert result.ok and result.output.startswith("ok\ufffd")


async def test_registered_secrets_are_masked_in_hook_output(tmp_path: Path) -> None:
    from symphony_tui.observability.redact import default_redactor, register_secret

    register_secret("hook-secret-value-991")
    try:
        result = await run_hook("after_run", "echo token hook-secret-value-991", tmp_path, 10_000)
    finally:
        default_redactor().clear()
    assert "hook-secret-value-991" not in result.output and "***" in result.output


async def test_cancelling_the_caller_gives_the_hook_a_sigterm_first(tmp_path):
    """Stop and shutdown cancel a running hook: its TERM trap still runs (then SIGKILL)."""
    import asyncio

    from symphony_tui.workspaces.hooks import run_hook

    marker = tmp_path / "trap-ran"
    ready = tmp_path / "trap-set"
    script = f"trap 'echo cleaned > {marker}; exit 0' TERM; touch {ready}; sleep 30 & wait"
    task = asyncio.ensure_future(
        run_hook("after_create", script, tmp_path, 60_000, env={"HOME": str(tmp_path)})
    )
    for _ in range(1000):  # until the trap is installed (bounded: 10 s)
        if ready.exists():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert marker.read_text().strip() == "cleaned"
