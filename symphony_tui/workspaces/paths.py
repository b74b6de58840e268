"""Workspace keys and contained paths (spec §4.2, §9.1, §9.5 invariants 2 and 3)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from symphony_tui.workspaces.errors import WorkspaceError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# Most filesystems cap a name at 255 bytes; long keys keep a readable prefix plus a hash
# of the whole identifier so they stay unique and deterministic.
MAX_KEY_LENGTH = 128
_PREFIX_LENGTH = 100


def workspace_key(identifier: str) -> str:
    """The directory name of an issue's workspace: every character outside
    ``[A-Za-z0-9._-]`` becomes ``_``. ``""``, ``.`` and ``..`` (which would name the root or
    its parent) become underscores; keys longer than :data:`MAX_KEY_LENGTH` are shortened
    to a prefix plus a hash."""
    key = _UNSAFE.sub("_", identifier)
    if key in ("", ".", ".."):
        key = "_" * max(len(key), 1)
    if len(key) > MAX_KEY_LENGTH:
        digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        key = f"{key[:_PREFIX_LENGTH]}-{digest}"
    return key


def workspace_path(root: Path, identifier: str) -> Path:
    """``<resolved root>/<workspace_key(identifier)>``.

    Raises ``WorkspaceError("workspace_outside_root")`` unless the path, with symlinks
    resolved, lies strictly inside the resolved root: a symlink at the key that points out
    of the root (or at the root itself) is refused.
    """
    resolved_root = Path(root).expanduser().resolve()
    path = resolved_root / workspace_key(identifier)
    target = path.resolve()
    if target == resolved_root or not target.is_relative_to(resolved_root):
        raise WorkspaceError(
            "workspace_outside_root",
            f"workspace for {identifier!r} resolves to {target}, outside {resolved_root}",
        )
    return path


def ensure_inside_root(root: Path, path: Path) -> Path:
    """Check an existing workspace path (for example one a worker is about to use as its
    cwd) against the root; returns it, or raises ``WorkspaceError("workspace_outside_root")``."""
    resolved_root = Path(root).expanduser().resolve()
    target = Path(path).resolve()
    if target == resolved_root or not target.is_relative_to(resolved_root):
        raise WorkspaceError(
            "workspace_outside_root", f"{path} resolves to {target}, outside {resolved_root}"
        )
    return Path(path)
