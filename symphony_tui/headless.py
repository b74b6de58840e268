"""Run the scheduler without the console (``--headless``).

With ``exit_when_idle`` the process ends once nothing is running, retrying or eligible and
prints the final state as one JSON line shaped like the spec's ``/api/v1/state`` (§13.7.2)
plus ``completed``; it gives up with exit code 1 when the tracker refuses its credentials
while nothing runs (no poll can succeed before the key changes). Approvals follow ``agent.approvals``; with ``operator`` they wait for
an operator on the HTTP API (or time out after ``agent.approval_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

from symphony_tui.runtime import Runtime
from symphony_tui.text import one_line

IDLE_POLL_S = 0.2


def _signalled(name: str) -> str:
    """What the stop signal ``name`` means (``schedulers_command.stop_reason``)."""
    from symphony_tui.schedulers_command import stop_reason

    return stop_reason(name)


def say(line: str) -> None:
    """One line on stderr; a terminal that hung up (EIO) is not an error of the exit."""
    with contextlib.suppress(OSError, ValueError):
        print(f"symphony-tui: {one_line(line)}", file=sys.stderr, flush=True)


async def run_headless(
    runtime: Runtime, *, exit_when_idle: bool = False, out: TextIO | None = None
) -> int:
    """Returns the process exit code: 0 after a normal stop or when idle, 1 when
    ``exit_when_idle`` gave up on refused tracker credentials."""
    orch = runtime.orchestrator
    out = out or sys.stdout
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    caught: list[str] = []  # the stop signal's name

    def stop_on(sig: signal.Signals) -> None:
        caught.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop_on, sig)
        except (NotImplementedError, RuntimeError):
            pass
    shown: dict[str, str | None] = {"config": None, "tracker": None}

    def report_problems() -> None:
        # No console to show them: the operator reads stderr (one line when they change).
        # Read from the state, not a snapshot: at 200 flooding workers a snapshot build
        # five times a second costs 5 % of the scheduler's CPU (py-spy, bench_flood).
        config_error, tracker_error = orch.problems
        for key, value in (("config", config_error), ("tracker", tracker_error)):
            if value != shown[key]:
                shown[key] = value
                what = f"{key} error: {value}" if value else f"{key} error cleared"
                print(f"symphony-tui: {one_line(what)}", file=sys.stderr, flush=True)

    code = 0
    try:
        await orch.start()
        while not stop.is_set():
            report_problems()
            if exit_when_idle:
                if orch.idle:
                    break
                if orch.tracker_refused and not orch.snapshot().running:
                    print(
                        "symphony-tui: the tracker refused its credentials; "
                        "--exit-when-idle gives up (fix the key and run again)",
                        file=sys.stderr,
                        flush=True,
                    )
                    code = 1
                    break
                if orch.needs_tick_for_idle:
                    orch.request_refresh()
            try:
                await asyncio.wait_for(stop.wait(), timeout=IDLE_POLL_S)
            except TimeoutError:
                pass
    finally:
        # workers stopped: the state printed below shows them ended
        await runtime.close(_signalled(caught[0]) if caught else None)
        for line in orch.hooks_cut_short:
            say(line)
        snapshot = orch.snapshot()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    out.write(json.dumps(snapshot.state_payload()) + "\n")
    out.flush()
    return code


async def run_on_detached(
    runtime: Runtime, scheduler: asyncio.Future, stop_api: Callable[[str], Awaitable[object]]
) -> int:
    """The console left (detached) and the scheduler it embedded runs on headless in this
    process until SIGTERM / SIGINT (``symphony-tui stop``) or its own end; SIGHUP is
    ignored (there is no terminal). Then ``stop_api(reason)`` (one line for attached
    consoles) and the usual shutdown (the hooks' grace included). Returns the exit code
    (0)."""
    import logging

    from symphony_tui.observability.logs import log_kv

    log = logging.getLogger("symphony_tui")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    caught: list[str] = []

    def stop_on(sig: signal.Signals) -> None:
        caught.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_on, sig)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, scheduler}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    reason = _signalled(caught[0]) if caught else "the scheduler ended"
    log_kv(log, "info", "headless scheduler stopping", reason=reason)
    try:
        await stop_api(reason)
    finally:
        await runtime.close(reason)
    for line in runtime.orchestrator.hooks_cut_short:
        say(line)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await scheduler
    return 0
