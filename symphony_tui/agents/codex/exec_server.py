"""codex's commands and file edits on a worker host, its app-server here
(``worker.hosts.<h>.codex_mode: exec-server``; docs/worker-hosts.md "Exec-server hosts").

:class:`ExecServerLink` starts ``<codex program> exec-server`` in the issue's workspace on
the host, detached from the ssh connection that starts it (its own session and process
group, stdin ``/dev/null``, output in ``<workspace>/.symphony/codex-exec-server.log``,
its group in a pgid file as for any agent there, so stop, the reaper and resource
sampling find it), listening on the host's loopback on a port it picks itself
(``ws://127.0.0.1:0``; it prints the bound URL, which the launch script waits for).
The scheduler reaches it through a connection of the link's own (``ssh -N -M``, made
while the exec-server starts: hosts/ssh.py ``connection_argv``) with the forward
``127.0.0.1:<local>:127.0.0.1:<port>`` added to it once the port is known
(``add_forward_argv``), and gives the session's app-server,
which runs on this machine, that environment with ``environment/add`` (URL and bearer
token) and ``environments`` on ``thread/start`` and ``turn/start``.

The capability token: 32 random bytes, URL-safe text, kept in a file of its own here
(mode 0600, in a 0700 folder of this user: :func:`write_token`; ``flock``-ed for the run's
life: :func:`hold_token`, so the next start removes those of a killed scheduler:
:func:`sweep_stale_tokens`), sent to the app-server
only inside the ``environment/add`` request on its stdin. The host gets its SHA-256
(``--ws-auth capability-token --ws-token-sha256``): the token is on no command line, in
no environment, in no file on the host, in no log or event.

A dropped forward (its connection's ssh client exited: a network change, a restarted
sshd, a killed client) is made again on the same local port after a jittered backoff
(:data:`RECONNECT_BACKOFF`); codex resumes its exec-server session on the new connection
by itself (the command in flight goes on and its output is read from where it was). The
link's state (``connected``, ``reconnecting`` since, ``lost``) is told as a
:class:`~symphony_tui.domain.payloads.LinkChanged` event (mode ``exec-server``). A host not
reached for ``lost_after_s`` (``worker.host_lost_after_ms``) ends the link with
:attr:`ExecServerLink.host_lost` set (the run fails as ``host down``); an exec-server found
gone on a host that answers ends it without (the agent's environment exited).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import random
import secrets
import shlex
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.link import link_event
from symphony_tui.agents.codex.remote_detached import end_with_parent
from symphony_tui.agents.reconnect import Backoff
from symphony_tui.domain import AgentEvent
from symphony_tui.hosts.remote_group import (
    NO_WORKSPACE_EXIT,
    NOT_FOUND_EXIT,
    alive_script,
    home_path,
    kill_script,
)
from symphony_tui.hosts.ssh import (
    SshError,
    SshTarget,
    classify_ssh_failure,
    env_exports,
    free_port,
    sh_word,
)

MODE = "exec-server"
#: The id of the host's environment in the app-server (``environment/add``).
ENVIRONMENT_ID = "worker-host"
LOG_FILE = ".symphony/codex-exec-server.log"
TOKEN_NAME = "exec-server.token"
CONTROL_NAME = "ssh.sock"
#: Seconds the launch script waits on the host for the exec-server's URL.
READY_WAIT_S = 20
#: Seconds a command on the host (launch, alive, stop) may take.
COMMAND_TIMEOUT_S = READY_WAIT_S + 10.0
#: Seconds the exec-server's group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 2.0
#: Timing of the attempts to start a dropped forward again (bounded by time instead).
RECONNECT_BACKOFF = Backoff(initial_s=0.25, max_s=5.0, max_attempts=1_000_000, jitter=0.5)
#: Between two tries to connect to a forward's local port that is not bound yet.
PORT_POLL_S = 0.05
#: Seconds after which an unheld token file is a dead scheduler's (:func:`sweep_stale_tokens`).
STALE_AFTER_S = 10.0

CONNECTED = "connected"
RECONNECTING = "reconnecting"
LOST = "lost"


def exec_server_program(command: str) -> str:
    """The words of ``command`` (codex's app-server command) before ``app-server``: the
    codex program on the host. Raises ``ValueError`` when it has no such word."""
    words = shlex.split(command)
    if "app-server" not in words:
        raise ValueError(
            f"{command!r} has no word app-server: cannot tell the codex program to run "
            "exec-server on the host"
        )
    program = words[: words.index("app-server")]
    if not program:
        raise ValueError(f"{command!r} names no program before app-server")
    return shlex.join(program)


def new_token() -> str:
    """A new capability token (256 random bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """The hex SHA-256 of ``token``: what the exec-server is given (``--ws-token-sha256``)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def write_token(folder: Path, token: str) -> Path:
    """Write ``token`` to ``folder/exec-server.token``, mode 0600, ``folder`` being a 0700
    folder of this user (checked); an existing file or link there is refused. Returns
    the path. Raises ``AgentError("launch_failed")``."""
    try:
        info = folder.lstat()
    except OSError as e:
        raise AgentError("launch_failed", f"token folder {folder}: {e.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise AgentError("launch_failed", f"token folder {folder} is not a folder of this user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise AgentError("launch_failed", f"token folder {folder} is open to others")
    path = folder / TOKEN_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise AgentError(
            "launch_failed", f"cannot write the token file {path}: {e.strerror}"
        ) from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token)
    return path


def hold_token(path: Path) -> int:
    """An open descriptor of the token file at ``path`` with an exclusive ``flock`` on it:
    held for the run's life, it tells :func:`sweep_stale_tokens` the file is in use (a
    scheduler that ended, however, released it). Close it to let go. Raises
    ``AgentError("launch_failed")``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise AgentError(
            "launch_failed", f"cannot open the token file {path}: {e.strerror}"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        raise AgentError(
            "launch_failed", f"cannot lock the token file {path}: {e.strerror}"
        ) from None
    return fd


def sweep_stale_tokens(base: Path, *, older_than_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the token folders under ``base`` (``<base>/*/exec-server.token``) that no
    live link holds (:func:`hold_token`) and that are older than ``older_than_s``: what a
    scheduler that was killed left (its token file, the control socket, the folder).
    Returns the folders removed; a folder with anything else in it is left."""
    removed: list[Path] = []
    now = time.time()
    for path in base.glob(f"*/{TOKEN_NAME}"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if info.st_uid != os.getuid() or now - info.st_mtime < older_than_s:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live link holds it
            folder = path.parent
            for name in (TOKEN_NAME, CONTROL_NAME):
                with contextlib.suppress(OSError):
                    (folder / name).unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()
                removed.append(folder)
        finally:
            os.close(fd)
    return removed


def read_token(path: Path) -> str:
    """The token in ``path``, which must be this user's regular file of mode 0600 (a
    link, another owner or a file others may read is refused). Raises ``AgentError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise AgentError(
            "reattach_failed", f"cannot read the token file {path}: {e.strerror}"
        ) from None
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise AgentError("reattach_failed", f"token file {path} is not this user's file")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise AgentError("reattach_failed", f"token file {path} is open to others")
        return f.read().strip()


def launch_script(
    cwd: str,
    program: str,
    digest: str,
    *,
    pgid_file: str,
    env: Mapping[str, str | None] | None = None,
    wait_s: int = READY_WAIT_S,
) -> str:
    """The ``sh`` script that starts ``<program> exec-server`` in ``cwd`` on the host,
    detached (as hosts/remote_group.py ``detached_script``), on the host's loopback with a
    port of its choosing, and waits up to ``wait_s`` for it to print its URL. Prints
    ``<pgid> <url> <start ticks or ->``; exits :data:`NO_WORKSPACE_EXIT` when ``cwd`` is
    missing, :data:`NOT_FOUND_EXIT` when the program is, 1 when it did not start (its
    log's tail on stderr)."""
    exports = env_exports({k: v for k, v in (env or {}).items() if v is not None})
    unsets = "".join(f"unset {k}; " for k, v in (env or {}).items() if v is None)
    folder = pgid_file.rsplit("/", 1)[0] if "/" in pgid_file else "."
    command = (
        f"{program} exec-server --listen ws://127.0.0.1:0 "
        f"--ws-auth capability-token --ws-token-sha256 {digest}"
    )
    return (
        f"cd {home_path(cwd)} 2>/dev/null || "
        f"{{ echo 'workspace {cwd} does not exist on this host' >&2; exit {NO_WORKSPACE_EXIT}; }}; "
        f"{unsets}{exports}"
        f"mkdir -p {shlex.quote(folder)} .symphony 2>/dev/null; "
        f'pgf={shlex.quote(pgid_file)}; log={shlex.quote(LOG_FILE)}; : > "$log"; '
        f"cmd={sh_word(command)}; "
        "if command -v bash >/dev/null 2>&1; then sh_=bash; fl=-lc; else sh_=sh; fl=-c; fi; "
        "if command -v setsid >/dev/null 2>&1; then "
        'set -- setsid "$sh_" "$fl" "$cmd"; '
        "elif command -v perl >/dev/null 2>&1; then "
        'set -- perl -e \'setpgrp(0,0); exec @ARGV or exit 127\' "$sh_" "$fl" "$cmd"; '
        "else echo 'neither setsid nor perl on this host' >&2; exit 1; fi; "
        '"$@" </dev/null >>"$log" 2>&1 & '
        'pid=$!; { echo "$pid"; uname -n; } > "$pgf" 2>/dev/null; '
        "t=$(cut -d' ' -f22 /proc/$pid/stat 2>/dev/null); u=; i=0; "
        f"while [ $i -lt {wait_s * 10} ]; do "
        "u=$(grep -m1 -o 'ws://127\\.0\\.0\\.1:[0-9][0-9]*' \"$log\" 2>/dev/null); "
        '[ -n "$u" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; i=$((i+1)); done; '
        'if [ -z "$u" ]; then rc=1; if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; rc=$?; '
        'else kill -s KILL -- -"$pid" 2>/dev/null; fi; rm -f "$pgf"; '
        f'tail -n 5 "$log" >&2; [ "$rc" = {NOT_FOUND_EXIT} ] || rc=1; exit $rc; fi; '
        'echo "$pid $u ${t:--}"'
    )


def link_changed(host: str, state: str, since: datetime | None, reason: str) -> AgentEvent:
    """The event that tells the scheduler the exec-server link's new ``state``."""
    return link_event(host, state, since, reason, mode=MODE, up="connected")


class ExecServerLink:
    """One run's exec-server on ``target`` in ``cwd`` there, and its forward here.

    ``command``: codex's app-server command on that host (its program is taken from it:
    :func:`exec_server_program`); ``env``: exported there; ``folder``: a 0700 folder
    here for the token file; ``on_state(event)``: each :func:`link_changed` event;
    ``on_lost()``: once, when the link is lost (:attr:`close_reason`, :attr:`host_lost`).
    """

    def __init__(
        self,
        target: SshTarget,
        cwd: str,
        command: str,
        env: Mapping[str, str | None],
        folder: Path,
        *,
        lost_after_s: float,
        on_state: Callable[[AgentEvent], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        backoff: Backoff = RECONNECT_BACKOFF,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.target = target
        self.cwd = cwd
        self.command = command
        self.env = dict(env)
        self.folder = folder
        self.lost_after_s = lost_after_s
        self.on_state = on_state
        self.on_lost = on_lost
        self._backoff = backoff
        self._draw = draw
        self.pgid_file = f".symphony/agent-{uuid.uuid4().hex[:12]}.pgid"
        self.pid: int | None = None
        self.remote_port: int | None = None
        self.local_port: int | None = None
        self.token_file: Path | None = None
        self.state = CONNECTED
        self.since: datetime | None = None
        self.reconnects = 0
        self.close_reason = ""
        #: Set (the host's name) when the link ended because its host was not reached.
        self.host_lost: str | None = None
        self._forward: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._closing = False
        self._launched = False
        self._held: int | None = None  # the token file's descriptor, locked (hold_token)

    @property
    def host(self) -> str:
        return self.target.name

    @property
    def url(self) -> str:
        """The exec-server's URL as the app-server here reaches it (through the forward)."""
        return f"ws://127.0.0.1:{self.local_port}"

    def token(self) -> str:
        """The capability token (read from its file)."""
        assert self.token_file is not None
        return read_token(self.token_file)

    def environment(self) -> dict[str, object]:
        """The ``environment/add`` params (the token among them: never log them)."""
        return {
            "environmentId": ENVIRONMENT_ID,
            "execServerUrl": self.url,
            "authBearerToken": self.token(),
        }

    def environments(self) -> list[dict[str, str]]:
        """``environments`` for ``thread/start`` and ``turn/start``: the host, in ``cwd``."""
        return [{"environmentId": ENVIRONMENT_ID, "cwd": self.cwd}]

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        """Start the exec-server on the host and, side by side, the link's own connection
        to the host; then the forward on it. Raises ``AgentError("launch_failed")``
        (``host_lost`` set when the host is not reached)."""
        sweep_stale_tokens(self.folder.parent)
        token = new_token()
        self.token_file = write_token(self.folder, token)
        self._held = hold_token(self.token_file)
        try:
            program = exec_server_program(self.command)
        except ValueError as e:
            raise AgentError("launch_failed", str(e)) from None
        script = launch_script(
            self.cwd, program, token_digest(token), pgid_file=self.pgid_file, env=self.env
        )
        del token
        connecting = asyncio.ensure_future(self._connect())
        try:
            self.pid, self.remote_port = await self._launch(script, program)
            self.local_port = free_port()
            await self._open_forward(connecting)
        except BaseException:
            connecting.cancel()
            with contextlib.suppress(BaseException):
                self._forward = await connecting
            await self._drop_forward()
            raise
        self._watch = asyncio.create_task(self._follow(), name="codex-exec-server-link")

    async def _launch(self, script: str, program: str) -> tuple[int, int]:
        """Run the launch script on the host; returns the exec-server's pid and port."""
        self._launched = True  # from here on, stop ends whatever the pgid file names
        try:
            done = await self.target.run(script, timeout_s=COMMAND_TIMEOUT_S)
        except SshError as err:
            raise AgentError("launch_failed", str(err), host_lost=self.host) from None
        if done.exit_code == NO_WORKSPACE_EXIT:
            raise AgentError(
                "launch_failed", f"workspace {self.cwd} does not exist on host {self.host}"
            )
        if done.exit_code == NOT_FOUND_EXIT:
            raise AgentError(
                "launch_failed",
                f"{program!r} not found on host {self.host} (exit 127): {done.stderr_line()}",
            )
        words = done.stdout.decode("utf-8", "replace").split()
        if not done.ok or len(words) != 3 or not words[0].isdigit():
            why = done.stderr_line() or f"exit {done.exit_code}"
            raise AgentError(
                "launch_failed", f"cannot start {program} exec-server on host {self.host}: {why}"
            )
        return int(words[0]), int(words[1].rsplit(":", 1)[1])

    @property
    def control(self) -> str:
        """The control socket of the link's own connection (in the private folder)."""
        return str(self.folder / CONTROL_NAME)

    async def _connect(self) -> asyncio.subprocess.Process:
        """Start the link's own connection to the host (hosts/ssh.py
        ``connection_argv``) and wait until its control socket is there. Raises
        ``AgentError("launch_failed")`` with the connection's reason, ``host_lost`` set."""
        with contextlib.suppress(OSError):
            os.unlink(self.control)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.target.connection_argv(self.control),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=end_with_parent,
            )
        except OSError as err:
            raise AgentError("launch_failed", f"cannot start ssh: {err}") from err
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.target.connect_timeout_s + 5
        try:
            while not os.path.exists(self.control):
                if proc.returncode is not None or loop.time() >= deadline:
                    said = b""
                    _kill(proc)
                    if proc.stderr is not None:
                        with contextlib.suppress(Exception):
                            said = await asyncio.wait_for(proc.stderr.read(), 1.0)
                    why = classify_ssh_failure(self.host, said.decode("utf-8", "replace"))
                    raise AgentError("launch_failed", f"port forward: {why}", host_lost=self.host)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), PORT_POLL_S)
        except BaseException:
            _kill(proc)
            raise
        return proc

    async def _open_forward(self, connecting: asyncio.Future[Any] | None = None) -> None:
        """The link's connection (``connecting``, else a new one) with the forward of
        :attr:`local_port` added to it; waits until that port accepts. Raises
        ``AgentError("launch_failed")`` with the reason (``host_lost`` set when the
        connection failed)."""
        assert self.local_port is not None and self.remote_port is not None
        proc = await (connecting if connecting is not None else self._connect())
        self._forward = proc
        argv = self.target.add_forward_argv(self.control, self.local_port, self.remote_port)
        try:
            add = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, said = await asyncio.wait_for(add.communicate(), self.target.connect_timeout_s)
        except (OSError, TimeoutError) as err:
            await self._drop_forward()
            raise AgentError("launch_failed", f"port forward: {err}", host_lost=self.host) from None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.target.connect_timeout_s
        while add.returncode != 0 or not await _accepts(self.local_port):
            if add.returncode != 0 or proc.returncode is not None or loop.time() >= deadline:
                lost = proc.returncode is not None
                await self._drop_forward()
                why = said.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no answer"]
                raise AgentError(
                    "launch_failed",
                    f"port forward 127.0.0.1:{self.local_port} on host {self.host}: {why[0]}",
                    host_lost=self.host if lost else None,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), PORT_POLL_S)

    async def _drop_forward(self) -> None:
        """End the link's connection (and the forward on it)."""
        proc, self._forward = self._forward, None
        if proc is not None and proc.returncode is None:
            _kill(proc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5)
        with contextlib.suppress(OSError):
            os.unlink(self.control)

    # ------------------------------------------------------------------ follow
    async def _follow(self) -> None:
        """Wait for the forward to end; start it again (see the module doc)."""
        while not self._closing:
            proc = self._forward
            if proc is None:
                return
            await proc.wait()
            if self._closing:
                return
            if not await self._reconnect(f"the forward's ssh client exited ({proc.returncode})"):
                if self.on_lost is not None:
                    self.on_lost()
                return

    def _set_state(self, state: str, reason: str = "") -> None:
        if state == self.state:
            return
        self.state = state
        self.since = datetime.now(UTC) if state != CONNECTED else None
        if self.on_state is not None:
            with contextlib.suppress(Exception):
                self.on_state(link_changed(self.host, state, self.since, reason))

    async def _reconnect(self, reason: str) -> bool:
        """Start the forward again until it works, the exec-server is found gone, or the
        host has not answered for :attr:`lost_after_s`; False when the link is lost."""
        self._forward = None
        self._set_state(RECONNECTING, reason)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lost_after_s
        last, attempt = reason, 0
        while not self._closing:
            attempt += 1
            await asyncio.sleep(self._backoff.delay_s(attempt, self._draw))
            if self._closing:
                return False
            try:
                await self._open_forward()
            except AgentError as e:
                last = e.message
                if loop.time() >= deadline:
                    self.host_lost = self.host
                    self.close_reason = (
                        f"host {self.host} not reached for {self.lost_after_s:g}s "
                        f"after the exec-server link dropped ({last})"
                    )
                    self._set_state(LOST, self.close_reason)
                    return False
                continue
            if await self.alive() is False:
                await self._drop_forward()
                self.close_reason = f"{reason}; the exec-server on host {self.host} is gone"
                self._set_state(LOST, self.close_reason)
                return False
            self.reconnects += 1
            self._set_state(CONNECTED)
            return True
        return False

    async def alive(self) -> bool | None:
        """Whether the exec-server's group runs on the host (None: no answer)."""
        try:
            done = await self.target.run(
                alive_script(self.cwd, self.pgid_file), timeout_s=COMMAND_TIMEOUT_S
            )
        except SshError:
            return None
        return done.stdout.startswith(b"alive")

    async def log_tail(self, lines: int = 5) -> str:
        """The exec-server log's last ``lines`` non-blank lines, as one line."""
        path = f"{self.cwd.rstrip('/')}/{LOG_FILE}"
        try:
            done = await self.target.run(f"tail -n 40 {shlex.quote(path)}", timeout_s=10)
        except SshError:
            return ""
        text = done.stdout.decode("utf-8", "replace")
        kept = [line.strip()[:500] for line in text.splitlines() if line.strip()]
        return " | ".join(kept[-lines:])

    # ------------------------------------------------------------------ stop
    async def stop(self) -> str:
        """End the forward, the exec-server's group on the host (SIGTERM, grace, SIGKILL)
        and the token file here; returns what the host said. Idempotent."""
        self._closing = True
        watch, self._watch = self._watch, None
        if watch is not None and watch is not asyncio.current_task():
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
        await self._drop_forward()
        said = "none"
        if self._launched:
            self._launched = False
            try:
                done = await self.target.run(
                    kill_script(self.cwd, self.pgid_file, grace_s=KILL_GRACE_S),
                    timeout_s=COMMAND_TIMEOUT_S,
                )
                said = done.stdout.decode("utf-8", "replace").strip() or said
            except SshError as err:
                said = str(err)
            self.pid = None
        if self.token_file is not None:
            with contextlib.suppress(OSError):
                self.token_file.unlink()
            self.token_file = None
        held, self._held = self._held, None
        if held is not None:
            os.close(held)
        with contextlib.suppress(OSError):
            self.folder.rmdir()
        return said


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


async def _accepts(port: int) -> bool:
    """Whether 127.0.0.1:``port`` accepts a connection now."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return True
