"""Codex JSON-RPC framing figures: notification lines per second, and one 9 MB line."""

from __future__ import annotations

import asyncio
import json
import time

from symphony_tui.agents.codex.rpc import RpcConnection
from tests.bench._common import figure


async def parse(data: bytes) -> tuple[float, int, int]:
    reader = asyncio.StreamReader(limit=2**20)
    seen = {"n": 0, "bad": 0}

    def note(method, params):
        seen["n"] += 1

    conn = RpcConnection(
        reader,
        None,  # type: ignore[arg-type]  (reading only)
        on_notification=note,
        on_request=lambda *a: None,
        on_malformed=lambda reason: seen.__setitem__("bad", seen["bad"] + 1),
    )
    chunk = 1 << 16
    for i in range(0, len(data), chunk):
        reader.feed_data(data[i : i + chunk])
    reader.feed_eof()
    t0 = time.perf_counter()
    conn.start()
    await conn.closed
    return time.perf_counter() - t0, seen["n"], seen["bad"]


def delta(i: int) -> bytes:
    msg = {
        "method": "item/agentMessage/delta",
        "params": {"threadId": "t", "turnId": "u", "itemId": f"i{i}", "delta": "word " * 8},
        "emittedAtMs": 1_764_000_000_000 + i,
    }
    return json.dumps(msg).encode() + b"\n"


async def main() -> None:
    lines = b"".join(delta(i) for i in range(100_000))
    elapsed, n, bad = await parse(lines)
    figure("codex framing: small notifications", n / elapsed, "lines/s", "> 50,000/s")
    figure("codex framing: throughput", len(lines) / elapsed / 1e6, "MB/s")
    big = json.dumps({"method": "item/completed", "params": {"text": "y" * 9_000_000}}).encode()
    elapsed, n, bad = await parse(big + b"\n" + delta(0))
    figure("codex framing: one 9 MB line + 1 small", elapsed * 1000, "ms")
    huge = b'{"method":"x","params":{"t":"' + b"z" * 11_000_000 + b'"}}\n'
    elapsed, n, bad = await parse(huge + delta(1))
    figure("codex framing: 11 MB line skipped, next line kept", elapsed * 1000, "ms")
    assert n == 1 and bad == 1


def run() -> None:
    print("== codex rpc")
    asyncio.run(main())


if __name__ == "__main__":
    run()
