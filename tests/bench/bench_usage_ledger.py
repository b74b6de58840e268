"""Usage ledger figures: what the event loop pays per checkpoint, what the writer thread
sustains, the file's growth and compaction, and start-up load time.

``python -m tests.bench.bench_usage_ledger`` (also run by ``tests.bench.run_all``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.domain import Issue, TokenUsage
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.book import RunUsage, encode_run
from symphony_tui.scheduler.usage.ledger import UsageLedger
from tests.bench._common import figure

RUNS = 50


def _runs(n: int) -> list[Run]:
    out = []
    for i in range(n):
        issue = Issue(id=f"id-{i}", identifier=f"BENCH-{i}", title="t", state="Todo")
        out.append(
            Run(
                issue=issue,
                attempt=None,
                backend="codex",
                started_at=datetime(2026, 1, 1, tzinfo=UTC),
                started_mono=0.0,
                last_event_mono=0.0,
            )
        )
    return out


def run() -> None:
    print(f"== usage ledger ({RUNS} live runs, checkpoint every second)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "usage.jsonl"
        ledger = UsageLedger(path, compact_bytes=1 << 40)  # no compaction while measuring
        ledger.open()
        runs = _runs(RUNS)
        loop_costs = []
        write_costs = []
        seconds = 300
        for second in range(1, seconds + 1):
            for r in runs:
                r.tokens = TokenUsage(input_tokens=900 * second, total_tokens=1000 * second)
            t0 = time.perf_counter()
            ledger.checkpoint(runs, float(second))
            t1 = time.perf_counter()
            ledger.wait_written()  # as with a second between checkpoints: one batch each
            loop_costs.append(t1 - t0)
            write_costs.append(time.perf_counter() - t1)
        size = path.stat().st_size
        figure("loop: one checkpoint of 50 runs, median", statistics.median(loop_costs) * 1e6, "us")
        figure("loop: one checkpoint of 50 runs, max", max(loop_costs) * 1e6, "us")
        figure(
            "writer: one batch of 50 marks, write + fdatasync",
            statistics.median(write_costs) * 1e3,
            "ms",
        )
        figure(
            "file growth with 50 live runs, before compaction", size / seconds * 3600 / 1e6, "MB/h"
        )
        ledger.close()

        # Compaction and start-up with a day's worth of history (300 issues) in 1 MiB.
        big = Path(tmp) / "big.jsonl"
        line = 0
        with big.open("wb") as f:
            while f.tell() < (1 << 20):
                line += 1
                issue = line % 300
                mark = RunUsage(
                    f"run-{line % 5000}",
                    f"id-{issue}",
                    f"BENCH-{issue}",
                    TokenUsage(input_tokens=line, total_tokens=line * 2),
                    float(line % 600),
                    ended=line % 7 == 0,
                )
                f.write(encode_run(mark))
        t0 = time.perf_counter()
        loaded = UsageLedger(big)
        result = loaded.open()
        load_s = time.perf_counter() - t0
        loaded.close()
        figure("start-up: load + compact a 1 MiB ledger", load_s * 1e3, "ms")
        figure("  lines read", line, "lines")
        figure("  compacted size", big.stat().st_size / 1e3, "kB")
        figure("  issues restored", len(result.by_issue), "issues")


if __name__ == "__main__":
    run()
