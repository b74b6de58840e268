"""Who is on the other end of an API connection, and whether it may use the controls.

Every mutating request (docs/security.md) is judged here after its credential:

* **Finding the client process.** A unix socket's peer comes from ``SO_PEERCRED`` (pid,
  uid). A TCP peer on this machine is found by its socket: psutil's ``net_connections``
  maps the connection whose local address is the request's remote address (and whose
  remote address is ours) to the pid holding it. A peer on another machine, or a process
  of another user whose descriptors this user cannot read, has no pid here.
* **Refusing agents.** A found client is refused when it or one of its ancestors is a
  process this scheduler started (an agent, a hook, a managed agent server, or anything
  they started that was not re-parented), when it or an ancestor carries
  :data:`~symphony_tui.config.child_env.CHILD_MARKER` with another value than the
  scheduler's own environment (a child of this or another scheduler that escaped the
  tree), or when its working directory is inside a workspace root or a running
  workspace. The scheduler's own process (the embedded console, a test) is always let in,
  also when a child it forked a moment ago still holds a copy of that client's socket.

These are checks of a cooperative process table: an agent running as the operator's own
user, unsandboxed, can evade them (double-fork, clear its environment, change directory)
and can read the control token file; docs/security.md says what closes that gap.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from symphony_tui.config.child_env import CHILD_MARKER


@dataclass(frozen=True)
class Peer:
    """The client process of one connection; ``pid`` None when it cannot be found here."""

    address: str
    pid: int | None = None
    name: str | None = None
    uid: int | None = None

    def describe(self) -> str:
        """``127.0.0.1 pid 4242 (python3) uid 1000``, or the address alone."""
        if self.pid is None:
            return self.address
        text = f"{self.address} pid {self.pid}"
        if self.name:
            text += f" ({self.name})"
        if self.uid is not None:
            text += f" uid {self.uid}"
        return text


@dataclass(frozen=True)
class Verdict:
    peer: Peer
    refusal: str | None = None  # one line; None: let in


def _same_address(a: str, b: str) -> bool:
    try:
        x, y = ipaddress.ip_address(a.split("%", 1)[0]), ipaddress.ip_address(b.split("%", 1)[0])
    except ValueError:
        return a == b
    if isinstance(x, ipaddress.IPv6Address) and x.ipv4_mapped:
        x = x.ipv4_mapped
    if isinstance(y, ipaddress.IPv6Address) and y.ipv4_mapped:
        y = y.ipv4_mapped
    return x == y


def tcp_peer_pids(local: tuple[str, int], remote: tuple[str, int]) -> set[int]:
    """The pids holding the other end of the TCP connection ``local`` (our side) <->
    ``remote`` (theirs) on this machine: usually one, more when the socket was inherited
    (a child forked while the client held it); empty when no process of ours holds it."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return set()
    found: set[int] = set()
    for conn in connections:
        if conn.pid is None or not conn.laddr or not conn.raddr:
            continue
        if conn.laddr.port != remote[1] or conn.raddr.port != local[1]:
            continue
        if _same_address(conn.laddr.ip, remote[0]) and _same_address(conn.raddr.ip, local[0]):
            found.add(conn.pid)
    return found


def holds_connection(pid: int, sock: socket.socket) -> bool:
    """Whether process ``pid`` holds the client end of the TCP connection served on
    ``sock`` (blocking: reads /proc). ``net_connections`` names one process per socket (the
    last it read, the highest pid), so a child forked while its parent held a connection
    hides the parent until it closes its copy or execs; this asks ``pid`` alone."""
    try:
        if sock.family == socket.AF_UNIX:
            return False
        ours, theirs = sock.getsockname(), sock.getpeername()
        proc = psutil.Process(pid)
        # ``connections`` before psutil 6.0 (the lower bound is 5.9.5)
        read = getattr(proc, "net_connections", None) or proc.connections
        connections = read(kind="tcp")
    except (psutil.Error, OSError):
        return False
    return any(
        conn.laddr
        and conn.raddr
        and conn.laddr.port == theirs[1]
        and conn.raddr.port == ours[1]
        and _same_address(conn.laddr.ip, theirs[0])
        and _same_address(conn.raddr.ip, ours[0])
        for conn in connections
    )


def unix_peer_pid(sock: socket.socket) -> int | None:
    """``SO_PEERCRED``'s pid of a unix-socket peer (Linux); None elsewhere."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid, _uid, _gid = struct.unpack("3i", raw)
    return pid or None


def peer_pids(sock: socket.socket | None) -> set[int]:
    """Every pid holding the client end of a served connection (blocking: reads /proc)."""
    if sock is None:
        return set()
    try:
        if sock.family == socket.AF_UNIX:
            pid = unix_peer_pid(sock)
            return {pid} if pid else set()
        ours, theirs = sock.getsockname(), sock.getpeername()
        return tcp_peer_pids((ours[0], ours[1]), (theirs[0], theirs[1]))
    except OSError:
        return set()


def find_peer(sock: socket.socket | None, address: str) -> Peer:
    """The :class:`Peer` of a served connection's socket (blocking: psutil reads /proc)."""
    pids = peer_pids(sock)
    return describe(min(pids), address) if pids else Peer(address)


def describe(pid: int, address: str) -> Peer:
    """:class:`Peer` ``pid`` with its name and user, as far as they can be read."""
    try:
        proc = psutil.Process(pid)
        return Peer(address, pid, proc.name(), proc.uids().real)
    except (psutil.Error, OSError):
        return Peer(address, pid)


def _inside(path: str, roots: Iterable[Path]) -> Path | None:
    here = Path(path)
    for root in roots:
        if here == root or root in here.parents:
            return root
    return None


class PeerGuard:
    """Judges the client of a mutating request (module doc). ``workspace_roots`` is asked
    each time (a reload may move the root); paths that do not exist are ignored."""

    def __init__(self, workspace_roots: Callable[[], Iterable[str]] = lambda: ()) -> None:
        self._roots = workspace_roots
        self._me = os.getpid()
        # A scheduler started by another one's agent (its tests) shares that agent's mark.
        self._own_mark = os.environ.get(CHILD_MARKER)

    async def judge(self, sock: socket.socket | None, address: str) -> Verdict:
        roots = []
        for raw in self._roots():
            if raw:
                try:
                    roots.append(Path(raw).resolve())
                except (OSError, RuntimeError):
                    continue
        return await asyncio.to_thread(self._judge, sock, address, roots)

    def _judge(self, sock: socket.socket | None, address: str, roots: list[Path]) -> Verdict:
        pids = peer_pids(sock)
        if not pids:
            return Verdict(Peer(address))
        if self._me in pids:
            # the scheduler's own process holds the client end (a child forked meanwhile
            # may hold a copy until it execs): an in-process client
            return Verdict(describe(self._me, address))
        for pid in sorted(pids):  # every holder must pass
            why = self.refusal(pid, roots)
            if why is not None:
                if sock is not None and holds_connection(self._me, sock):
                    # a child forked while the scheduler's own client was open, named
                    # in its place (:func:`holds_connection`): an in-process client
                    return Verdict(describe(self._me, address))
                return Verdict(describe(pid, address), why)
        return Verdict(describe(min(pids), address))

    def refusal(self, pid: int, roots: list[Path]) -> str | None:
        """Why process ``pid`` may not use the controls (one line), or None."""
        try:
            proc = psutil.Process(pid)
            chain = [proc, *proc.parents()]
        except psutil.Error:
            return None
        if any(member.pid == self._me for member in chain):
            return (
                f"pid {pid} descends from the scheduler (pid {self._me}): an agent, "
                "a hook or a process they started"
            )
        for member in chain:
            try:
                mark = member.environ().get(CHILD_MARKER)
            except (psutil.Error, OSError):
                mark = None
            if mark is not None and mark != self._own_mark:
                return (
                    f"pid {pid} runs under a process a scheduler started "
                    f"({CHILD_MARKER}={mark} on pid {member.pid})"
                )
        try:
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            return None
        root = _inside(cwd, roots)
        if root is not None:
            return f"pid {pid} works in {cwd}, inside the workspace root {root}"
        return None
