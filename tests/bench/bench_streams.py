"""The API with a crowd of event-stream clients (docs/security.md): the real
``symphony-tui --headless`` on the demo with a few running issues, then ``--clients`` (1,000)
SSE clients opened at once from this machine.

Prints, for the default caps and with the caps raised to admit every client: streams
admitted and refused, ``GET /api/v1/state`` latency p50/p99/max (every 50 ms, 20 s) while
they are connected, and the scheduler's RSS before, with the crowd, and 5, 30 and 60 s
after they all left.

    python -m tests.bench.bench_streams [--clients 1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench._common import figure
from tests.bench._flood import percentile, rss_mb

REPO = Path(__file__).resolve().parents[2]


def _project(folder: Path, caps: tuple[int, int] | None) -> Path:
    shutil.copytree(REPO / "assets" / "demo", folder, dirs_exist_ok=True)
    workflow = folder / "WORKFLOW.md"
    text = workflow.read_text()
    text = text.replace("approvals: operator", "approvals: auto")
    if caps is not None:
        text = text.replace(
            "polling:",
            f"server:\n  max_streams: {caps[0]}\n  max_streams_per_client: {caps[1]}\npolling:",
            1,
        )
    workflow.write_text(text)
    return workflow


def _start(workflow: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "SYMPHONY_PYTHON": sys.executable, "SYMPHONY_DEMO_SPEED": "0.3"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "symphony_tui.cli", str(workflow), "--headless", "--port", "0",
         "--no-lock", "--log-dir", str(workflow.parent / "logs")],
        cwd=workflow.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"HTTP API on http://127\.0\.0\.1:(\d+)", line)
        if found:
            return proc, int(found.group(1))
    raise SystemExit(f"the scheduler did not serve (exit {proc.poll()})")


async def _stream_client(port: int, stop: asyncio.Event, admitted: list[int]) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        admitted.append(0)
        return
    writer.write(
        f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Accept-Encoding: gzip\r\n\r\n".encode()
    )
    try:
        status = await reader.readline()
        admitted.append(int(status.split()[1]) if status else 0)
        reading = asyncio.ensure_future(_drain(reader))
        await stop.wait()
        reading.cancel()
    except (OSError, ValueError, IndexError):
        admitted.append(0)
    finally:
        writer.close()


async def _drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


async def _state_latency(port: int, seconds: float) -> list[float]:
    took: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET /api/v1/state HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        await reader.read()
        writer.close()
        took.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.05)
    return took


async def _clients(port: int, clients: int) -> None:
    """The crowd, in its own process (so its reading does not slow the probe): opens the
    streams, prints ``admitted refused``, holds them until stdin closes."""
    stop = asyncio.Event()
    admitted: list[int] = []
    tasks = [asyncio.ensure_future(_stream_client(port, stop, admitted)) for _ in range(clients)]
    while len(admitted) < clients:
        await asyncio.sleep(0.1)
    print(admitted.count(200), admitted.count(503), flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _crowd(proc: subprocess.Popen, port: int, clients: int, seconds: float) -> None:
    await asyncio.sleep(5)  # a few runs going
    figure("RSS before the crowd", rss_mb(proc.pid), "MB")
    crowd = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.bench_streams", "--crowd", str(port),
         "--clients", str(clients)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert crowd.stdout is not None and crowd.stdin is not None
    admitted, refused = (int(n) for n in (await asyncio.to_thread(crowd.stdout.readline)).split())
    figure("streams admitted (200)", admitted, "")
    figure("streams refused (503)", refused, "")
    took = await _state_latency(port, seconds)
    figure("RSS with the crowd", rss_mb(proc.pid), "MB")
    figure("/api/v1/state p50 with the crowd", percentile(took, 50), "ms")
    figure("/api/v1/state p99 with the crowd", percentile(took, 99), "ms", "< 250")
    figure("/api/v1/state max with the crowd", max(took), "ms")
    crowd.stdin.close()
    crowd.wait(timeout=60)
    left = time.monotonic()
    for mark in (5, 30, 60):
        await asyncio.sleep(max(0.0, left + mark - time.monotonic()))
        figure(f"RSS {mark} s after the crowd left", rss_mb(proc.pid), "MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--raised-only", action="store_true", help="only the raised caps")
    parser.add_argument("--crowd", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crowd:
        asyncio.run(_clients(args.crowd, args.clients))
        return
    phases = (("default caps (256, 64 per client)", None),
              (f"caps raised to {args.clients}", (args.clients, args.clients)))  # fmt: skip
    for label, caps in phases[1:] if args.raised_only else phases:
        print(f"--- {label}; {os.getloadavg()[0]:.1f} load average")
        with tempfile.TemporaryDirectory(prefix="bench-streams-") as tmp:
            proc, port = _start(_project(Path(tmp) / "demo", caps))
            try:
                asyncio.run(_crowd(proc, port, args.clients, args.seconds))
                logs = Path(tmp) / "demo" / "logs"
                for log in logs.glob("*.log"):
                    said = [ln for ln in log.read_text().splitlines() if "returning memory" in ln]
                    print(f"memory handed back {len(said)} time(s)")
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
