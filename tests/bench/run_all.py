"""Run every benchmark and print its figures: ``python -m tests.bench.run_all``.

``--soak-minutes M`` (default 10) sets the console soak's length; ``--quick`` runs the
in-process benchmarks only (no scheduler processes, no agents).
"""

import argparse

from tests.bench import (
    bench_attach,
    bench_console,
    bench_flood,
    bench_host_startup,
    bench_launch,
    bench_quit,
    bench_remote,
    bench_resources,
    bench_rpc,
    bench_scheduler,
    bench_soak,
    bench_turnover,
    bench_usage_ledger,
)

if __name__ == "__main__":
    p = argparse.ArgumentParser(description="every benchmark, figures printed")
    p.add_argument("--soak-minutes", type=float, default=10.0)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    bench_scheduler.run()
    bench_rpc.run()
    bench_console.run()
    bench_usage_ledger.run()
    bench_resources.run()
    bench_attach.run()
    bench_turnover.main([])
    if not args.quick:
        bench_flood.run()
        bench_launch.run()
        bench_quit.run()
        bench_remote.run()
        bench_host_startup.run()
        bench_soak.run(minutes=args.soak_minutes)
