"""Run one workspace hook script (spec §9.4).

``bash -lc <script>`` with the workspace as cwd, in its own process group so a timeout (or
a cancelled caller) can kill everything the script started. Output is read as it arrives
and only the last :data:`OUTPUT_LIMIT` bytes are kept, so a hook that prints gigabytes
costs a few kilobytes. A failing hook is a result (``ok=False``), never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from symphony_tui.config.child_env import ChildEnv
from symphony_tui.observability.logs import log_kv
from symphony_tui.observability.redact import redact

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4096
#: Seconds between SIGTERM and SIGKILL of a timed-out hook's process group.
KILL_GRACE_S = 2.0
#: Seconds to drain output after the shell exits; a background child that keeps the pipe
#: open must not hold the caller.
DRAIN_GRACE_S = 1.0
_READ_CHUNK = 65536


@dataclass(frozen=True)
class HookResult:
    """Outcome of one hook run.

    ``ok`` is True only for exit code 0 within the timeout. ``exit_code`` is None when the
    process could not be started or was killed on timeout. ``output`` is the tail of the
    combined stdout+stderr (UTF-8, undecodable bytes replaced), prefixed with a
    ``[... N bytes truncated ...]`` marker when cut. ``duration_ms`` is wall time.
    ``host_lost``: on a worker host, why its connection failed during the hook (the hook's
    fate is unknown; the host is to be marked down), else None.
    """

    name: str
    ok: bool
    exit_code: int | None
    timed_out: bool
    output: str
    duration_ms: int
    host_lost: str | None = None

    def summary(self) -> str:
        """One line: ``ok``, ``exit 3``, ``timed out after 500 ms`` or ``failed to start``."""
        if self.ok:
            return "ok"
        if self.timed_out:
            return f"timed out after {self.duration_ms} ms"
        if self.host_lost is not None:
            return f"host unreachable: {self.host_lost}"
        if self.exit_code is None:
            return "failed to start"
        return f"exit {self.exit_code}"


class _Tail:
    """Keeps the last ``limit`` bytes fed to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        excess = len(self.buf) - self.limit
        if excess > 0:
            del self.buf[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            return f"[... {self.dropped} bytes truncated ...]\n{body}"
        return body


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _HookProtocol(asyncio.SubprocessProtocol):
    """Collects the output tail and reports exit and end-of-output separately: a
    background child of the hook may keep the pipe open long after the shell exited, so
    waiting for the pipe (what ``Process.wait()`` does) could hang."""

    def __init__(self, tail: _Tail) -> None:
        loop = asyncio.get_running_loop()
        self.tail = tail
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.tail.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def run_hook(
    name: str,
    script: str,
    cwd: Path,
    timeout_ms: int,
    env: dict[str, str] | None = None,
    *,
    inherit: Mapping[str, str] | None = None,
) -> HookResult:
    """Run ``script`` with ``bash -lc`` in ``cwd``; ``env`` is added to the inherited
    environment (the manager passes ``SYMPHONY_ISSUE_ID``, ``SYMPHONY_ISSUE_IDENTIFIER``,
    ``SYMPHONY_WORKSPACE``). The inherited environment is ``inherit`` (the manager builds it
    with the agents' recipe, config/child_env.py), by default ``os.environ`` without the
    scheduler's secret names (:data:`~symphony_tui.config.child_env.ALWAYS_SECRET_NAMES`). On timeout the process group gets SIGTERM, then SIGKILL after
    :data:`KILL_GRACE_S`. Cancelling the caller ends the group the same way (SIGTERM, grace,
    SIGKILL) and re-raises the cancellation. Never raises for a failing hook."""
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    env = env or {}
    context = {
        "issue_id": env.get("SYMPHONY_ISSUE_ID"),
        "issue_identifier": env.get("SYMPHONY_ISSUE_IDENTIFIER"),
    }
    log_kv(log, "INFO", "hook started", hook=name, cwd=str(cwd), timeout_ms=timeout_ms, **context)
    tail = _Tail(OUTPUT_LIMIT)
    protocol = _HookProtocol(tail)
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.subprocess_exec(
            lambda: protocol,
            "bash",
            "-lc",
            script,
            cwd=str(cwd),
            env={**(ChildEnv().scrubbed() if inherit is None else inherit), **env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        result = HookResult(name, False, None, False, f"cannot start hook: {err}", elapsed_ms())
        _log_result(result, context)
        return result

    pid = transport.get_pid()
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(protocol.exited), max(timeout_ms, 1) / 1000)
        except TimeoutError:
            timed_out = True
            _kill_group(pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.exited), KILL_GRACE_S)
            # Also reaches children that ignored SIGTERM after the shell itself exited.
            _kill_group(pid, signal.SIGKILL)
            await protocol.exited
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.output_closed), DRAIN_GRACE_S)
    except asyncio.CancelledError:
        # The caller was cancelled (stop, shutdown): the same SIGTERM-then-SIGKILL as a
        # timeout, so the hook's traps can clean up (a git index.lock, a half-done rehash).
        _kill_group(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), KILL_GRACE_S)
        _kill_group(pid, signal.SIGKILL)
        raise
    finally:
        if not protocol.exited.done():
            _kill_group(pid, signal.SIGKILL)
        transport.close()

    exit_code = None if timed_out else transport.get_returncode()
    result = HookResult(
        name=name,
        ok=not timed_out and exit_code == 0,
        exit_code=exit_code,
        timed_out=timed_out,
        # Hook output reaches the console and manifests: mask credentials it printed.
        output=redact(tail.text()),
        duration_ms=elapsed_ms(),
    )
    _log_result(result, context)
    return result


def _log_result(result: HookResult, context: dict[str, str | None]) -> None:
    level = "INFO" if result.ok else "WARNING"
    log_kv(
        log,
        level,
        "hook finished" if result.ok else "hook failed",
        hook=result.name,
        status=result.summary(),
        duration_ms=result.duration_ms,
        output=result.output[-1024:] or None,
        **context,
    )
