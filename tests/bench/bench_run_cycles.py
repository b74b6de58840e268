"""What ended runs leave in reference cycles (no full GC pause may exceed 50 ms).

``python -m tests.bench.bench_run_cycles [--workers 50] [--seconds 60] [--freeze]``

The scheduler in this process (``build_runtime``, the codex backend launching
:mod:`tests.bench.flood_agent`: one turn of ``--turn-s`` seconds per run, the next run of
the issue a second later), start-up's heap frozen as the CLI does. Without ``--freeze``
the collector is disabled for the window; with it the heap freezer runs as in the CLI
(``freeze_heap=True``). Then everything is unfrozen and collected once with
``gc.DEBUG_SAVEALL``: printed are the runs that ended, the objects the collection found as
garbage (in all and per ended run) and their commonest types: what only a full collection
(the freezer's reclaim) would free.

Agents get a private ``HOME`` (see ``bench_reclaim.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import time

from symphony_tui.runtime import build_runtime
from tests.bench._flood import FloodProject


async def measure(workers: int, seconds: float, turn_s: float, freeze: bool) -> None:
    project = FloodProject(workers=workers, turn_s=turn_s, max_turns=1, rate=20)
    workflow = project.write()
    home = project.tmp / "home"
    home.mkdir()
    cwd = os.getcwd()
    os.chdir(project.tmp)
    try:
        runtime = build_runtime(
            workflow,
            env={**os.environ, "HOME": str(home)},
            lock=False,
            events_path=project.tmp / "events.jsonl",
            usage_path=project.tmp / "usage.jsonl",
            freeze_heap=freeze,
        )
        orch = runtime.orchestrator
        gc.collect()
        gc.freeze()  # start-up's heap, as cli.py
        if not freeze:
            gc.disable()
        await orch.start()
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        # one agent process (one report file) per run started
        ended = len(list(project.reports.glob("*.jsonl"))) - len(orch.running)
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        garbage = list(gc.garbage)
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
        kinds = collections.Counter(type(o).__qualname__ for o in garbage)
        del garbage
        total = sum(kinds.values())
        mode = "freezer on" if freeze else "collector off"
        print(f"== {workers} workers, {turn_s:g} s turns, {mode}, {time.monotonic() - t0:.0f} s")
        print(f"  runs ended (about)          {ended:,}")
        print(f"  frozen before the collection {frozen:,}")
        print(
            f"  garbage found               {total:,} ({total / max(ended, 1):.1f} per ended run)"
        )
        for name, n in kinds.most_common(12):
            print(f"    {n:>7,} {name}")
        await orch.shutdown()
    finally:
        os.chdir(cwd)
        project.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--turn-s", type=float, default=0.5)
    p.add_argument("--freeze", action="store_true", help="run the heap freezer as the CLI does")
    a = p.parse_args()
    asyncio.run(measure(a.workers, a.seconds, a.turn_s, a.freeze))


if __name__ == "__main__":
    main()
