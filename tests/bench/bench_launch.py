"""Launch to the first painted frame: seconds from starting ``symphony-tui`` (the
console, on a 120x36 pseudo-terminal) to the first frame with the workers pane on it.

``python -m tests.bench.bench_launch [--runs 7] [--workers 5] [--before DIR]``

The project is the flood benchmarks' (local tracker, ``--workers`` issues, scripted codex
agents, no HTTP API). ``--before DIR`` names another checkout of this repository (e.g.
``git worktree add /tmp/before <commit>``): its code is launched in turn with this one's, run
for run, so both medians come from the same minutes of a shared machine. Also prints the
time to import what a launch imports (``python -X importtime``, in-process total) and the CPU
seconds the process had used at its first frame (steadier than wall time on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.bench._flood import ROOT, FloodProject

# the border title of pane 2 ("2 Workers (N)"): on screen only once the main screen painted
FRAME_MARK = b"Workers"
# "2 Workers (N)": the scheduler's first snapshot is on screen (the panes filled in)
FILLED_MARK = re.compile(rb"Workers \(\d+\)")
LAUNCH = "import sys; from symphony_tui.cli import main; sys.exit(main(sys.argv[1:]))"
IMPORTS = (
    "import symphony_tui.cli, symphony_tui.runtime, symphony_tui.console.app, "
    "symphony_tui.observability.logs, symphony_tui.config.errors"
)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_frame_s(
    root: Path, project: FloodProject, timeout_s: float = 60.0
) -> tuple[float, float, float]:
    """One launch of the console from checkout ``root``: seconds to the first frame, the
    CPU seconds the process had used by then, and seconds until the panes showed the
    scheduler's first snapshot (then SIGKILL of its process group and agents). The CPU
    figure moves much less with the machine's load than the wall time."""
    import fcntl
    import pty
    import struct
    import termios

    workflow = project.write()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(root), TERM="xterm-256color", COLORTERM="truecolor")
    argv = [sys.executable, "-c", LAUNCH, str(workflow), "--no-lock"]
    argv += ["--log-dir", str(project.tmp / "logs")]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=root, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    seen = b""
    took = cpu = filled = float("inf")
    try:
        while time.monotonic() - t0 < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            seen = (seen + chunk)[-4096:]
            if took == float("inf") and FRAME_MARK in seen:
                took = time.monotonic() - t0
                try:
                    cpu = cpu_s(proc.pid)
                except (OSError, IndexError, ValueError):
                    pass
            if FILLED_MARK.search(seen):
                filled = time.monotonic() - t0
                break
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        os.close(master)
        project.cleanup_agents()
    return took, cpu, filled


def import_s(root: Path) -> float:
    """Seconds the launch's imports take in a fresh interpreter (``-X importtime``)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", IMPORTS],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    total = 0
    for line in out.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if m and not m.group(2).startswith(" "):
            total += int(m.group(1))  # top-level imports only: their totals include the rest
    return total / 1e6


def run(runs: int = 7, workers: int = 5, before: Path | None = None) -> None:
    print(f"== launch to first frame (console, 120x36, {workers} issues), {runs} runs each")
    trees = [("before", before.resolve())] if before is not None else []
    trees.append(("this tree", ROOT))
    frames: dict[str, list[float]] = {name: [] for name, _ in trees}
    imports: dict[str, list[float]] = {name: [] for name, _ in trees}
    cpus: dict[str, list[float]] = {name: [] for name, _ in trees}
    fills: dict[str, list[float]] = {name: [] for name, _ in trees}
    project = FloodProject(workers, rate=20.0)
    try:
        for _ in range(runs):
            for name, root in trees:
                took, cpu, filled = first_frame_s(root, project)
                frames[name].append(took)
                cpus[name].append(cpu)
                fills[name].append(filled)
                imports[name].append(import_s(root))
    finally:
        project.cleanup()
    head = "".join(f"{name:>14}" for name, _ in trees)
    print(f"{'':<40}{head}")
    rows = (
        ("launch -> first frame, median (s)", frames, statistics.median),
        ("launch -> first frame, best (s)", frames, min),
        ("CPU used by the first frame, median (s)", cpus, statistics.median),
        ("launch -> panes filled, median (s)", fills, statistics.median),
        ("imports of a launch, median (s)", imports, statistics.median),
    )
    for label, data, fn in rows:
        print(f"{label:<40}" + "".join(f"{fn(data[name]):>14.3f}" for name, _ in trees))
    print(f"{'target':<40}{'<= 0.8 s first frame':>{14 * len(trees)}}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--workers", type=int, default=5)
    p.add_argument("--before", type=Path, help="another checkout to launch side by side")
    a = p.parse_args()
    run(a.runs, a.workers, a.before)


if __name__ == "__main__":
    main()
