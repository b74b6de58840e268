"""Process groups on this machine: whether one still has live members, how to end one, and
how to know one again after a restart (the local side of ``remote_group.py``).

Every agent and hook starts as the leader of a new session (``start_new_session=True``),
so its process group holds everything it started that did not leave on purpose. A hook's
group is ended when the hook returns (``workspaces/hooks.py``); an agent's is recorded
with its run (:func:`identify`, the workspace manifest's ``session.agent_group``) so a
scheduler that crashed has it ended at its next start (``WorkspaceManager.reap``).

A pid is reused once its process is gone, so a recorded group is ended only while it is
provably the same (:func:`same_group`): same boot, and its leader alive with the recorded
start time; a group whose leader is gone, only when every member started after the
leader did and one of them still works in the workspace. Linux ``/proc``; elsewhere
nothing is recorded and nothing is reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

#: Seconds between SIGTERM and SIGKILL when a group is ended.
END_GRACE_S = 2.0
_POLL_S = 0.05


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 on), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields if len(fields) > 19 else None


def _live_member(pid: int, pgid: int) -> bool:
    """True while ``pid`` is a non-zombie member of group ``pgid``."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid


def group_members(pgid: int) -> list[int] | None:
    """Live (non-zombie) pids of process group ``pgid``; None without ``/proc``.

    Zombies are left out: in a container whose init does not reap, re-parented children
    stay zombies forever and would make ``killpg(pgid, 0)`` succeed."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    return [int(name) for name in names if name.isdigit() and _live_member(int(name), pgid)]


def group_alive(pgid: int) -> bool:
    """Whether group ``pgid`` has a live member (without ``/proc``: any member)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    members = group_members(pgid)
    return True if members is None else bool(members)


def _signal(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def end_group(pgid: int, grace_s: float = END_GRACE_S) -> bool:
    """End group ``pgid``: SIGTERM, up to ``grace_s`` seconds for it to empty, SIGKILL,
    then up to a second for the kernel to finish. Returns whether it had live members."""
    if not group_alive(pgid):
        return False
    _signal(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while loop.time() < deadline and group_alive(pgid):
        await asyncio.sleep(_POLL_S)
    if group_alive(pgid):
        _signal(pgid, signal.SIGKILL)
        deadline = loop.time() + 1.0
        while loop.time() < deadline and group_alive(pgid):
            await asyncio.sleep(_POLL_S / 2)
    return True


def boot_id() -> str | None:
    """This boot of this machine (``/proc/sys/kernel/random/boot_id``), None without it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def identify(pid: int | None) -> dict[str, Any] | None:
    """What names the group led by ``pid`` across a restart: ``{"pgid", "started"
    (the leader's start, clock ticks after boot), "boot_id"}``; None when ``pid`` is not
    a live group leader or there is no ``/proc``."""
    if not pid:
        return None
    fields = _stat(pid)
    boot = boot_id()
    if fields is None or boot is None or int(fields[2]) != pid:
        return None
    return {"pgid": pid, "started": int(fields[19]), "boot_id": boot}


def same_group(record: dict[str, Any], workspace: Path) -> bool:
    """Whether the group ``record`` (:func:`identify`) names is alive and provably the one
    recorded (module docstring); ``workspace`` is where its run worked."""
    try:
        pgid, started, boot = int(record["pgid"]), int(record["started"]), str(record["boot_id"])
    except (KeyError, TypeError, ValueError):
        return False
    if pgid <= 1 or boot != boot_id() or not group_alive(pgid):
        return False
    leader = _stat(pgid)
    if leader is not None and leader[0] not in (b"Z", b"X"):
        return int(leader[2]) == pgid and int(leader[19]) == started
    members = group_members(pgid) or []
    starts = [_stat(pid) for pid in members]
    if not members or any(s is None or int(s[19]) < started for s in starts):
        return False
    root = os.path.realpath(workspace)
    for pid in members:
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if cwd == root or cwd.startswith(root + os.sep):
                return True
    return False
