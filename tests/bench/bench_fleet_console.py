"""The fleet console on a pseudo-terminal against the one-scheduler console at the same total
activity: ``--schedulers`` N headless schedulers (the real CLI, :mod:`tests.bench._flood`'s
scripted codex agents) with ``--workers`` M streaming workers each, watched by ``symphony-tui
fleet http://... x N``; then one headless scheduler with N x M workers watched by
``symphony-tui attach http://...``. Both consoles only read and draw (their schedulers run
apart), so the figures are the console's own.

Prints for each: the console's CPU (% of one core) and RSS over ``--window`` seconds, the
bytes it wrote to the terminal per second, and key-to-screen: ``?`` pressed until the help
screen's ``esc to close`` reaches the terminal, p50/p99 over ``--keys`` presses.

``python -m tests.bench.bench_fleet_console --schedulers 6 --workers 10`` (figures, no
asserts). The schedulers and their agents run at ``--nice`` (10), as processes and as
sessions (:func:`nice_all`), so the console's figures are its own on a small machine too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tests.bench._common import figure
from tests.bench._flood import Api, ConsoleOnPty, FloodProject, percentile, rss_mb

ANSI = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>78])")
MARK = b"esc to close"
CURSOR_TO = re.compile(rb"\x1b\[(\d*)(?:;\d*)?H")
STARTED: list[FloodProject] = []


class WatchedConsole(ConsoleOnPty):
    """:class:`ConsoleOnPty` that also keeps the tail of what it drew (escape sequences
    removed), so a key's effect can be waited for."""

    def __init__(self, project: FloodProject, argv: list[str], cols: int, rows: int) -> None:
        self.tail = b""
        self.lock = threading.Lock()
        #: bytes written while the cursor was on each screen line (0-based), from the
        #: cursor positionings (``CSI row;col H``) the console writes before each update
        self.by_line = [0] * rows
        self._line = 0
        self._partial = b""
        super().__init__(project, cols, rows, argv=argv)

    def _took(self, chunk: bytes) -> None:
        with self.lock:
            self.tail = (self.tail + chunk)[-200_000:]
            data, self._partial = self._partial + chunk, b""
            at = 0
            for move in CURSOR_TO.finditer(data):
                self._count(move.start() - at)
                self._line = int(move.group(1) or 1) - 1
                at = move.start()
            cut = data.rfind(b"\x1b", at)
            if cut > at and CURSOR_TO.match(data, cut) is None and len(data) - cut < 16:
                self._partial = data[cut:]  # a positioning split across two reads
                data = data[:cut]
            self._count(len(data) - at)

    def _count(self, n: int) -> None:
        if 0 <= self._line < len(self.by_line):
            self.by_line[self._line] += n

    def lines_per_s(self, since: list[int], wall: float) -> str:
        """Each screen line's share of the output since ``since`` (a copy of
        :attr:`by_line`), as ``line:KB/s`` for the lines over 0.1 KB/s."""
        with self.lock:
            rates = [(b - a) / wall / 1024 for a, b in zip(since, self.by_line, strict=True)]
        return " ".join(f"{i + 1}:{r:.1f}" for i, r in enumerate(rates) if r >= 0.1)

    def seen(self) -> bool:
        with self.lock:
            return MARK in ANSI.sub(b"", self.tail)

    def key_to_screen(self, key: bytes, timeout_s: float = 30.0) -> float:
        """Seconds from writing ``key`` until the help screen's mark is drawn."""
        with self.lock:
            self.tail = b""
        t0 = time.monotonic()
        self.press(key)
        while not self.seen():
            if time.monotonic() - t0 > timeout_s:
                return float("inf")
            time.sleep(0.002)
        return time.monotonic() - t0


def console_cpu(pid: int) -> float:
    """CPU seconds of the console process and any children it has."""
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def measure(what: str, console: WatchedConsole, window: float, keys: int) -> None:
    pid = console.proc.pid
    cpu0, b0, t0 = console_cpu(pid), console.bytes, time.monotonic()
    with console.lock:
        lines0 = list(console.by_line)
    rss: list[float] = []
    while time.monotonic() - t0 < window:
        time.sleep(1.0)
        rss.append(rss_mb(pid))
        if console.proc.poll() is not None:
            raise RuntimeError(f"the {what} console exited ({console.proc.returncode})")
    wall = time.monotonic() - t0
    figure(f"{what}: console CPU (% of one core)", (console_cpu(pid) - cpu0) / wall * 100, "%")
    figure(f"{what}: console RSS (max)", max(rss), "MB")
    figure(f"{what}: terminal output", (console.bytes - b0) / wall / 1024, "KB/s")
    print(f"{what}: output by screen line (line:KB/s) {console.lines_per_s(lines0, wall)}")
    took = []
    for _ in range(keys):
        took.append(console.key_to_screen(b"?") * 1000)
        console.press(b"\x1b")  # close the help screen, let it settle
        time.sleep(0.7)
    figure(f"{what}: key-to-screen p50 (? -> help drawn)", percentile(took, 50), "ms")
    figure(f"{what}: key-to-screen p99", percentile(took, 99), "ms")


NICE = 10


def start(workers: int, rate: float, turn_s: float) -> FloodProject:
    """A headless scheduler with ``workers`` streaming agents, at ``NICE`` (see
    :func:`keep_nice`)."""
    # turns of different lengths: agents released together (one scheduler's thousand)
    # would otherwise all end their turns together, their events in one burst every
    # ``turn_s``, and the two consoles' logs would scroll at different rates
    project = FloodProject(workers, rate=rate, turn_s=turn_s, turn_jitter=0.5, max_turns=1000)
    STARTED.append(project)
    proc = project.start()
    os.setpriority(os.PRIO_PROCESS, proc.pid, NICE)
    return project


def nice_all(pids: list[int]) -> None:
    """``NICE`` for each process and its descendants, as a process and as a session: with
    the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) every
    session shares the CPU equally whatever its processes' nice values, and the scheduler
    and each agent run in sessions of their own. Without this, twenty schedulers' sessions
    left the console a twentieth of the machine. Best effort (the autogroup file needs the
    owner or root)."""
    for pid in pids:
        try:
            family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            continue
        for proc in family:
            with contextlib.suppress(OSError, psutil.Error):
                if proc.nice() != NICE:
                    proc.nice(NICE)
            with contextlib.suppress(OSError):
                Path(f"/proc/{proc.pid}/autogroup").write_text(f"{NICE}\n")


def keep_nice(stop: threading.Event) -> None:
    """Every two seconds until ``stop``: :func:`nice_all` over every scheduler started (new
    agents start in new sessions), so on a small machine the console measured is not
    starved by the schedulers and agents it watches, which a real fleet runs elsewhere."""
    while not stop.wait(2.0):
        nice_all([p.proc.pid for p in STARTED if p.proc is not None])


def run(
    schedulers: int,
    workers: int,
    rate: float,
    turn_s: float,
    window: float,
    keys: int,
    size: tuple[int, int],
    fleet_only: bool = False,
) -> None:
    cols, rows = size
    python = [sys.executable, "-m", "symphony_tui"]
    print(f"== fleet: {schedulers} schedulers x {workers} workers, {rate:g} lines/s each")
    projects = []
    for _ in range(schedulers):  # one at a time: a thousand agents' launches all at once
        project = start(workers, rate, turn_s)  # starve the schedulers' start-up
        project.wait_running(Api(project.port), workers, timeout_s=600.0)
        projects.append(project)
    urls = [f"http://127.0.0.1:{p.port}" for p in projects]
    fleet = WatchedConsole(projects[0], [*python, "fleet", *urls], cols, rows)
    try:
        time.sleep(10.0)  # every project live, the first frames drawn
        measure(f"fleet {schedulers}x{workers}", fleet, window, keys)
    finally:
        fleet.close()
        for project in projects:
            project.stop()
            project.cleanup()
    if fleet_only:
        return
    total = schedulers * workers
    print(f"== one scheduler: {total} workers, {rate:g} lines/s each")
    single = start(total, rate, turn_s)
    try:
        single.wait_running(Api(single.port), total, timeout_s=1800.0)
        url = f"http://127.0.0.1:{single.port}"
        console = WatchedConsole(single, [*python, "attach", url], cols, rows)
        try:
            time.sleep(10.0)
            measure(f"single 1x{total}", console, window, keys)
        finally:
            console.close()
    finally:
        single.stop()
        single.cleanup()


def main() -> None:
    global NICE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedulers", type=int, default=6)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--rate", type=float, default=10.0, help="lines/s per agent")
    parser.add_argument("--turn-s", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--size", default="120x36", help="COLSxROWS of the terminal")
    parser.add_argument(
        "--nice", type=int, default=NICE, help="niceness of the schedulers and their agents"
    )
    parser.add_argument("--fleet-only", action="store_true", help="skip the one-scheduler run")
    args = parser.parse_args()
    NICE = args.nice
    cols, rows = (int(n) for n in args.size.split("x"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below runs
    with tempfile.TemporaryDirectory(prefix="bench-fleet-console-") as root:
        os.environ["XDG_STATE_HOME"] = str(Path(root) / "state")
        # a private HOME: each agent's ``bash -lc`` runs no login profile of this machine's
        (Path(root) / "home").mkdir()
        os.environ["HOME"] = str(Path(root) / "home")
        stop = threading.Event()
        threading.Thread(target=keep_nice, args=(stop,), daemon=True).start()
        try:
            run(
                args.schedulers,
                args.workers,
                args.rate,
                args.turn_s,
                args.window,
                args.keys,
                (cols, rows),
                args.fleet_only,
            )
        finally:
            stop.set()
            for project in STARTED:  # no scheduler or agent outlives the bench
                project.stop()
                project.cleanup()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
