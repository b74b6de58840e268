"""Quit with 50 workers: seconds from the request to the process's
exit, headless (SIGTERM) and the console (``q``, ``y`` on a pseudo-terminal), with every
worker streaming. Then quitting with a hung ``after_run`` hook (``hooks.timeout_ms`` an
hour, one run waiting for an approval): seconds from a terminal hang-up (the pty's master
closed: SIGHUP, EIO), SIGTERM (console, headless) and ``q`` ``y`` to the exit; with
``--before REF`` the scheduler of that commit too, in a column beside this tree's.

``python -m tests.bench.bench_quit [--workers 50] [--rate 200] [--before REF] [--hung-only]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.bench._common import figure
from tests.bench._flood import Api, ConsoleOnPty, FloodProject, checkout

HUNG_MODES = ("hang-up", "SIGTERM", "q y", "SIGTERM headless")


def run(workers: int = 50, rate: float = 200.0) -> None:
    print(f"== quit with {workers} streaming workers")
    project = FloodProject(workers, rate=rate)
    try:
        project.start()
        project.wait_running(Api(project.port), workers)
        time.sleep(2.0)
        figure("quit headless (SIGTERM)", project.stop(), "s", "< 5 s")
    finally:
        project.stop()
        project.cleanup()
    project = FloodProject(workers, rate=rate)
    console = ConsoleOnPty(project)
    try:
        project.wait_running(Api(project.port), workers)
        time.sleep(2.0)
        figure("quit the console (q, y)", console.quit(), "s", "< 5 s")
    finally:
        console.close()
        project.cleanup()


def quit_with_a_hung_hook(mode: str, tree: Path | None) -> float:
    """Seconds from ``mode`` (one of :data:`HUNG_MODES`) to the exit of the scheduler of
    ``tree`` (None: this one), its one run waiting for an approval and its ``after_run``
    hung; ``inf`` when it did not exit within two minutes. A hang-up ends only the console
    where the scheduler outlives it (docs/architecture.md "Detaching"): the figure is then
    the console's exit, and ``symphony-tui stop`` ends the scheduler afterwards."""
    from tests.console.test_hangup_e2e import (
        Console,
        Project,
        end_hook_left_behind,
        stop_command,
    )

    root = Path(tempfile.mkdtemp(prefix="symphony-hung-hook-"))
    project = Project(root, tree)
    try:
        if mode == "SIGTERM headless":
            proc = subprocess.Popen(
                [*project.argv(), "--headless"],
                cwd=root,
                env=project.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                project.wait_for_approval()
                t0 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
                return time.monotonic() - t0
            except subprocess.TimeoutExpired:
                return float("inf")
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        console = Console(project)
        try:
            project.wait_for_approval()
            t0 = time.monotonic()
            if mode == "hang-up":
                console.hang_up()
            elif mode == "SIGTERM":
                console.proc.send_signal(signal.SIGTERM)
            else:
                console.press(b"q")
                time.sleep(0.5)
                console.press(b"y")
                t0 += 0.5  # from the confirmation, as bench_soak counts it
            console.proc.wait(timeout=120)
            return time.monotonic() - t0
        except subprocess.TimeoutExpired:
            return float("inf")
        finally:
            console.close()
            if mode == "hang-up":
                stop_command(project)  # the scheduler runs on after a hang-up: end it
    finally:
        end_hook_left_behind(project)
        shutil.rmtree(root, ignore_errors=True)


def hung_hook(before_ref: str = "") -> None:
    """Print the seconds to exit per :data:`HUNG_MODES`, beside an earlier commit's."""
    print("== quit with a hung after_run hook (hooks.timeout_ms an hour)")
    print(f"load average before: {os.getloadavg()}")
    before_root = checkout(before_ref) if before_ref else None
    try:
        if before_root is not None:
            print(f"{'':<52} {before_ref[:12]:>12} {'this tree':>12}")
        for mode in HUNG_MODES:
            after = quit_with_a_hung_hook(mode, None)
            if before_root is None:
                figure(f"exit after {mode}, hung hook", after, "s", "< 5 s")
                continue
            before = quit_with_a_hung_hook(mode, before_root)
            print(f"{'exit after ' + mode + ', hung hook (s)':<52} {before:>12.2f} {after:>12.2f}")
    finally:
        if before_root is not None:
            shutil.rmtree(before_root, ignore_errors=True)
    print(f"load average now: {os.getloadavg()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--before", default="", help="also measure this commit's hung-hook quit")
    p.add_argument("--hung-only", action="store_true", help="only the hung-hook figures")
    a = p.parse_args()
    if not a.hung_only:
        run(a.workers, a.rate)
    hung_hook(a.before)


if __name__ == "__main__":
    main()
