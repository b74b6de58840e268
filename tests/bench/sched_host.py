"""Run ``symphony-tui`` (the real CLI) with garbage-collector timing for the benchmarks.

``python -m tests.bench.sched_host STATS_FILE -- <symphony-tui arguments>``

Every collection is timed through :data:`gc.callbacks`; about twice a second (and at exit)
STATS_FILE is rewritten with one JSON object: ``gc_max_ms`` (longest pause of any
generation, wall time), ``gc_max_cpu_ms`` (longest in this process's CPU time, which the
machine's other load moves much less), ``gc2_max_ms`` / ``gc2_max_cpu_ms`` and
``gc2_count`` (full collections), ``gc_total_ms``, ``gc2_tracked`` (objects the collector
tracked after the longest full collection: what it has to traverse; ``gc.get_objects``
counted at that moment, outside the timed pause) and ``gc2_top`` (the 15 commonest types
among them then); ``gc2_pauses`` lists every full collection as ``[monotonic seconds, wall
ms, CPU ms]`` (the clock is the system's, so the bench can pick those of its window);
``stats``, ``count``, ``threshold``, ``enabled`` and ``freeze_count`` (objects in the
permanent generation) are the collector's own
(``gc.get_stats()`` etc.: e.g. how few collections a run that frees by reference counting
needs).

With ``SYMPHONY_BENCH_HEAP=DIR`` (for finding memory growth), each time a file
``DIR/request`` appears it is removed and ``DIR/heap-N.json`` written: the live objects the
collector tracks (after a collection), counted by type (``types``) and functions, classes
and their parts by module (``modules``: what was imported or built after start-up), and with ``SYMPHONY_BENCH_TRACEMALLOC=FRAMES`` also
``DIR/heap-N.tracemalloc`` (a :mod:`tracemalloc` snapshot, for ``compare_to``).
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
        self.started_cpu = 0.0
        self.max_ms = 0.0
        self.max_cpu_ms = 0.0
        self.gen2_max_ms = 0.0
        self.gen2_max_cpu_ms = 0.0
        self.gen2_count = 0
        self.total_ms = 0.0
        self.gen2_tracked = 0
        self.gen2_refs = 0
        #: Every full collection: (monotonic seconds, wall ms, CPU ms).
        self.gen2_pauses: list[tuple[float, float, float]] = []
        self.gen2_collected = 0
        self.gen2_top: dict[str, int] = {}

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            self.started_cpu = time.thread_time()
            return
        ms = (time.perf_counter() - self.started) * 1000
        cpu_ms = (time.thread_time() - self.started_cpu) * 1000
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)
        self.max_cpu_ms = max(self.max_cpu_ms, cpu_ms)
        if info.get("generation") == 2:
            self.gen2_count += 1
            self.gen2_pauses.append((round(time.monotonic(), 3), round(ms, 2), round(cpu_ms, 2)))
            self.gen2_max_ms = max(self.gen2_max_ms, ms)
            if cpu_ms >= self.gen2_max_cpu_ms:
                self.gen2_max_cpu_ms = cpu_ms
                self.gen2_collected = info.get("collected", 0)
                self._count_heap()

    def _count_heap(self) -> None:
        import collections

        objects = gc.get_objects()
        self.gen2_tracked = len(objects)
        self.gen2_refs = sum(len(gc.get_referents(o)) for o in objects)
        counts = collections.Counter(type(o).__qualname__ for o in objects)
        del objects
        self.gen2_top = dict(counts.most_common(15))

    def dump(self, path: str) -> None:
        data = {
            "gc_max_ms": round(self.max_ms, 3),
            "gc_max_cpu_ms": round(self.max_cpu_ms, 3),
            "gc2_max_ms": round(self.gen2_max_ms, 3),
            "gc2_max_cpu_ms": round(self.gen2_max_cpu_ms, 3),
            "gc2_count": self.gen2_count,
            "gc_total_ms": round(self.total_ms, 3),
            "gc2_tracked": self.gen2_tracked,
            "gc2_refs": self.gen2_refs,
            "gc2_collected": self.gen2_collected,
            "gc2_top": self.gen2_top,
            "gc2_pauses": self.gen2_pauses[-2000:],
            "stats": gc.get_stats(),
            "count": gc.get_count(),
            "threshold": gc.get_threshold(),
            "enabled": gc.isenabled(),
            "freeze_count": gc.get_freeze_count(),
        }
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)


def heap_dumps(folder: str) -> None:
    """Answer ``folder/request`` files with heap dumps (see the module docstring)."""
    import collections
    import tracemalloc

    n = 0
    request = os.path.join(folder, "request")
    while True:
        time.sleep(0.5)
        if not os.path.exists(request):
            continue
        os.remove(request)
        n += 1
        gc.collect()
        counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        modules = collections.Counter(
            getattr(o, "__module__", None) or "?"
            for o in gc.get_objects()
            if type(o).__name__ in ("function", "type", "cell", "getset_descriptor")
        )
        with open(os.path.join(folder, f"heap-{n}.json"), "w", encoding="utf-8") as f:
            json.dump(
                {"types": dict(counts.most_common()), "modules": dict(modules.most_common(60))}, f
            )
        if tracemalloc.is_tracing():
            tracemalloc.take_snapshot().dump(os.path.join(folder, f"heap-{n}.tracemalloc"))


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
    if folder := os.environ.get("SYMPHONY_BENCH_HEAP"):
        if frames := int(os.environ.get("SYMPHONY_BENCH_TRACEMALLOC", "0") or 0):
            import tracemalloc

            tracemalloc.start(frames)
        threading.Thread(target=heap_dumps, args=(folder,), daemon=True).start()
    from symphony_tui.cli import main as cli_main

    try:
        return cli_main(rest)
    finally:
        timer.dump(stats)


if __name__ == "__main__":
    sys.exit(main())
