"""Does ``codex.command`` start? Launch it and do only the ``initialize`` request of the
handshake (docs/protocols.md "Codex app-server"; no ``thread/start``, so no thread is created),
then end its process group. Used by ``symphony-tui doctor``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.process import StderrTail, kill_group, launch
from symphony_tui.agents.codex.rpc import RpcConnection, RpcError
from symphony_tui.agents.codex.session import INITIALIZE_PARAMS


async def probe_initialize(
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    *,
    params: dict[str, Any] = INITIALIZE_PARAMS,
    connection: type[RpcConnection] = RpcConnection,
) -> dict[str, Any]:
    """The app-server's ``initialize`` result (e.g. ``{"userAgent": ...}``). ``params`` and
    ``connection`` serve other stdio JSON-RPC agents (the acp backend: its own params, its
    JSON-RPC 2.0 connection).

    Raises ``AgentError``: ``launch_failed`` (bash cannot start, or the program exits before
    answering, with its exit code and stderr tail), ``read_timeout`` (no answer within
    ``timeout_s``), ``handshake_failed`` (the request was rejected)."""
    proc = await launch(command, cwd, env)
    assert proc.stdout and proc.stdin and proc.stderr
    tail = StderrTail()
    drain = asyncio.create_task(tail.drain(proc.stderr))

    async def exited() -> str:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=2)
        await asyncio.wait([drain], timeout=1)
        code = proc.returncode
        why = f"exited with code {code}" if code is not None else "closed its stdout"
        stderr = tail.summary()
        return f"{why}: {stderr}" if stderr else why

    rpc = connection(
        proc.stdout,
        proc.stdin,
        on_notification=lambda _method, _params: None,
        on_request=lambda _rid, _method, _params: None,
        on_malformed=lambda _reason: None,
        on_eof=exited,
    )
    rpc.start()
    try:
        result = await rpc.request("initialize", params, timeout_s)
    except AgentError as e:
        if e.code == "process_exited":
            why = e.message if rpc.is_closed else await exited()
            raise AgentError("launch_failed", f"{command!r}: {why}") from None
        raise
    except RpcError as e:
        raise AgentError("handshake_failed", f"initialize rejected: {e.message}") from None
    finally:
        await rpc.aclose()
        await kill_group(proc)
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await drain
    return result if isinstance(result, dict) else {}
