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
#: Hex digits of the identifier's SHA-256 in a key's suffix: 16 digits are 64 bits (§4.2).
HASH_DIGITS = 16


def identifier_hash(identifier: str) -> str:
    """The first :data:`HASH_DIGITS` lowercase hex digits of SHA-256 of ``identifier``."""
    return hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]


def workspace_key(identifier: str) -> str:
    """The directory name of an issue's workspace (§4.2, §9.5 invariant 3): every character
    outside ``[A-Za-z0-9._-]`` becomes ``_``; when that changed the identifier, the key is
    ``<sanitized>--<identifier_hash>`` (the reference's form), so ``A/B``, ``A B`` and
    ``A_B`` get three keys, while an identifier sanitizing leaves alone keeps itself as its
    key. ``""``, ``.`` and ``..`` (the root or its parent) count as changed (underscores plus
    the hash). Keys longer than :data:`MAX_KEY_LENGTH` keep a prefix plus the hash."""
    key = _UNSAFE.sub("_", identifier)
    changed = key != identifier
    if key in ("", ".", ".."):
        key, changed = "_" * max(len(key), 1), True
    digest = identifier_hash(identifier)
    if changed:
        key = f"{key[:_PREFIX_LENGTH]}--{digest}"
    elif len(key) > MAX_KEY_LENGTH:
        key = f"{key[:_PREFIX_LENGTH]}-{digest}"
    return key


def legacy_workspace_key(identifier: str) -> str:
    """The key earlier releases gave ``identifier`` (sanitized, no hash unless long): where
    an existing workspace may still be (:meth:`WorkspaceManager.carry_over`)."""
    key = _UNSAFE.sub("_", identifier)
    if key in ("", ".", ".."):
        key = "_" * max(len(key), 1)
    if len(key) > MAX_KEY_LENGTH:
        key = f"{key[:_PREFIX_LENGTH]}-{identifier_hash(identifier)}"
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
