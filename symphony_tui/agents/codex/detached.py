"""A codex app-server that outlives the scheduler (``codex.transport: unix``).

The app-server runs as ``bash -lc '<codex.command> --listen unix://<socket>'`` in its own
session and process group, its stdin on ``/dev/null`` and its output appended to
``<workspace>/.symphony/codex-app-server.log``: no pipe ties it to the scheduler, so a
scheduler that dies (``kill -9``, a crash) leaves it running, and the turn in flight goes on.
The socket lives in a folder only this user can enter (mode 0700, under
``$XDG_RUNTIME_DIR`` or the system temp folder: a unix socket path is limited to about 100
bytes, workspaces can be deeper). A unix socket has no token: its folder's permissions
are the credential.

The app-server speaks WebSocket framing on the socket, one JSON-RPC message per text
frame (docs/protocols.md "Codex app-server over a socket"); :func:`ws_connect` opens one
such connection and agents/codex/link.py turns it into the line stream the JSON-RPC layer
reads and writes, reconnecting when it drops.

:class:`DetachedAgent` is what the workspace manifest records (``session.agent``: pid,
process group, the process's start time in clock ticks against pid reuse, socket, log,
``adoptable``) so a restarted scheduler can find it (:func:`alive`) and reconnect, or end
it (:func:`kill_pgid`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.codex.process import (
    KILL_GRACE_S,
    _GroupWatch,
    end_groups,
)
from symphony_tui.agents.codex.rpc import LINE_LIMIT

SOCKET_NAME = "app.sock"
LOG_NAME = "codex-app-server.log"
#: Between two tries to connect to a socket the app-server has not opened yet.
CONNECT_RETRY_S = 0.05


@dataclass(frozen=True)
class DetachedAgent:
    """A detached app-server: ``pid`` (= ``pgid``, the leader of its own session),
    ``start_ticks`` (field 22 of ``/proc/<pid>/stat``; None without /proc), ``socket``
    path, ``log`` path, ``started_at`` (ISO 8601 UTC). On a worker host
    (agents/codex/remote_detached.py): ``host`` (the ``worker.ssh_hosts`` entry; None on
    this machine), the paths are the host's, and ``pgid_file`` (relative to the
    workspace) names the group there."""

    pid: int
    pgid: int
    socket: str
    log: str
    started_at: str
    start_ticks: int | None = None
    host: str | None = None
    pgid_file: str | None = None

    def facts(self, *, adoptable: bool = True) -> dict[str, Any]:
        """The manifest's ``session.agent`` object."""
        return {**asdict(self), "transport": "unix", "adoptable": adoptable}

    @classmethod
    def from_facts(cls, facts: Any) -> DetachedAgent | None:
        """The agent a manifest's ``session.agent`` names; None when it names none (or not
        a re-adoptable one: ``adoptable`` false, another transport, bad values)."""
        if not isinstance(facts, Mapping) or facts.get("adoptable") is not True:
            return None
        if facts.get("transport") != "unix":
            return None
        try:
            pid, pgid = int(facts["pid"]), int(facts["pgid"])
            ticks = facts.get("start_ticks")
            return cls(
                pid=pid,
                pgid=pgid,
                socket=str(facts["socket"]),
                log=str(facts.get("log") or ""),
                started_at=str(facts.get("started_at") or ""),
                start_ticks=int(ticks) if ticks is not None else None,
                host=str(facts["host"]) if facts.get("host") else None,
                pgid_file=str(facts["pgid_file"]) if facts.get("pgid_file") else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22);
    None when the process is gone (a zombie too: in a container whose init does not reap,
    an orphan that ended stays one) or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(agent: DetachedAgent) -> bool:
    """True while the recorded process group has a live member and its leader, when still
    there, is the process that was recorded (not a reused pid)."""
    ticks = start_ticks(agent.pid)
    if ticks is not None and agent.start_ticks is not None and ticks != agent.start_ticks:
        return False  # the pid now names another process
    return _GroupWatch(agent.pgid).alive()


def socket_folder() -> Path:
    """A new folder for one app-server's socket, mode 0700, under
    ``$XDG_RUNTIME_DIR/symphony-tui`` or ``<tmp>/symphony-tui-<uid>`` (made 0700 and
    checked to be this user's). Raises ``AgentError("launch_failed")``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        base = Path(runtime) / "symphony-tui"
    else:
        base = Path(tempfile.gettempdir()) / f"symphony-tui-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        info = base.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise AgentError("launch_failed", f"{base} is not a folder of this user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(base, 0o700)
        return Path(tempfile.mkdtemp(prefix="codex-", dir=base))  # 0700
    except OSError as e:
        raise AgentError("launch_failed", f"cannot make a socket folder in {base}: {e}") from e


async def launch_detached(
    command: str, cwd: Path, env: Mapping[str, str], log_dir: Path
) -> tuple[asyncio.subprocess.Process, DetachedAgent]:
    """Start ``bash -lc '<command> --listen unix://<socket>'`` in ``cwd``, detached (own
    session, stdin ``/dev/null``, output appended to ``log_dir/codex-app-server.log``).
    Raises ``AgentError("launch_failed")``."""
    if not cwd.is_dir():
        raise AgentError("launch_failed", f"workspace {cwd} is not a directory")
    folder = socket_folder()
    sock = folder / SOCKET_NAME
    full = f"{command} --listen {shlex.quote(f'unix://{sock}')}"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / LOG_NAME
        with open(log_path, "ab") as log:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-lc",
                full,
                cwd=str(cwd),
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as e:
        with contextlib.suppress(OSError):
            folder.rmdir()
        raise AgentError("launch_failed", f"cannot start bash -lc {full!r}: {e}") from e
    agent = DetachedAgent(
        pid=proc.pid,
        pgid=proc.pid,
        socket=str(sock),
        log=str(log_path),
        started_at=datetime.now(UTC).isoformat(),
        start_ticks=start_ticks(proc.pid),
    )
    return proc, agent


def log_tail(agent: DetachedAgent, lines: int = 5) -> str:
    """The last ``lines`` non-blank lines of the app-server's log, joined with `` | ``."""
    try:
        with open(agent.log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line.strip()[:500] for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


async def kill_pgid(pgid: int, grace_s: float = KILL_GRACE_S) -> None:
    """End process group ``pgid`` and the groups its children escaped to (SIGTERM, then
    SIGKILL after ``grace_s``; ``process.end_groups``): a group this process did not
    start, nothing to reap."""
    await end_groups(pgid, grace_s, None)


def remove_socket(agent: DetachedAgent) -> None:
    """Remove the socket and its folder (once the app-server is gone)."""
    sock = Path(agent.socket)
    with contextlib.suppress(OSError):
        sock.unlink()
    with contextlib.suppress(OSError):
        sock.parent.rmdir()


async def ws_connect(path: str, timeout_s: float, *, wait: bool = True) -> Any:
    """A WebSocket connection to the app-server's socket at ``path`` within ``timeout_s``
    (a ``websockets`` client connection; one JSON-RPC message per text frame); with
    ``wait``, a socket not there yet (or refusing) is tried again until then. Raises
    ``AgentError("launch_failed")`` with the last reason."""
    from websockets.asyncio.client import unix_connect

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last = "no answer"
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise AgentError("launch_failed", f"socket {path}: {last}")
        try:
            return await unix_connect(
                path,
                uri="ws://localhost/",
                open_timeout=left,
                max_size=LINE_LIMIT,
                compression=None,
                ping_interval=None,  # the app-server's liveness is its process group
                close_timeout=1,
            )
        except (OSError, TimeoutError) as e:
            last = str(e) or type(e).__name__
        except Exception as e:  # a refused handshake: the server is not ready yet
            last = f"{type(e).__name__}: {e}"
        if not wait:
            raise AgentError("launch_failed", f"socket {path}: {last}")
        await asyncio.sleep(CONNECT_RETRY_S)
