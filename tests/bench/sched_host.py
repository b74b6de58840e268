"""Run ``symphony-tui`` (the real CLI) with garbage-collector timing for the benchmarks.

``python -m tests.bench.sched_host STATS_FILE -- <symphony-tui arguments>``

Every collection is timed through :data:`gc.callbacks`; about twice a second (and at exit)
STATS_FILE is rewritten with one JSON object: ``gc_max_ms`` (longest pause of any
generation), ``gc2_max_ms`` and ``gc2_count`` (full collections), ``gc_total_ms``.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time


class GcTimer:
    def __init__(self) -> None:
        self.started = 0.0
        self.max_ms = 0.0
        self.gen2_max_ms = 0.0
        self.gen2_count = 0
        self.total_ms = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        ms = (time.perf_counter() - self.started) * 1000
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)
        if info.get("generation") == 2:
            self.gen2_count += 1
            self.gen2_max_ms = max(self.gen2_max_ms, ms)

    def dump(self, path: str) -> None:
        data = {
            "gc_max_ms": round(self.max_ms, 3),
            "gc2_max_ms": round(self.gen2_max_ms, 3),
            "gc2_count": self.gen2_count,
            "gc_total_ms": round(self.total_ms, 3),
        }
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)


def main() -> int:
    stats, rest = sys.argv[1], sys.argv[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    timer = GcTimer()
    gc.callbacks.append(timer)

    def dump_loop() -> None:
        while True:
            time.sleep(0.5)
            timer.dump(stats)

    threading.Thread(target=dump_loop, daemon=True).start()
    from symphony_tui.cli import main as cli_main

    try:
        return cli_main(rest)
    finally:
        timer.dump(stats)


if __name__ == "__main__":
    sys.exit(main())
