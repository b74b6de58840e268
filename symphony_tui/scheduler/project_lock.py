"""One scheduler per project: exclusive lock files per tracker project and workspace root.

Two schedulers polling the same project would dispatch the same issues twice. Each lock is
``flock`` on a file, so the kernel releases it when the owner dies (no stale-lock cleanup,
no pid guessing: a dead owner's lock is simply taken over); the file's JSON content
(``{host, pid, started_at, key}``) only serves the error message. The descriptors are
close-on-exec, so agent processes started by the scheduler never inherit the locks.

A scheduler takes two locks (:meth:`ProjectLock.acquire_for`):

* the project lock, named by a hash of the project key in a host-wide folder
  (``<tmp>/symphony-tui-locks``, sticky and world-writable like ``/tmp``), so a second
  scheduler run under another ``HOME`` or account on the same machine is refused;
* the workspace-root lock, :data:`WORKSPACE_LOCK_NAME` inside ``workspace.root``, a name
  no issue's workspace can take (``workspaces/manager.py`` ``RESERVED_NAMES``: removing a
  terminal issue's workspace never removes the lock). The temp
  folder follows ``$TMPDIR`` (per-session on macOS, private under systemd's
  ``PrivateTmp``), so two schedulers with different ``TMPDIR`` see two project-lock
  folders; the workspace root is where they would collide (same issues, same workspaces,
  same resumed thread, one manifest overwritten by the other), so that lock holds for
  every scheduler that would use the same workspaces, whatever its environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from symphony_tui.config.settings import Settings
from symphony_tui.paths import default_lock_dir, lock_file_for
from symphony_tui.workspaces.manager import ROOT_LOCK_NAME

__all__ = [
    "WORKSPACE_LOCK_NAME",
    "ProjectLock",
    "ProjectLockedError",
    "check_free",
    "check_free_for",
    "default_lock_dir",
    "lock_file_for",
    "lock_owner",
    "project_key_for",
]

#: The lock file a scheduler holds inside its workspace root (never a workspace's name).
WORKSPACE_LOCK_NAME = ROOT_LOCK_NAME


class ProjectLockedError(Exception):
    """Another live process holds the project's lock. ``owner`` is its recorded JSON
    (may be empty when it could not be read)."""

    def __init__(self, key: str, owner: dict[str, Any], path: Path) -> None:
        self.key = key
        self.owner = owner
        self.path = path
        host = owner.get("host") or "unknown host"
        pid = owner.get("pid") or "unknown pid"
        since = f" since {owner['started_at']}" if owner.get("started_at") else ""
        super().__init__(
            f"project_locked: another scheduler (pid {pid} on {host}{since}) already runs "
            f"{key}; stop it first (lock file {path})"
        )


def _ensure_shared_dir(directory: Path) -> None:
    """Create ``directory`` for every user of the host: mode 1777 when we create it."""
    if directory.is_dir():
        return
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # someone else's folder: use it as it is
        os.chmod(directory, 0o1777)


def _open_lock_file(path: Path) -> int:
    """Open (creating, readable and writable by all) the lock file; read-only when another
    user's file is not writable for us (``flock`` works on either)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # past the umask, so other accounts can take it over later
    return fd


def project_key_for(settings: Settings) -> str:
    """The identity of the tracker project a workflow dispatches from: ``linear:<endpoint>
    #<project_slug>``, ``github:<api_url>#<repo>``, ``jira:<base_url>#<project_key>``,
    ``gitlab:<api_url>#<project_path>``, ``asana:<endpoint>#<project_gid>``, ``local:<resolved file path>``, else ``<kind>:<workflow folder>``."""
    tracker = settings.tracker
    kind = (tracker.kind or "linear").strip().lower()
    if kind == "linear":
        return f"linear:{tracker.endpoint.rstrip('/')}#{tracker.project_slug or ''}"
    if kind == "github":
        return f"github:{tracker.api_url.rstrip('/')}#{tracker.repo or ''}"
    if kind == "jira":
        return f"jira:{(tracker.base_url or '').rstrip('/')}#{tracker.project_key or ''}"
    if kind == "gitlab":
        return f"gitlab:{tracker.api_url.rstrip('/')}#{tracker.project_path or ''}"
    if kind == "asana":
        return f"asana:{tracker.endpoint.rstrip('/')}#{tracker.project_gid or ''}"
    if kind == "local" and tracker.path:
        return f"local:{os.path.realpath(tracker.path)}"
    return f"{kind}:{os.path.realpath(settings.workflow_dir)}"


class ProjectLock:
    """Held lock(s); release them with :meth:`release` or a ``with`` block. ``path`` is the
    project lock file, ``paths`` every file held (project lock first)."""

    def __init__(self, key: str, path: Path, fd: int) -> None:
        self.key = key
        self.path = path
        self._held: list[tuple[Path, int]] = [(path, fd)]

    @classmethod
    def acquire(cls, project_key: str, state_dir: Path | None = None) -> ProjectLock:
        """Take the lock for ``project_key`` or raise :class:`ProjectLockedError` naming the
        live owner. ``state_dir`` defaults to :func:`default_lock_dir` (host-wide). Raises
        ``OSError`` when the lock folder or file cannot be created."""
        path = lock_file_for(project_key, state_dir)
        _ensure_shared_dir(path.parent)
        return cls(project_key, path, _lock_file(path, project_key))

    @classmethod
    def acquire_for(cls, settings: Settings, state_dir: Path | None = None) -> ProjectLock:
        """Take the project lock of ``settings`` (:func:`project_key_for`, in ``state_dir``)
        and the workspace-root lock (``<workspace.root>/``:data:`WORKSPACE_LOCK_NAME`,
        the root created when missing). Raises :class:`ProjectLockedError` naming the owner
        of whichever is held (nothing stays locked then) and ``OSError`` when a lock file
        cannot be created."""
        lock = cls.acquire(project_key_for(settings), state_dir)
        try:
            root = workspace_lock_file(settings).parent
            root.mkdir(parents=True, exist_ok=True)
            path = root / WORKSPACE_LOCK_NAME
            lock._held.append((path, _lock_file(path, f"workspace root {root}")))
        except BaseException:
            lock.release()
            raise
        return lock

    @property
    def held(self) -> bool:
        return bool(self._held)

    @property
    def paths(self) -> list[Path]:
        return [path for path, _ in self._held]

    def note(self, **fields: Any) -> None:
        """Add ``fields`` to the project lock's recorded owner (``api``: the address a
        second console attaches to; ``token_file``: where the operator's console finds the
        API credential). Informational, like the rest of the note: a console trusts only
        the note in its own user's state folder (``api/announce.py``). Best effort."""
        if not self._held:
            return
        _, fd = self._held[0]
        owner = _read_owner(fd)
        owner.update(fields)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(owner).encode("utf-8") + b"\n", 0)

    def release(self) -> None:
        """Give every lock up (idempotent). The files stay: unlinking one could let two
        processes lock two different inodes under one name."""
        held, self._held = self._held, []
        for _, fd in reversed(held):
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> ProjectLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def workspace_lock_file(settings: Settings) -> Path:
    """``<workspace.root, symlinks resolved>/``:data:`WORKSPACE_LOCK_NAME`."""
    return Path(os.path.realpath(settings.workspace_root)) / WORKSPACE_LOCK_NAME


def check_free(project_key: str, state_dir: Path | None = None) -> None:
    """Raise :class:`ProjectLockedError` when a live process holds ``project_key``'s lock;
    creates nothing (``doctor``): a missing lock file means nobody holds it."""
    _check_file_free(lock_file_for(project_key, state_dir), project_key)


def check_free_for(settings: Settings, state_dir: Path | None = None) -> None:
    """:func:`check_free` for both locks :meth:`ProjectLock.acquire_for` would take (the
    project's and the workspace root's); creates nothing. Raises ``OSError`` when a lock
    file exists but cannot be opened."""
    check_free(project_key_for(settings), state_dir)
    path = workspace_lock_file(settings)
    _check_file_free(path, f"workspace root {path.parent}")


def lock_owner(path: Path) -> dict[str, Any] | None:
    """The recorded owner of lock file ``path`` while a live process holds it (``{}`` while
    its note is unreadable or not written yet), None when nobody holds it. Creates
    nothing; raises ``OSError`` when the file exists but cannot be opened."""
    try:
        _check_file_free(path, "")
    except ProjectLockedError as exc:
        return exc.owner
    return None


def _check_file_free(path: Path, key: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ProjectLockedError(key, _read_owner(fd), path) from None
    finally:
        os.close(fd)  # closing also drops a lock we took


def _lock_file(path: Path, key: str) -> int:
    """``flock`` ``path`` (created when missing) without waiting and record this process as
    its owner; returns the held descriptor. Raises :class:`ProjectLockedError` with the
    recorded owner when another process holds it."""
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = _read_owner(fd)
        os.close(fd)
        raise ProjectLockedError(key, owner, path) from None
    except BaseException:
        os.close(fd)
        raise
    info = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": datetime.now(UTC).isoformat(),
        "key": key,
    }
    with contextlib.suppress(OSError):  # read-only: the lock holds, the note is stale
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8") + b"\n", 0)
    return fd


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        owner = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
