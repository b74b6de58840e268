"""Quit with 50 workers (issue 12, benchmark f): seconds from the request to the process's
exit, headless (SIGTERM) and the console (``q``, ``y`` on a pseudo-terminal), with every
worker streaming.

``python -m tests.bench.bench_quit [--workers 50] [--rate 200]``
"""

from __future__ import annotations

import argparse
import time

from tests.bench._common import figure
from tests.bench._flood import Api, ConsoleOnPty, FloodProject


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--rate", type=float, default=200.0)
    a = p.parse_args()
    run(a.workers, a.rate)


if __name__ == "__main__":
    main()
