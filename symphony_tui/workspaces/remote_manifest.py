"""Workspace manifests on a worker host (the layout is ``manifest.py``'s).

A :class:`RemoteManifests` is the :class:`~symphony_tui.workspaces.manifest_writer.
ManifestStore` of one host: the manifest writer thread calls it for every workspace
mounted on that host. A write sends the merged section on stdin to ``cat > tmp && mv
tmp <section>.json`` in the same folder, so the file on the host is replaced atomically
(rename), never half written. This scheduler is the only writer of a remote manifest, so
the merged sections are kept here after the first read (one round trip per write).

Errors: a failed write raises ``OSError`` with a one-line reason (the writer logs it and
goes on); reads never raise (``{}``). Once the host cannot be reached, further reads and
writes fail at once for :data:`DOWN_HOLD_S` seconds instead of each waiting for ssh's
connect timeout on the one writer thread (which every other host's writes, and the
scheduler's barrier, wait behind). The hold ends early once any command of this process
reached the host again (``hosts.ssh.reached_at``: the scheduler's probe that marks it
up), so a host that is back takes its manifests at once.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path
from typing import Any

from symphony_tui.hosts.remote_group import home_path
from symphony_tui.hosts.ssh import Completed, SshError, SshTarget, reached_at
from symphony_tui.workspaces.manifest import _GITIGNORE, MANIFEST_DIR, SECTIONS, _json_default

#: Seconds one manifest read or write may take on the host.
MANIFEST_TIMEOUT_S = 30.0
#: Seconds after a connection failure during which the host's manifests fail fast.
DOWN_HOLD_S = 30.0
_IGNORE = shlex.quote(_GITIGNORE.replace("\n", "\\n"))  # printf's format, one line


def write_script(ws: str, section: str) -> str:
    """The ``sh`` script that replaces ``<ws>/.symphony/<section>.json`` with stdin."""
    folder = f"{home_path(ws)}/{MANIFEST_DIR}"
    return (
        f'd={folder}; mkdir -p "$d" || exit 1; '
        f'[ -f "$d/.gitignore" ] || printf {_IGNORE} '
        '> "$d/.gitignore"; '
        f't="$d/.{section}.json.$$"; '
        f'if cat > "$t" && mv -f "$t" "$d/{section}.json"; then exit 0; fi; '
        'rm -f "$t"; exit 1'
    )


class RemoteManifests:
    """The manifests of every workspace on one host (thread-safe)."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._cache: dict[tuple[Path, str], dict[str, Any]] = {}
        self._down_since = 0.0
        self._down_until = 0.0
        self._down_reason = ""

    def held(self) -> bool:
        """True while reads and writes fail at once: within :data:`DOWN_HOLD_S` of a
        connection failure, unless the host answered a command since."""
        now = time.monotonic()
        return now < self._down_until and reached_at(self.target.name) <= self._down_since

    def _run(self, script: str, stdin: bytes | None = None) -> Completed:
        """One command on the host; ``SshError`` (at once while the host is held down)."""
        if self.held():
            raise SshError("unreachable", self.target.name, f"{self._down_reason} (held)")
        try:
            return self.target.run_sync(script, stdin=stdin, timeout_s=MANIFEST_TIMEOUT_S)
        except SshError as err:
            self._down_since = time.monotonic()
            self._down_until = self._down_since + DOWN_HOLD_S
            self._down_reason = err.reason
            raise

    def read(self, ws: Path, section: str) -> dict[str, Any]:
        with self._lock:
            cached = self._cache.get((Path(ws), section))
        if cached is not None:
            return dict(cached)
        script = f"cat {home_path(str(ws))}/{MANIFEST_DIR}/{section}.json 2>/dev/null; exit 0"
        try:
            done = self._run(script)
            data = json.loads(done.stdout) if done.stdout.strip() else {}
        except (SshError, ValueError):
            return {}
        data = data if isinstance(data, dict) else {}
        with self._lock:
            self._cache[(Path(ws), section)] = data
        return dict(data)

    def merge(self, ws: Path, section: str, fields: dict[str, Any]) -> None:
        """Merge ``fields`` into the section on the host; raises ``OSError``."""
        if section not in SECTIONS:
            raise ValueError(f"unknown manifest section {section!r} (use one of {SECTIONS})")
        merged = {**self.read(ws, section), **fields}
        payload = json.dumps(merged, default=_json_default, indent=2, sort_keys=True) + "\n"
        try:
            done = self._run(write_script(str(ws), section), payload.encode("utf-8"))
        except SshError as err:
            raise OSError(str(err)) from None
        if not done.ok:
            raise OSError(f"host {self.target.name}: {done.stderr_line() or 'write failed'}")
        with self._lock:
            # What is on the host now (JSON round trip: the same values a read returns).
            self._cache[(Path(ws), section)] = json.loads(payload)

    def forget(self, ws: Path) -> None:
        """Drop what is kept of ``ws`` (it was removed)."""
        with self._lock:
            for key in [k for k in self._cache if k[0] == Path(ws)]:
                del self._cache[key]
