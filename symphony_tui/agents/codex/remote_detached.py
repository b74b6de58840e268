"""A detached codex app-server on a worker host, reached through an ssh forward
(docs/worker-hosts.md "A link that reconnects").

:func:`launch_on_host` starts ``codex.command --listen unix://<socket>`` in the issue's
workspace on the host, in a session of its own with no tie to the ssh connection that
started it (hosts/remote_group.py ``detached_script``): whatever ends a connection (a
network change, a restarted ssh, the scheduler's own restart) leaves the agent and its
turn running there. The socket is on the host's file system, in a folder only the user can
enter, so nothing listens on a network port.

:class:`HostPlace` is the :class:`~symphony_tui.agents.codex.link.Place` of such an
app-server: :meth:`HostPlace.socket` forwards a unix socket in a private folder here to the
host's socket (``ssh -N -L``, a connection of its own, hosts/ssh.py), so the session talks
to it exactly as to a local detached app-server (one mechanism: agents/codex/link.py);
:meth:`HostPlace.alive` asks the host whether the process group still lives (None when the
host does not answer). :func:`stop_on_host` ends the group there and removes its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shlex
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.detached import SOCKET_NAME, DetachedAgent, socket_folder
from symphony_tui.hosts.remote_group import (
    NO_WORKSPACE_EXIT,
    alive_script,
    detached_script,
    kill_script,
)
from symphony_tui.hosts.ssh import SshError, SshTarget, classify_ssh_failure

LOG_FILE = ".symphony/codex-app-server.log"
#: Seconds the remote group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 2.0
#: Seconds a command on the host (launch, alive, stop) may take.
COMMAND_TIMEOUT_S = 20.0


async def launch_on_host(
    target: SshTarget, command: str, cwd: str, env: dict[str, str | None]
) -> DetachedAgent:
    """Start the app-server detached in ``cwd`` on the host. Raises
    ``AgentError("launch_failed")`` (``host_lost`` set when the host cannot be reached)."""
    pgid_file = f".symphony/agent-{uuid.uuid4().hex[:12]}.pgid"
    script = detached_script(cwd, command, pgid_file=pgid_file, log_file=LOG_FILE, env=env)
    try:
        done = await target.run(script, timeout_s=COMMAND_TIMEOUT_S)
    except SshError as err:
        raise AgentError("launch_failed", str(err), host_lost=target.name) from None
    if done.exit_code == NO_WORKSPACE_EXIT:
        raise AgentError("launch_failed", f"workspace {cwd} does not exist on host {target.name}")
    words = done.stdout.decode("utf-8", "replace").split()
    if not done.ok or len(words) != 3 or not words[0].isdigit():
        why = done.stderr_line() or f"exit {done.exit_code}"
        raise AgentError("launch_failed", f"cannot start {command!r} on host {target.name}: {why}")
    pid = int(words[0])
    return DetachedAgent(
        pid=pid,
        pgid=pid,
        socket=words[1],
        log=f"{cwd.rstrip('/')}/{LOG_FILE}",
        started_at=datetime.now(UTC).isoformat(),
        start_ticks=int(words[2]) if words[2].isdigit() else None,
        host=target.name,
        pgid_file=pgid_file,
    )


async def log_tail_on_host(target: SshTarget, agent: DetachedAgent, lines: int = 5) -> str:
    """The last ``lines`` non-blank lines of the app-server's log on the host, joined with
    `` | `` (empty when the host does not answer)."""
    try:
        done = await target.run(f"tail -n 40 {shlex.quote(agent.log)}", timeout_s=10)
    except SshError:
        return ""
    text = done.stdout.decode("utf-8", "replace")
    kept = [line.strip()[:500] for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


async def stop_on_host(target: SshTarget, agent: DetachedAgent, cwd: str) -> str:
    """End the app-server's group on the host (SIGTERM, grace, SIGKILL) and remove its
    socket folder; returns what the host said (``killed <pgid>``, ``gone``, ``none``, or
    the connection's error)."""
    folder = shlex.quote(agent.socket.rsplit("/", 1)[0])
    script = (
        f"({kill_script(cwd, agent.pgid_file or '', grace_s=KILL_GRACE_S)}); "
        f"rm -f {shlex.quote(agent.socket)}; rmdir {folder} 2>/dev/null; exit 0"
    )
    try:
        done = await target.run(script, timeout_s=COMMAND_TIMEOUT_S)
    except SshError as err:
        return str(err)
    return done.stdout.decode("utf-8", "replace").strip() or "none"


def end_with_parent() -> None:
    """In the forked ssh client, before exec: SIGTERM when this scheduler ends, however
    it ends (Linux ``PR_SET_PDEATHSIG``), so a crashed scheduler leaves no forward holding
    a connection to the app-server (a restarted one makes its own)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


class HostPlace:
    """A detached app-server on a worker host (``agent.host``), in ``cwd`` there."""

    def __init__(self, target: SshTarget, agent: DetachedAgent, cwd: str) -> None:
        self.target = target
        self.agent = agent
        self.cwd = cwd
        self.host: str | None = target.name
        self._folder: Path | None = None
        self._forward: asyncio.subprocess.Process | None = None

    @property
    def local_socket(self) -> str | None:
        """The forwarded socket here (None before the first :meth:`socket`)."""
        return None if self._folder is None else str(self._folder / SOCKET_NAME)

    async def socket(self) -> str:
        """Start the forward and wait until its socket here listens. Raises
        ``AgentError("launch_failed")`` (``host_lost`` set for a connection failure)."""
        await self.drop()
        if self._folder is None:
            self._folder = socket_folder()
        local = self._folder / SOCKET_NAME
        argv = self.target.forward_socket_argv(str(local), self.agent.socket)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=end_with_parent,
            )
        except OSError as err:
            raise AgentError("launch_failed", f"cannot start ssh: {err}") from err
        self._forward = proc
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.target.connect_timeout_s + 5
        while not local.exists():
            if proc.returncode is not None or loop.time() >= deadline:
                await self.drop()
                said = b""
                if proc.stderr is not None:
                    with contextlib.suppress(Exception):
                        said = await asyncio.wait_for(proc.stderr.read(), 1.0)
                why = classify_ssh_failure(self.target.name, said.decode("utf-8", "replace"))
                raise AgentError(
                    "launch_failed", f"socket forward: {why}", host_lost=self.target.name
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 0.05)
        return str(local)

    async def drop(self) -> None:
        """End the forward (its connection), remove its socket here. Idempotent."""
        proc, self._forward = self._forward, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5)
        if self._folder is not None:
            with contextlib.suppress(OSError):
                (self._folder / SOCKET_NAME).unlink()

    async def alive(self) -> bool | None:
        """Whether the group runs on the host (None: the host does not answer)."""
        try:
            done = await self.target.run(
                alive_script(self.cwd, self.agent.pgid_file or ""), timeout_s=COMMAND_TIMEOUT_S
            )
        except SshError:
            return None
        return done.stdout.startswith(b"alive")

    async def tail(self) -> str:
        return await log_tail_on_host(self.target, self.agent)

    async def release(self) -> None:
        """End the forward and remove the private folder of its socket."""
        await self.drop()
        if self._folder is not None:
            with contextlib.suppress(OSError):
                (self._folder / SOCKET_NAME).unlink()
            with contextlib.suppress(OSError):
                os.rmdir(self._folder)
            self._folder = None
