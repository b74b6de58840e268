"""Run every benchmark and print its figures: ``python -m tests.bench.run_all``."""

from tests.bench import bench_console, bench_rpc, bench_scheduler

if __name__ == "__main__":
    bench_scheduler.run()
    bench_rpc.run()
    bench_console.run()
