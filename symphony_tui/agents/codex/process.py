"""Launch the app-server as ``bash -lc <command>`` in its own process group, and end it.

The child runs with ``start_new_session=True`` so that it, the node wrapper, the native
codex binary and every command codex spawns share one process group that
:func:`kill_group` can end at once: no orphan app-server or grandchildren (spec §10.1).

Buffering: everything queued between an agent and the reader is latency for
what the agent says next: an approval request written behind a flood of deltas is read
only after them. The stdout pipe is shrunk to :data:`STDOUT_PIPE_BYTES` (Linux
``F_SETPIPE_SZ``; 64 KB by default) and the reader pauses the pipe above
``2 * STDOUT_READER_LIMIT`` bytes, so a flooding agent is slowed by back-pressure instead of
queueing seconds of text ahead of its control messages. Readers keep reading under a flood
(``agents/codex/coalesce.py``), but each session is read at its share of the scheduler's
core: an approval request waits behind what is buffered here for that share (measured with
16 KB pipes and a 16 KB pause: about 560 ms at 50 flooding sessions on a loaded machine),
so the buffers stay small.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from symphony_tui.agents.base import AgentError

if TYPE_CHECKING:
    from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.hosts.local_group import _live_member as _live_pid
from symphony_tui.hosts.local_group import group_members

STDERR_TAIL_LINES = 40
KILL_GRACE_S = 2.0
STDOUT_PIPE_BYTES = 4 * 1024
STDOUT_READER_LIMIT = 2 * 1024


async def launch(command: str, cwd: Path, env: Mapping[str, str]) -> asyncio.subprocess.Process:
    """Start ``bash -lc command`` in ``cwd`` with pipes on stdin/stdout/stderr.

    Raises ``AgentError("launch_failed")`` when the workspace is missing or bash cannot start.
    """
    if not cwd.is_dir():
        raise AgentError("launch_failed", f"workspace {cwd} is not a directory")
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-lc",
            command,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=STDOUT_READER_LIMIT,
        )
    except OSError as e:
        raise AgentError("launch_failed", f"cannot start bash -lc {command!r}: {e}") from e
    _shrink_stdout_pipe(proc)
    return proc


def _shrink_stdout_pipe(proc: asyncio.subprocess.Process) -> None:
    """Set the child's stdout pipe to STDOUT_PIPE_BYTES where the system allows it."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    transport = getattr(proc, "_transport", None)
    pipe = transport.get_pipe_transport(1) if transport is not None else None
    handle = pipe.get_extra_info("pipe") if pipe is not None else None
    if set_size is None or handle is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fcntl.fcntl(handle.fileno(), set_size, STDOUT_PIPE_BYTES)


def stdout_pipe_bytes(proc: asyncio.subprocess.Process) -> int | None:
    """The capacity of the child's stdout pipe in bytes (Linux), else None."""
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    transport = getattr(proc, "_transport", None)
    pipe = transport.get_pipe_transport(1) if transport is not None else None
    handle = pipe.get_extra_info("pipe") if pipe is not None else None
    if get_size is None or handle is None:
        return None
    try:
        return fcntl.fcntl(handle.fileno(), get_size)
    except (OSError, ValueError):
        return None


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of the group is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class _GroupWatch:
    """Whether a process group still has live members, cheaply enough to ask every few
    milliseconds while dozens of groups end at once (a full ``/proc`` scan per question and
    group takes most of the scheduler's CPU when sessions close under a flood).
    ``killpg(pgid, 0)`` failing means no member at all; otherwise the members found by the
    last full scan are re-read one by one, and only when none of them is left is ``/proc``
    scanned again (a member may have forked a new one meanwhile)."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self._members: list[int] | None = None

    def alive(self) -> bool:
        if not _signal_group(self.pgid, 0):
            return False
        if self._members:
            self._members = [p for p in self._members if _live_pid(p, self.pgid)]
            if self._members:
                return True
        self._members = group_members(self.pgid)
        return True if self._members is None else bool(self._members)


def escaped_groups(pgid: int) -> set[int]:
    """The process groups, other than ``pgid``, of every descendant of ``pgid``'s members.
    codex starts some children in a session of their own (the login shell it runs to read
    the user's environment), out of reach of ``killpg(pgid)``; once their parent is gone
    they are re-parented and nothing links them to the agent any more, so they are found
    before the group is signalled. From the group's leader, its descendants are read from
    ``/proc/<pid>/task/<tid>/children`` (a few files, not a scan of every process: many
    sessions end together at a shutdown); without the leader, one scan of ``/proc``.
    Empty without /proc."""
    found = _descendants_of(pgid)
    if found is None:
        found = _descendants_by_scan(pgid)
    mine = os.getpgrp()
    groups = set()
    for pid in found:
        group = _group_of(pid)
        if group is not None and group not in (pgid, mine):
            groups.add(group)
    return groups


def _children(pid: int) -> list[int] | None:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def _descendants_of(leader: int) -> set[int] | None:
    """Every descendant of ``leader`` (None when it is gone or the kernel does not list
    children)."""
    first = _children(leader)
    if first is None or not os.path.exists(f"/proc/{leader}/task/{leader}/children"):
        return None
    seen: set[int] = set()
    todo = list(first)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(_children(pid) or ())
    return seen


def _descendants_by_scan(pgid: int) -> set[int]:
    """Every descendant of the members of ``pgid``, from one scan of ``/proc``."""
    parent: dict[int, int] = {}
    group: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in (b"Z", b"X"):
            parent[int(name)] = int(fields[1])
            group[int(name)] = int(fields[2])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, g in group.items() if g == pgid]
    seen = set(todo)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def _group_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 3 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[2])


async def end_groups(pgid: int, grace_s: float, leader: asyncio.subprocess.Process | None) -> None:
    """SIGTERM group ``pgid`` and the groups its descendants escaped to
    (:func:`escaped_groups`), wait up to ``grace_s`` while ``pgid`` has members (and
    ``leader``, when this process started it, has not been reaped), then SIGKILL them all."""
    extra = escaped_groups(pgid)
    for other in extra:
        _signal_group(other, signal.SIGTERM)
    if _signal_group(pgid, signal.SIGTERM):
        group = _GroupWatch(pgid)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while loop.time() < deadline:
            if leader is not None and leader.returncode is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(leader.wait(), 0.05)
            else:
                await asyncio.sleep(0.05)
            if (leader is None or leader.returncode is not None) and not group.alive():
                break
        if _signal_group(pgid, signal.SIGKILL):
            # SIGKILL is not instant: let the kernel finish so callers see an empty group.
            deadline = loop.time() + 1.0
            while group.alive() and loop.time() < deadline:
                await asyncio.sleep(0.02)
    for other in extra:
        _signal_group(other, signal.SIGKILL)


async def kill_group(proc: asyncio.subprocess.Process, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the whole process group (and the groups its children escaped to), wait up
    to ``grace_s``, then SIGKILL them (:func:`end_groups`).

    Also reaps the leader. Safe to call twice and after the leader has exited (members of
    the group may outlive it).
    """
    pgid = proc.pid  # the leader of a new session is its group's id
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    await end_groups(pgid, grace_s, proc)
    if proc.returncode is None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace_s)


def release(proc: asyncio.subprocess.Process) -> None:
    """Break asyncio's own reference cycle of an ended child: its protocol holds the stdin
    ``StreamWriter`` (``SubprocessStreamProtocol.stdin``), which holds the protocol back,
    and with them the pipes' readers, transports and files, which then outlive the session
    until a full collection. Call it once nothing writes to or waits on stdin
    any more (the session is closed); safe when stdin was not a pipe."""
    protocol = getattr(proc, "_protocol", None)
    if protocol is not None and getattr(protocol, "stdin", None) is not None:
        protocol.stdin = None


class StderrTail:
    """Drains a child's stderr into a bounded tail of lines (diagnostics only, never parsed)."""

    def __init__(self, limit: int = STDERR_TAIL_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=limit)

    async def drain(self, stream: asyncio.StreamReader) -> None:
        partial = b""
        while True:
            try:
                chunk = await stream.read(65536)
            except Exception:
                return
            if not chunk:
                break
            partial += chunk
            *whole, partial = partial.split(b"\n")
            for line in whole:
                self._add(line)
            if len(partial) > 8192:  # a runaway line: keep only its head
                self._add(partial[:8192])
                partial = b""
        if partial:
            self._add(partial)

    def _add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if line.strip():
            self.lines.append(line[:2000])

    def summary(self, n: int = 5) -> str:
        """The last ``n`` non-empty lines joined with `` | `` (one line for errors)."""
        return " | ".join(list(self.lines)[-n:])


async def describe_exit(
    what: str,
    proc: asyncio.subprocess.Process | None,
    stderr_task: asyncio.Task[None] | None,
    stderr: StderrTail,
    remote: RemoteLaunch | None,
    command: str,
) -> tuple[str, str | None]:
    """Why a stdio agent's output ended, as one line (``what`` exited with its code, on its
    host, then its stderr's tail), and the worker host lost with it (ssh exit 255) or None.
    Waits at most 2 s for the exit code and 1 s for the stderr reader."""
    code: int | None = None
    if proc is not None:
        with contextlib.suppress(TimeoutError):
            code = await asyncio.wait_for(proc.wait(), 2.0)
    if stderr_task is not None:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(stderr_task), 1.0)
    msg = what + (f" with code {code}" if code is not None else "")
    lost: str | None = None
    if remote is not None:
        special = remote.describe_exit(code, command)
        if code == 255:
            lost = remote.host
        msg = special or f"{msg} on host {remote.host}"
    tail = stderr.summary()
    return (f"{msg}: {tail}" if tail else msg), lost
