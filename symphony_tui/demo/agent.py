"""Entry point of the simulated coding agent: ``python -m symphony_tui.demo.agent``.

Speaks the codex app-server protocol (see :mod:`symphony_tui.demo.server`), so the scheduler
drives it through the same codex backend as the real ``codex app-server``:

* on stdio by default (stdlib only, no network); exit status 0 on EOF of stdin, SIGTERM,
  SIGINT or SIGHUP;
* with ``--listen unix://PATH`` on a unix socket, as a detached app-server for
  ``codex.transport: unix`` (see :mod:`symphony_tui.demo.listen`; WebSocket framing by the
  ``websockets`` package). It outlives its clients: only SIGTERM, SIGINT or SIGHUP end it
  (exit status 0; the socket file is removed). A listen address it cannot serve: one line on
  stderr, exit status 2.

Environment: ``SYMPHONY_DEMO_SPEED`` (pause multiplier, 0 = no pauses; see
:mod:`symphony_tui.demo.pacing`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING

from symphony_tui.demo.pacing import speed_from_env
from symphony_tui.demo.server import DemoAppServer
from symphony_tui.demo.transport import StdioTransport, Transport, note

if TYPE_CHECKING:
    from symphony_tui.demo.listen import SocketTransport

EXIT_USAGE = 2


async def serve(speed: float | None = None, listen: str | None = None) -> int:
    """Serve on stdin/stdout (``listen`` None or ``stdio://``) or on ``unix://PATH`` until
    EOF of stdin (stdio only) or a termination signal; returns the exit status."""
    transport: Transport
    sock: SocketTransport | None = None
    if listen in (None, "stdio://"):
        stdio = StdioTransport()
        stdio.start()
        transport = stdio
    else:
        from symphony_tui.demo.listen import ListenError, SocketTransport, socket_path

        try:
            sock = SocketTransport(socket_path(str(listen)))
            await sock.start()
        except ListenError as e:
            note(f"--listen: {e}")
            return EXIT_USAGE
        transport = sock
    server = DemoAppServer(transport, speed_from_env() if speed is None else speed)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stopping.set)
    serving = loop.create_task(server.serve())
    waiting = loop.create_task(stopping.wait())
    await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if not serving.done():
        serving.cancel()  # serve()'s finally ends the running turns
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    if sock is not None:
        await sock.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the agent; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m symphony_tui.demo.agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--listen",
        metavar="URL",
        help="stdio:// (the default) or unix://PATH",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.listen not in (None, "stdio://") and not args.listen.startswith("unix://"):
        note(f"--listen: expected stdio:// or unix://PATH, got {args.listen!r}")
        return EXIT_USAGE
    status = 0
    with contextlib.suppress(KeyboardInterrupt):
        status = asyncio.run(serve(listen=args.listen))
    return status


if __name__ == "__main__":
    sys.exit(main())
