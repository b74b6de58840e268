"""A local HTTP agent server started, probed and stopped by its backend (managed mode).

The launch the OpenHands and OpenCode backends share (docs/protocols.md "OpenHands agent-server",
"OpenCode server"): ``<argv> <host flag> 127.0.0.1 --port <free port>`` in its own process
group, with the environment and working directory the backend chose, stdout and stderr
appended to one log file: no pipe ties it to the scheduler, so a scheduler that dies
(``kill -9``, a crash) leaves it serving. A backend that records it (:meth:`LocalServer.record`:
``<log>.json`` beside the log, mode 0600 as it holds the server's password or key) lets the
next scheduler take it over (:meth:`LocalServer.take_over`) instead of starting another,
so the runs it was doing go on and are re-attached; an operator's stop still ends it.
Ready when the backend's health probe says so, before a deadline; a launch that fails
raises one line with the tail of that log. ``stop()`` ends the whole group (TERM, then
KILL after a grace period). Each backend keeps its own specifics (auth, environment
isolation, state paths) in a subclass.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.detached import start_ticks
from symphony_tui.agents.codex.process import end_groups
from symphony_tui.hosts.ssh import free_port
from symphony_tui.workspaces.atomic import atomic_write_bytes

LOG_TAIL_LINES = 20
PROBE_INTERVAL_S = 0.2


class HealthProbe(Protocol):
    """A client that can ask a server whether it is ready (both backends' clients are)."""

    async def health(self) -> bool: ...

    async def aclose(self) -> None: ...


def command_argv(command: str, setting: str) -> list[str]:
    """``command`` split like a shell would. Raises ``AgentError("launch_failed")`` naming
    ``setting`` (e.g. ``"opencode.command"``) for unbalanced quotes or an empty command."""
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise AgentError("launch_failed", f"{setting}: {e}") from e
    if not argv:
        raise AgentError("launch_failed", f"{setting} is empty")
    return argv


class LocalServer:
    """One server process. ``name`` (e.g. ``"agent-server"``) starts its error messages;
    ``log_path`` receives its output (appended). ``base_url`` / ``pid`` are set once
    launched; ``startup_s`` is how long readiness took (seconds)."""

    def __init__(self, name: str, log_path: Path, *, startup_timeout_s: float = 60.0) -> None:
        self.name = name
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.base_url: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        #: A server an earlier scheduler started, taken over (:meth:`take_over`): its pid
        #: and start time (not this process's child).
        self._taken: tuple[int, int | None] | None = None

    @property
    def pid(self) -> int | None:
        if self._taken is not None:
            return self._taken[0]
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        if self._taken is not None:
            pid, ticks = self._taken
            return start_ticks(pid) == ticks and ticks is not None
        return self._proc is not None and self._proc.poll() is None

    @property
    def record_path(self) -> Path:
        """Where :meth:`record` writes: beside the log, ``<log stem>.json``."""
        return self.log_path.with_suffix(".json")

    def record(
        self, secret: str, identity: Mapping[str, str], extra: Mapping[str, str] | None = None
    ) -> None:
        """Write the running server's facts (pid, start time, URL, ``secret``, what it was
        started for, ``extra`` facts of the backend, and this scheduler as its owner) to
        :attr:`record_path`, mode 0600. A failed write only costs the take-over."""
        pid = self.pid
        if pid is None or self.base_url is None:
            return
        data = {
            "pid": pid,
            "start_ticks": start_ticks(pid),
            "base_url": self.base_url,
            "secret": secret,
            "identity": dict(identity),
            "extra": dict(extra or {}),
            "owner_pid": os.getpid(),
            "owner_ticks": start_ticks(os.getpid()),
        }
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.record_path, json.dumps(data).encode(), 0o600)

    async def take_over(
        self, identity: Mapping[str, str], probe: Callable[[str, str], HealthProbe]
    ) -> tuple[str, dict[str, str]] | None:
        """Take over the recorded server when it was started for ``identity``, its owner
        (the scheduler that started or last took it) is gone, it is still the recorded
        process and ``probe(base_url, secret)`` finds it healthy; returns its secret and
        the backend's ``extra`` facts (the server is then this one: :attr:`base_url`,
        :attr:`pid`, :meth:`stop`), else None."""
        try:
            data = json.loads(self.record_path.read_text())
            pid, ticks, url = int(data["pid"]), data.get("start_ticks"), str(data["base_url"])
            secret, owner = str(data["secret"]), int(data["owner_pid"])
            mine = data.get("identity") == dict(identity)
            extra = {str(k): str(v) for k, v in (data.get("extra") or {}).items()}
        except (OSError, ValueError, KeyError, TypeError):
            return None
        # this process's own (another backend of it may use it) or a live scheduler's
        owner_alive = owner == os.getpid() or start_ticks(owner) == data.get("owner_ticks")
        if not mine or owner_alive or ticks is None or start_ticks(pid) != ticks:
            return None
        client = probe(url, secret)
        try:
            healthy = await client.health()
        finally:
            await client.aclose()
        if not healthy:
            return None
        self._taken = (pid, ticks)
        self.base_url = url
        self.startup_s = 0.0
        self.record(secret, identity, extra)  # this scheduler owns it now
        return secret, extra

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` non-blank lines of the log joined with `` | `` (one line)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())

    async def launch(
        self,
        argv: Sequence[str],
        *,
        host_flag: str,
        env: Mapping[str, str],
        cwd: Path,
        probe: Callable[[str], HealthProbe],
    ) -> None:
        """Start ``argv`` listening on a free loopback port and wait until ``probe(base_url)``
        reports healthy. Raises ``AgentError("launch_failed")`` when the program cannot be
        started, exits, or is not healthy after ``startup_timeout_s``; the process group is
        stopped (:meth:`stop`) before any error or cancellation propagates."""
        port = free_port()
        full = [*argv, host_flag, "127.0.0.1", "--port", str(port)]
        t0 = time.monotonic()
        try:
            with open(self.log_path, "ab") as log:
                try:
                    self._proc = subprocess.Popen(
                        full,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=dict(env),
                        cwd=cwd,
                        start_new_session=True,  # own process group: stop() ends every child
                    )
                except OSError as e:
                    raise AgentError("launch_failed", f"{full[0]}: {e.strerror or e}") from e
            self.base_url = f"http://127.0.0.1:{port}"
            await self._await_healthy(probe(self.base_url), t0)
        except BaseException:
            await self.stop()
            raise

    async def _await_healthy(self, probe: HealthProbe, t0: float) -> None:
        try:
            while True:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise AgentError(
                        "launch_failed",
                        f"{self.name} exited with {self._proc.returncode}: {self.log_tail()}",
                    )
                if await probe.health():
                    self.startup_s = time.monotonic() - t0
                    return
                if time.monotonic() - t0 > self.startup_timeout_s:
                    raise AgentError(
                        "launch_failed",
                        f"{self.name} not healthy after {self.startup_timeout_s:g}s: "
                        f"{self.log_tail()}",
                    )
                await asyncio.sleep(PROBE_INTERVAL_S)
        finally:
            await probe.aclose()

    async def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s`` seconds; its record is
        removed. Idempotent."""
        with contextlib.suppress(OSError):
            self.record_path.unlink()
        taken, self._taken = self._taken, None
        if taken is not None:
            await end_groups(taken[0], grace_s, None)
            return
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        # The group may hold children (tool shells) even after the leader is gone.
        signal_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            await asyncio.to_thread(proc.wait)


def takeable(record_path: Path) -> bool:
    """True when ``record_path`` (:meth:`LocalServer.record`) names a server that is still
    the recorded process and whose owner scheduler is gone (a crashed one's server,
    :meth:`LocalServer.take_over` may take it)."""
    try:
        data = json.loads(record_path.read_text())
        pid, owner = int(data["pid"]), int(data["owner_pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    ticks = data.get("start_ticks")
    owner_alive = owner == os.getpid() or start_ticks(owner) == data.get("owner_ticks")
    return ticks is not None and start_ticks(pid) == ticks and not owner_alive


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is gone or not ours is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def health_answered(client, tries: int = 3, pause_s: float = 0.5) -> bool:
    """``await client.health()`` asked up to ``tries`` times, ``pause_s`` apart (a loaded host
    can miss one); True once one answers healthy (``doctor``'s server check)."""
    for attempt in range(tries):
        if await client.health():
            return True
        if attempt + 1 < tries:
            await asyncio.sleep(pause_s)
    return False
