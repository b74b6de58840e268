"""Run one workspace hook script (spec §9.4).

``bash -lc <script>`` with the workspace as cwd, in its own process group so a timeout, a
cancelled caller or a stopping scheduler (:class:`HookCutoff`) can end everything the script
started; when the script returns, ok or not, what it left running in its group (``sleep
3101 &``) is ended too (``hosts/local_group.py`` ``end_group``): nothing outlives its hook. Output is read as it arrives and only the last :data:`OUTPUT_LIMIT` bytes are kept,
so a hook that prints gigabytes costs a few kilobytes. A failing hook is a result
(``ok=False``), never an exception.
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
from symphony_tui.hosts.local_group import end_group
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
    fate is unknown; the host is to be marked down), else None. ``cut_short``: why a
    :class:`HookCutoff` ended the hook before it finished (``"scheduler shutdown"``), else
    None; its process group was ended (SIGTERM, :data:`KILL_GRACE_S`, SIGKILL) and
    ``exit_code`` is None.
    """

    name: str
    ok: bool
    exit_code: int | None
    timed_out: bool
    output: str
    duration_ms: int
    host_lost: str | None = None
    cut_short: str | None = None

    def summary(self) -> str:
        """One line: ``ok``, ``exit 3``, ``timed out after 500 ms``, ``cut short after
        10000 ms (scheduler shutdown)`` or ``failed to start``."""
        if self.ok:
            return "ok"
        if self.cut_short is not None:
            return f"cut short after {self.duration_ms} ms ({self.cut_short})"
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


class HookCutoff:
    """A grace for every hook of one scheduler once it stops (shutdown after ``q``, a
    hang-up, SIGTERM): after :meth:`cut`, each hook has ``grace_s`` seconds from its own
    start to finish, and a hook already running at the cut has them from the cut; then it
    is ended like a timed-out one and its result says ``cut_short`` (the reason). So an
    ``after_run`` that starts late in the stop (its agent stopped first) gets its full
    grace, and a quit is bounded by the grace per hook in sequence. Before :meth:`cut`,
    hooks run to ``hooks.timeout_ms`` as usual (spec §9.4). :attr:`ended` lists, one line
    each, the hooks it (or a cancellation while it was cut) ended, for the front ends to
    say on exit. Built without a running event loop; used on one."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.cut_at: float | None = None  # time.monotonic() of the first cut
        self.grace_s = 0.0
        self.ended: list[str] = []
        self._cut = asyncio.Event()

    @property
    def active(self) -> bool:
        return self.reason is not None

    @property
    def deadline(self) -> float | None:
        """When a hook running at the cut is ended (``time.monotonic()``), None before it."""
        return None if self.cut_at is None else self.cut_at + self.grace_s

    def cut(self, reason: str, grace_s: float) -> None:
        """From now on every hook ends by ``grace_s`` seconds (clamped at 0) after the later
        of its start and now. A second call changes nothing (the first cut stands)."""
        if self.reason is not None:
            return
        self.cut_at = time.monotonic()
        self.grace_s = max(grace_s, 0.0)
        self.reason = reason
        self._cut.set()

    def deadline_for(self, started: float) -> float | None:
        """The deadline (``time.monotonic()``) of a hook started at ``started`` (same clock):
        ``grace_s`` after the later of its start and the cut; None before the cut."""
        if self.cut_at is None:
            return None
        return max(started, self.cut_at) + self.grace_s

    async def reached(self, started: float) -> None:
        """Returns once :meth:`cut` was called and the deadline of a hook started at
        ``started`` (``time.monotonic()``) has passed."""
        await self._cut.wait()
        deadline = self.deadline_for(started)
        assert deadline is not None
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    def record(self, name: str, identifier: str | None, why: str) -> None:
        whose = f"{identifier}: " if identifier else ""
        self.ended.append(f"{whose}{name} hook {why}; its process group was ended")


async def outlast(
    finished: asyncio.Future, timeout_s: float, cutoff: HookCutoff | None, started: float
) -> str:
    """Wait for ``finished`` (never cancelled here) at most ``timeout_s`` seconds and no
    later than ``cutoff``'s deadline for a hook started at ``started`` (``time.monotonic()``):
    ``"done"``, ``"timeout"`` or ``"cut"``."""
    waiters: set[asyncio.Future] = {finished}
    reached = None
    if cutoff is not None:
        reached = asyncio.ensure_future(cutoff.reached(started))
        waiters.add(reached)
    try:
        done, _ = await asyncio.wait(
            waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if reached is not None:
            reached.cancel()
    if finished in done:
        return "done"
    return "cut" if reached is not None and reached in done else "timeout"


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
    cutoff: HookCutoff | None = None,
) -> HookResult:
    """Run ``script`` with ``bash -lc`` in ``cwd``; ``env`` is added to the inherited
    environment (the manager passes ``SYMPHONY_ISSUE_ID``, ``SYMPHONY_ISSUE_IDENTIFIER``,
    ``SYMPHONY_WORKSPACE``). The inherited environment is ``inherit`` (the manager builds it
    with the agents' recipe, config/child_env.py), by default ``os.environ`` without the
    scheduler's secret names (:data:`~symphony_tui.config.child_env.ALWAYS_SECRET_NAMES`). Once the script returns,
    what is left of its process group gets SIGTERM, then SIGKILL after
    :data:`KILL_GRACE_S`. On timeout the process group gets SIGTERM, then SIGKILL after
    :data:`KILL_GRACE_S`. At ``cutoff``'s deadline (a stopping scheduler: its grace from this
    hook's start, or from the cut if that came later) the group is ended the same way and the result is ``cut_short``. Cancelling the caller ends the group the
    same way (SIGTERM, grace, SIGKILL), logs it and re-raises the cancellation. Never raises
    for a failing hook."""
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
    cut_short: str | None = None
    try:
        outcome = await outlast(protocol.exited, max(timeout_ms, 1) / 1000, cutoff, started)
        if outcome != "done":
            timed_out = outcome == "timeout"
            if cutoff is not None and not timed_out:
                cut_short = cutoff.reason
            _kill_group(pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.exited), KILL_GRACE_S)
            # Also reaches children that ignored SIGTERM after the shell itself exited.
            _kill_group(pid, signal.SIGKILL)
            await protocol.exited
        else:
            # The script returned: what it left in its group goes with it (SIGTERM, a
            # grace, SIGKILL), which also closes the output pipe those held open.
            leftovers = await end_group(pid, KILL_GRACE_S)
            if leftovers:
                log_kv(log, "INFO", "hook's leftover processes ended", hook=name, pgid=pid,
                       **context)  # fmt: skip
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.output_closed), DRAIN_GRACE_S)
    except asyncio.CancelledError:
        # The caller was cancelled (stop, shutdown): the same SIGTERM-then-SIGKILL as a
        # timeout, so the hook's traps can clean up (a git index.lock, a half-done rehash).
        _kill_group(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), KILL_GRACE_S)
        _kill_group(pid, signal.SIGKILL)
        why = "cut short: its caller was cancelled"
        if cutoff is not None and cutoff.active:
            why = f"cut short ({cutoff.reason})"
            cutoff.record(name, context["issue_identifier"], why)
        log_kv(log, "WARNING", "hook cut short", hook=name, status=why,
               duration_ms=elapsed_ms(), **context)  # fmt: skip
        raise
    finally:
        if not protocol.exited.done():
            _kill_group(pid, signal.SIGKILL)
        transport.close()

    ended = timed_out or cut_short is not None
    exit_code = None if ended else transport.get_returncode()
    result = HookResult(
        name=name,
        ok=not ended and exit_code == 0,
        exit_code=exit_code,
        timed_out=timed_out,
        cut_short=cut_short,
        # Hook output reaches the console and manifests: mask credentials it printed.
        output=redact(tail.text()),
        duration_ms=elapsed_ms(),
    )
    if cutoff is not None and cut_short is not None:
        cutoff.record(name, context["issue_identifier"], f"cut short ({cut_short})")
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
