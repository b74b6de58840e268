"""A managed HTTP agent server (OpenCode, OpenHands) on a worker host.

The remote version of :mod:`symphony_tui.agents.local_server`, one server per session:

* **Launch**: the backend's shell command runs in the workspace on the host through
  ssh, under the process-group wrapper of :mod:`symphony_tui.hosts.remote_group`
  (:class:`~symphony_tui.agents.remote_launch.RemoteLaunch`), bound to the host's
  127.0.0.1 at a port picked here at random in :data:`REMOTE_PORTS`. A port that turns
  out taken on the host (the server exits and its log says so) is retried with another,
  up to :data:`BIND_TRIES` times: no program of the host (python, ss) is needed to pick
  one. Its output is appended to ``<state>/server.log`` in the workspace; secrets the
  backend passes as ``stdin`` reach the server's shell on its stdin (never on a command
  line the host's ``ps`` shows).
* **Forward**: a ssh client of its own (``ssh -N -L 127.0.0.1:<local>:127.0.0.1:<remote>``,
  :meth:`SshTarget.forward_argv`) per server, rather than ``ssh -O forward`` on the
  shared master: it works with connection reuse off, the forward ends with the client
  (nothing is left listening in a master that outlives the run), its exit says the
  connection dropped, and ``ExitOnForwardFailure`` reports a local port taken meanwhile
  (retried with another). Every request, the OpenHands WebSocket and the OpenCode SSE
  stream go through it; ``base_url`` is ``http://127.0.0.1:<local>``.
* **Ready**: the backend's health probe answers through the forward before
  ``startup_timeout_s``. A launch that fails raises ``AgentError("launch_failed")`` with one
  line: the program missing on the host (exit 127), the workspace missing (94), the
  connection failing (ssh exit 255: ``.host_lost`` set, so the scheduler marks the host
  down), or the exit status / deadline with the tail of the remote log (fetched over ssh).
* **Lost**: once ready, the launch client or the forward ending on its own calls
  ``on_lost(error, host_lost)``: ``host_lost`` is the reason when the connection dropped
  (ssh exit 255), else None (the server exited).
* **Stop**: the remote group gets SIGTERM, a grace period, SIGKILL (over another
  connection), then the local clients end; ``extra_stop`` (a backend's own cleanup script
  on the host, e.g. OpenHands' tmux servers) runs after. Idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.local_server import (
    LOG_TAIL_LINES,
    PROBE_INTERVAL_S,
    HealthProbe,
    free_port,
)
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import Settings
from symphony_tui.hosts.remote_group import NO_WORKSPACE_EXIT, NOT_FOUND_EXIT, home_path
from symphony_tui.hosts.ssh import SSH_ERROR_EXIT, SshError, SshTarget, classify_ssh_failure

#: Ports a server is bound to on the host (above the usual ephemeral range's start on
#: most systems is fine: a clash is retried).
REMOTE_PORTS = (20_000, 59_999)
#: Launches with a fresh port before a bind failure is final.
BIND_TRIES = 3
#: Log lines that mean "that port is taken" (OpenCode 1.18: ``ServeError``; uvicorn and
#: Bun/Node spell the errno).
_BIND_FAILED = re.compile(
    r"address already in use|eaddrinuse|errno 98|serveerror|failed to start server", re.I
)
#: What ssh says when the local end of a forward cannot be bound.
_FORWARD_FAILED = re.compile(
    r"cannot listen|could not request local forwarding|address already in use", re.I
)

LostCallback = Callable[[AgentError, str | None], None]


def host_launch(
    settings: Settings,
    worker_host: str,
    backend: str,
    command: str | None,
    env: Mapping[str, object],
    recipe: ChildEnv,
) -> tuple[str, dict[str, str | None]]:
    """What a server backend runs on ``worker_host``: its command there (the host's own
    ``worker.hosts.<h>.commands`` entry, else ``command``) and its environment overrides
    (``env``, then the host's ``env``), resolved here with ``recipe``. Raises
    ``AgentError("launch_failed")`` when there is no command."""
    resolved = settings.worker.command_for(worker_host, backend, command or "")
    if not resolved:
        raise AgentError("launch_failed", f"{backend}.command is not set (worker hosts)")
    overrides = recipe.overrides(env)
    overrides.update(recipe.overrides(settings.worker.env_for(worker_host)))
    return resolved, overrides


class RemoteServer:
    """One server process on ``target``'s host in ``workspace`` (the path there).

    ``name`` starts messages (e.g. ``"opencode serve"``); ``command`` is the configured
    command (named when it is missing on the host); ``state`` is the server's folder
    relative to the workspace (its log is ``<state>/server.log``). ``base_url`` is set
    once started; ``startup_s`` is how long readiness took (seconds)."""

    def __init__(
        self,
        name: str,
        target: SshTarget,
        workspace: str,
        *,
        command: str,
        state: str,
        startup_timeout_s: float = 60.0,
        extra_stop: str | None = None,
    ) -> None:
        self.name = name
        self.target = target
        self.workspace = workspace
        self.command = command
        self.state = state
        self.log = f"{state}/server.log"
        self.startup_timeout_s = startup_timeout_s
        self.extra_stop = extra_stop
        self.base_url: str | None = None
        self.remote_port: int | None = None
        self.startup_s: float | None = None
        self.on_lost: LostCallback | None = None
        self._launch: RemoteLaunch | None = None
        self._forward: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr: list[str] = []
        self._stopping = False

    @property
    def host(self) -> str:
        return self.target.name

    @property
    def running(self) -> bool:
        launch = self._launch.proc if self._launch is not None else None
        return (
            launch is not None
            and launch.returncode is None
            and self._forward is not None
            and self._forward.returncode is None
        )

    async def start(
        self,
        script: Callable[[int, str], str],
        *,
        probe: Callable[[str], HealthProbe],
        stdin: bytes = b"",
    ) -> None:
        """Launch ``script(port, log)`` (a shell command line, run by the host's shell in
        the workspace; it must bind the server to 127.0.0.1:``port`` and append its
        output to ``log``), forward a local port to it and wait until ``probe(base_url)``
        is healthy. Raises ``AgentError("launch_failed")`` (see the module doc); what was
        started is stopped before any error or cancellation propagates."""
        t0 = time.monotonic()
        try:
            for attempt in range(BIND_TRIES):
                port = random.randint(*REMOTE_PORTS)
                if await self._try(script(port, self.log), port, stdin, probe, t0):
                    self.startup_s = time.monotonic() - t0
                    self._tasks.append(asyncio.create_task(self._watch()))
                    return
                if attempt + 1 == BIND_TRIES:
                    raise AgentError(
                        "launch_failed",
                        f"{self.name} on host {self.host} found no free port in "
                        f"{BIND_TRIES} tries: {await self.log_tail(port)}",
                    )
                await self._end_processes()
        except BaseException:
            await self.stop()
            raise

    async def attach(self, address: str, port: int, *, probe: Callable[[str], HealthProbe]) -> None:
        """Forward a local port to a server already running on the host at
        ``address:port`` (as the host reaches it; ``worker.hosts.<h>.base_url``) and wait
        until ``probe(base_url)`` is healthy; nothing is launched or stopped there but the
        forward. Raises ``AgentError("launch_failed")``; ``.host_lost`` set when the
        connection fails."""
        t0 = time.monotonic()
        where = f"http://{address}:{port}"
        try:
            await self.target.ensure_master()
        except SshError as err:
            raise AgentError("launch_failed", str(err), host_lost=self.host) from None
        try:
            local = await self._open_forward(port, address)
            self.base_url = f"http://127.0.0.1:{local}"
            client = probe(self.base_url)
            try:
                while not await client.health():
                    forward = self._forward
                    if forward is not None and forward.returncode is not None:
                        local = await self._forward_ended(forward, port, address)
                        self.base_url = f"http://127.0.0.1:{local}"
                        await client.aclose()
                        client = probe(self.base_url)
                    if time.monotonic() - t0 > self.startup_timeout_s:
                        raise AgentError(
                            "launch_failed",
                            f"{self.name} at {where} on host {self.host} not healthy after "
                            f"{self.startup_timeout_s:g}s",
                        )
                    await asyncio.sleep(PROBE_INTERVAL_S)
            finally:
                await client.aclose()
            self.startup_s = time.monotonic() - t0
            self._tasks.append(asyncio.create_task(self._watch()))
        except BaseException:
            await self.stop()
            raise

    async def _try(
        self,
        command: str,
        port: int,
        stdin: bytes,
        probe: Callable[[str], HealthProbe],
        t0: float,
    ) -> bool:
        """One launch on ``port``: True once healthy, False when the port was taken."""
        self._launch = RemoteLaunch(self.target, {})
        self._stderr = []
        marker = shlex.quote(f"=== {self.name} on port {port}")
        log = shlex.quote(self.log)
        full = f"mkdir -p {shlex.quote(self.state)} && echo {marker} >> {log} || exit 1; {command}"
        proc = await self._launch.launch(full, Path(self.workspace))
        assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
        with contextlib.suppress(OSError, ConnectionError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
            proc.stdin.close()
        self._tasks.append(asyncio.create_task(_drain(proc.stdout, None)))
        self._tasks.append(asyncio.create_task(_drain(proc.stderr, self._stderr)))
        self.remote_port = port
        local = await self._open_forward(port)
        self.base_url = f"http://127.0.0.1:{local}"
        client = probe(self.base_url)
        try:
            while True:
                if proc.returncode is not None:
                    return await self._exited(proc.returncode, port)
                forward = self._forward
                if forward is not None and forward.returncode is not None:
                    local = await self._forward_ended(forward, port)
                    self.base_url = f"http://127.0.0.1:{local}"
                    await client.aclose()
                    client = probe(self.base_url)
                if await client.health():
                    return True
                if time.monotonic() - t0 > self.startup_timeout_s:
                    raise AgentError(
                        "launch_failed",
                        f"{self.name} on host {self.host} not healthy after "
                        f"{self.startup_timeout_s:g}s: {await self.log_tail(port)}",
                    )
                await asyncio.sleep(PROBE_INTERVAL_S)
        finally:
            await client.aclose()

    async def _open_forward(self, remote_port: int, address: str = "127.0.0.1") -> int:
        local = free_port()
        try:
            self._forward = await asyncio.create_subprocess_exec(
                *self.target.forward_argv(local, remote_port, address),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as err:
            raise AgentError("launch_failed", f"cannot start ssh: {err}") from err
        return local

    async def _forward_ended(
        self, forward: asyncio.subprocess.Process, port: int, address: str = "127.0.0.1"
    ) -> int:
        """The forward's client exited before the server was ready: a local port taken
        meanwhile gets another one; a dropped connection is the host lost."""
        said = b""
        if forward.stderr is not None:
            with contextlib.suppress(Exception):
                said = await asyncio.wait_for(forward.stderr.read(), 2)
        text = said.decode("utf-8", "replace").strip()
        if forward.returncode == SSH_ERROR_EXIT and _FORWARD_FAILED.search(text):
            return await self._open_forward(port, address)
        reason = _classified(self.host, text)
        raise AgentError("launch_failed", f"port forward: {reason}", host_lost=self.host)

    async def _exited(self, code: int, port: int) -> bool:
        """The server's client exited before it was ready: False to retry another port,
        else raises the one-line reason."""
        if code == SSH_ERROR_EXIT:
            said = " ".join(self._stderr[-3:])
            raise AgentError(
                "launch_failed",
                f"{self.name}: {_classified(self.host, said)}",
                host_lost=self.host,
            )
        if code == NOT_FOUND_EXIT:
            raise AgentError(
                "launch_failed", f"{self.command!r} not found on host {self.host} (exit 127)"
            )
        if code == NO_WORKSPACE_EXIT:
            raise AgentError(
                "launch_failed", f"workspace {self.workspace} does not exist on host {self.host}"
            )
        tail = await self.log_tail(port)
        if _BIND_FAILED.search(tail):
            return False
        said = tail or " | ".join(self._stderr[-3:])
        raise AgentError(
            "launch_failed", f"{self.name} exited with {code} on host {self.host}: {said}"
        )

    async def log_tail(self, port: int | None = None, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` non-blank lines the server wrote since its launch on ``port``
        (default: the last launch), fetched over ssh, joined with `` | `` (one line)."""
        port = self.remote_port if port is None else port
        marker = f"=== {self.name} on port {port}"
        script = (
            f"cd {home_path(self.workspace)} 2>/dev/null && "
            f"awk -v m={shlex.quote(marker)} '$0 == m {{ n = 0; next }} {{ a[n++] = $0 }} "
            f"END {{ for (i = (n > {lines} ? n - {lines} : 0); i < n; i++) print a[i] }}' "
            f"{shlex.quote(self.log)}"
        )
        try:
            done = await self.target.run(script, timeout_s=15)
        except SshError as err:
            return f"(log not read: {err})"
        text = done.stdout.decode("utf-8", "replace")
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())

    async def _watch(self) -> None:
        """Once ready: the first of the two clients to end on its own is the server lost."""
        launch = self._launch.proc if self._launch is not None else None
        forward = self._forward
        if forward is None:
            return
        waits = {asyncio.ensure_future(forward.wait())}
        if launch is not None:  # None: attached to a server run by other means
            waits.add(asyncio.ensure_future(launch.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if self._stopping:
            return
        if launch is None or SSH_ERROR_EXIT in (launch.returncode, forward.returncode):
            reason = f"host {self.host} connection lost (ssh exit 255)"
            error, lost = AgentError("transport_error", reason), reason
        else:
            error = AgentError(
                "process_exited",
                f"{self.name} exited with {launch.returncode} on host {self.host}: "
                f"{await self.log_tail()}",
            )
            lost = None
        if self.on_lost is not None:
            self.on_lost(error, lost)

    async def _end_processes(self) -> None:
        launch, self._launch = self._launch, None
        if launch is not None:
            await launch.stop()  # the group on the host first, then the local client
        forward, self._forward = self._forward, None
        if forward is not None and forward.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                forward.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(forward.wait(), 5)

    async def stop(self) -> None:
        """End the server's group on the host (SIGTERM, grace, SIGKILL), the local ssh
        clients and ``extra_stop``. Idempotent; never raises for an unreachable host."""
        self._stopping = True
        had_launch = self._launch is not None
        current = asyncio.current_task()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            if task is not current:
                task.cancel()
        await self._end_processes()
        extra, self.extra_stop = self.extra_stop, None
        if extra and had_launch:
            with contextlib.suppress(SshError):
                await self.target.run(f"cd {home_path(self.workspace)} && {extra}", timeout_s=15)


async def _drain(stream: asyncio.StreamReader, keep: list[str] | None) -> None:
    """Read ``stream`` to its end (so the client never blocks on a full pipe), keeping the
    last lines in ``keep``."""
    with contextlib.suppress(Exception):
        while line := await stream.readline():
            if keep is not None:
                text = line.decode("utf-8", "replace").strip()
                if text:
                    keep.append(text[:300])
                    del keep[:-10]


def _classified(host: str, stderr: str) -> str:
    """ssh's own error text as the one-line host reason (as hosts/ssh.py words it)."""
    if not stderr.strip():
        return f"host {host} connection lost (ssh exit 255)"
    return str(classify_ssh_failure(host, stderr))
