"""Entry point of the simulated coding agent: ``python -m symphony_tui.demo.agent``.

Speaks the codex app-server protocol on stdio (see :mod:`symphony_tui.demo.server`), so the
scheduler drives it through the same codex backend as the real ``codex app-server``. Stdlib
only, no network. Exit status 0 on EOF of stdin, SIGTERM, SIGINT or SIGHUP.

Environment: ``SYMPHONY_DEMO_SPEED`` (pause multiplier, 0 = no pauses; see
:mod:`symphony_tui.demo.pacing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from symphony_tui.demo.pacing import speed_from_env
from symphony_tui.demo.server import DemoAppServer
from symphony_tui.demo.transport import StdioTransport


async def serve(speed: float | None = None) -> None:
    """Serve on this process's stdin/stdout until EOF or a termination signal."""
    transport = StdioTransport()
    transport.start()
    server = DemoAppServer(transport, speed_from_env() if speed is None else speed)
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    stopping = asyncio.Event()

    def stop() -> None:
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop)
    serving = loop.create_task(server.serve())
    waiting = loop.create_task(stopping.wait())
    await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if not serving.done():
        serving.cancel()  # serve()'s finally ends the running turns
    with contextlib.suppress(asyncio.CancelledError):
        await serving


def main(argv: list[str] | None = None) -> int:
    """Run the agent; returns the process exit status."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
