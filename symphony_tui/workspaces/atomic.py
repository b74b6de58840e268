"""Atomic file replacement: readers see the old bytes or the new bytes, never a mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


class ConcurrentEditError(OSError):
    """The target changed between reading it and replacing it (someone else wrote it)."""


def atomic_write_bytes(
    target: Path, data: bytes, mode: int | None = None, *, expect: bytes | None = None
) -> None:
    """Write ``data`` to a temp file in ``target``'s folder, fsync it, then ``os.replace``
    it over ``target``. ``mode`` (permission bits) is applied to the new file; by default
    ``mkstemp``'s 0600. With ``expect``, the target is read again just before the replace
    and :class:`ConcurrentEditError` is raised (nothing replaced) unless it still holds
    exactly ``expect`` — an edit made meanwhile by a writer that takes no lock (a person
    with an editor, ``>>``) is then not overwritten. Raises ``OSError``; the temp file
    never outlives a failure."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode & 0o7777)
        if expect is not None and target.read_bytes() != expect:
            raise ConcurrentEditError(f"{target} changed while it was being rewritten")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
