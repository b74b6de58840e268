"""An agent program on a worker host, over the SSH stdio channel.

:class:`RemoteLaunch` starts ``codex.command`` (or any stdio agent) in the workspace on
the host through ``ssh -T`` (hosts/ssh.py): the local ``ssh`` process is what the
session reads and writes, exactly like a local child's pipes. On the host the command
runs in a process group of its own under the wrapper of hosts/remote_group.py, so
:meth:`RemoteLaunch.stop` ends the *remote* tree (SIGTERM, grace, SIGKILL through a
second connection) before the local client: nothing of a run survives on the host.

Environment on the host: the host's login environment plus ``env`` (the backend's
``env`` overrides resolved here, then the host's ``worker.hosts.<h>.env``); the
scheduler's environment is not copied and its secrets are never sent
(config/child_env.py).

Exit statuses the session turns into one-line reasons (:func:`describe_exit`): 255 (the
connection failed or dropped), 127 (the program is missing on the host), 94 (the
workspace folder is missing there).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

from symphony_tui.agents.base import AgentError
from symphony_tui.hosts.remote_group import (
    NO_WORKSPACE_EXIT,
    NOT_FOUND_EXIT,
    alive_script,
    group_script,
    kill_script,
)
from symphony_tui.hosts.ssh import SSH_ERROR_EXIT, SshError, SshTarget

#: Seconds the remote group gets between SIGTERM and SIGKILL.
REMOTE_KILL_GRACE_S = 2.0
#: Seconds the kill command may take over the second connection.
KILL_TIMEOUT_S = 15.0
STDOUT_READER_LIMIT = 8 * 1024


class RemoteLaunch:
    """One agent process on ``target`` (the host), in ``cwd`` there."""

    def __init__(
        self, target: SshTarget, env: dict[str, str | None], *, lost_after_s: float = 60.0
    ) -> None:
        self.target = target
        self.env = env
        #: How long a detached agent's link waits for the host before the run fails as
        #: host down (``worker.host_lost_after_ms``; agents/codex/link.py).
        self.lost_after_s = lost_after_s
        self.cwd: str | None = None
        self.pgid_file = f".symphony/agent-{uuid.uuid4().hex[:12]}.pgid"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def host(self) -> str:
        return self.target.name

    async def launch(self, command: str, cwd: Path) -> asyncio.subprocess.Process:
        """Start ``command`` in ``cwd`` on the host; returns the local ``ssh`` process
        (pipes on stdin/stdout/stderr). Raises ``AgentError("launch_failed")`` (with
        ``.host_lost`` set when the host cannot be reached)."""
        self.cwd = str(cwd)
        try:
            await self.target.ensure_master()
        except SshError as err:
            raise AgentError("launch_failed", str(err), host_lost=self.host) from None
        script = group_script(
            self.cwd, command, pgid_file=self.pgid_file, env=self.env, keep_while_group_lives=True
        )
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.target.argv(script),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=STDOUT_READER_LIMIT,
            )
        except OSError as err:
            raise AgentError("launch_failed", f"cannot start ssh: {err}") from err
        return self.proc

    async def stop(self) -> str:
        """End the remote group, then the local client; returns what the host said
        (``killed <pgid>``, ``gone``, ``none``, or the connection error). Idempotent."""
        said = "none"
        if self.cwd is not None:
            try:
                done = await self.target.run(
                    kill_script(self.cwd, self.pgid_file, grace_s=REMOTE_KILL_GRACE_S),
                    timeout_s=KILL_TIMEOUT_S,
                )
                said = done.stdout.decode("utf-8", "replace").strip() or said
            except SshError as err:
                said = str(err)
        proc = self.proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5)
        return said

    async def alive(self) -> bool:
        """Whether the remote group still has a live member (diagnostics, tests)."""
        if self.cwd is None:
            return False
        done = await self.target.run(alive_script(self.cwd, self.pgid_file), timeout_s=15)
        return done.stdout.startswith(b"alive")

    def describe_exit(self, code: int | None, program: str) -> str | None:
        """A one-line reason for the ssh client's exit ``code`` (None: no special one)."""
        if code == SSH_ERROR_EXIT:
            return f"host {self.host} connection lost (ssh exit 255)"
        if code == NOT_FOUND_EXIT:
            return f"{program!r} not found on host {self.host} (exit 127)"
        if code == NO_WORKSPACE_EXIT:
            return f"workspace {self.cwd} does not exist on host {self.host}"
        return None
