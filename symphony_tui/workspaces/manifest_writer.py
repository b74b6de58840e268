"""Manifest writes off the event loop: one writer thread, per-file order kept, repeated
writes of one file coalesced (spec §9 recovery; the layout is ``manifest.py``'s).

Every manifest write merges fields into ``.symphony/<section>.json`` and fsyncs it
(``atomic.atomic_write_bytes``). At run turnover dozens of runs end and start together and
each writes several sections; done on the event loop, those fsyncs stall every reader (the
HTTP API, the console) for seconds. :class:`ManifestWriter` takes a write as a field merge
(:meth:`ManifestWriter.write`, never blocks) and one daemon thread applies them:

- Order: one thread applies every write, so writes of one file land in the order they
  were made; a field set twice keeps the later value.
- Coalescing: a write to a file that already has one waiting is merged into it (later
  fields win), so a file written five times while the thread was busy is written once.
- Read-free merges: ``defaults`` (set when absent) and ``nested`` (merge into a dict
  field) are resolved on the thread against the file as it is then, so a caller never
  reads a manifest to compute its write.
- Barrier: :meth:`flush` (async) / :meth:`flush_sync` return once every write made before
  the call is on disk. Whoever reads a manifest (recovery scans, tests) or removes a
  workspace flushes first; the orchestrator flushes on shutdown and in ``barrier()``.
- Errors: a failed write is logged as one ``manifest write failed`` line with the path,
  section and error, and counted in :attr:`ManifestWriter.failures`; it never stops the
  thread or the writes queued behind it.

The thread starts on the first write and ends when nothing is waiting, so an idle writer
holds no thread; at interpreter exit every live writer is flushed (``EXIT_FLUSH_S``).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from symphony_tui.observability.logs import log_kv
from symphony_tui.workspaces.manifest import merge_section, read_section

log = logging.getLogger(__name__)

_Key = tuple[Path, str]
#: Seconds the interpreter's exit waits for each writer's queued writes.
EXIT_FLUSH_S = 5.0
_LIVE: weakref.WeakSet[ManifestWriter] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    # The thread is a daemon: an exit that skipped the orchestrator's shutdown (a crash
    # path) still lands what was queued, within EXIT_FLUSH_S per writer.
    for writer in list(_LIVE):
        writer.flush_sync(EXIT_FLUSH_S)


class _Merge:
    """What is waiting for one file: ``fields`` (set), ``defaults`` (set when the file has
    no such field) and ``nested`` (dicts merged one level into the file's dict field)."""

    __slots__ = ("defaults", "fields", "first", "nested", "what")

    def __init__(self, first: int, what: str) -> None:
        self.first = first
        self.what = what
        self.fields: dict[str, Any] = {}
        self.defaults: dict[str, Any] = {}
        self.nested: dict[str, dict[str, Any]] = {}

    def add(
        self,
        fields: dict[str, Any],
        defaults: dict[str, Any] | None,
        nested: dict[str, dict[str, Any]] | None,
    ) -> None:
        """Fold one more write in, as if it were applied after the ones before."""
        for key, value in fields.items():
            self.fields[key] = value
            self.defaults.pop(key, None)
            self.nested.pop(key, None)
        for key, value in (defaults or {}).items():
            if key not in self.fields and key not in self.nested:
                self.defaults.setdefault(key, value)
        for key, part in (nested or {}).items():
            if isinstance(self.fields.get(key), dict):
                self.fields[key] = {**self.fields[key], **part}
            else:
                self.nested[key] = {**self.nested.get(key, {}), **part}

    def resolve(
        self, ws: Path, section: str, read: Callable[[Path, str], dict[str, Any]] = read_section
    ) -> dict[str, Any]:
        """The fields to merge into the file as it is on disk now (``read`` reads it)."""
        out = dict(self.fields)
        if self.defaults or self.nested:
            current = read(ws, section)
            for key, value in self.defaults.items():
                if key not in current:
                    out[key] = value
            for key, part in self.nested.items():
                base = current.get(key)
                out[key] = {**(base if isinstance(base, dict) else {}), **part}
        return out


class ManifestStore(Protocol):
    """Where a mounted workspace's manifests live instead of this machine's disk (a
    worker host's, ``workspaces/remote_manifest.py``). Called on the writer thread."""

    def read(self, ws: Path, section: str) -> dict[str, Any]: ...

    def merge(self, ws: Path, section: str, fields: dict[str, Any]) -> None: ...


class ManifestWriter:
    """Applies manifest field merges on one background thread (see the module docstring).
    Thread-safe: :meth:`write` may be called from any thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        #: (workspace, section) -> what waits for it; dict order is the order of first
        #: writes.
        self._pending: dict[_Key, _Merge] = {}
        self._seq = 0  # writes taken so far
        self._busy: int | None = None  # first sequence number of the entry being written
        self._busy_ws: Path | None = None
        self._thread: threading.Thread | None = None
        #: Writes that failed (each was logged).
        self.failures = 0
        #: Files written (after coalescing).
        self.files_written = 0
        #: Workspaces whose manifests live elsewhere (:meth:`mount`).
        self._stores: dict[Path, ManifestStore] = {}
        _LIVE.add(self)

    def mount(self, ws: Path, store: ManifestStore) -> None:
        """From now on, writes of workspace ``ws`` go to ``store`` (a worker host)."""
        with self._cond:
            self._stores[Path(ws)] = store

    def unmount(self, ws: Path) -> None:
        with self._cond:
            self._stores.pop(Path(ws), None)

    def store(self, ws: Path) -> ManifestStore | None:
        """The store ``ws`` is mounted on (None: this machine's disk)."""
        with self._cond:
            return self._stores.get(Path(ws))

    def read(self, ws: Path, section: str) -> dict[str, Any]:
        """One section of ``ws`` wherever it lives (call :meth:`flush` first for what was
        queued); ``{}`` when missing or unreadable."""
        store = self.store(ws)
        return read_section(ws, section) if store is None else store.read(ws, section)

    # ---------------------------------------------------------------- writing

    def write(
        self,
        ws: Path,
        section: str,
        what: str = "manifest",
        *,
        defaults: dict[str, Any] | None = None,
        nested: dict[str, dict[str, Any]] | None = None,
        **fields: Any,
    ) -> None:
        """Merge ``fields`` into ``ws``'s ``section`` file, soon, on the writer thread;
        ``defaults`` are set only where the file has no such field (``created_at``);
        ``nested`` dicts are merged into the file's dict field of that name (``hooks``).
        ``what`` names the write in the failure log line. Never blocks, never raises."""
        key = (Path(ws), section)
        with self._cond:
            self._seq += 1
            entry = self._pending.get(key)
            if entry is None:
                entry = self._pending[key] = _Merge(self._seq, what)
            entry.add(fields, defaults, nested)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._drain, name="manifest-writer", daemon=True
                )
                self._thread.start()

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    self._thread = None
                    self._cond.notify_all()
                    return
                key = next(iter(self._pending))
                entry = self._pending.pop(key)
                self._busy = entry.first
                self._busy_ws = key[0]
                store = self._stores.get(key[0])
            what = entry.what
            ok, error = True, ""
            try:
                if store is None:
                    merge_section(key[0], key[1], entry.resolve(*key))
                else:
                    store.merge(key[0], key[1], entry.resolve(*key, read=store.read))
            except Exception as exc:  # a bad value must not stop the writes behind it
                ok, error = False, f"{type(exc).__name__}: {exc}"
            if not ok:
                log_kv(
                    log,
                    "WARNING",
                    f"{what} manifest write failed",
                    path=str(key[0]),
                    section=key[1],
                    error=error,
                )
            with self._cond:
                self._busy = None
                self._busy_ws = None
                if ok:
                    self.files_written += 1
                else:
                    self.failures += 1
                self._cond.notify_all()

    def discard(self, ws: Path) -> bool:
        """Drop the queued writes of workspace ``ws`` (it is being removed: they are moot).
        True when the thread is writing into ``ws`` right now (wait with :meth:`flush`
        before deleting the folder)."""
        ws = Path(ws)
        with self._cond:
            for key in [k for k in self._pending if k[0] == ws]:
                del self._pending[key]
            self._cond.notify_all()
            return self._busy_ws == ws

    # ---------------------------------------------------------------- barriers

    def _done_before(self, target: int) -> bool:
        """Every write numbered ``<= target`` is applied (caller holds the lock)."""
        oldest = [entry.first for entry in self._pending.values()]
        if self._busy is not None:
            oldest.append(self._busy)
        return not oldest or min(oldest) > target

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being written."""
        with self._cond:
            return not self._pending and self._busy is None

    def flush_sync(self, timeout: float | None = None) -> bool:
        """Block until every write made before this call is on disk (or failed and was
        logged); False when ``timeout`` seconds passed first."""
        with self._cond:
            target = self._seq
            return self._cond.wait_for(lambda: self._done_before(target), timeout)

    async def flush(self, timeout: float | None = None) -> bool:
        """:meth:`flush_sync` for the event loop: waits in a thread, returns at once when
        nothing is waiting."""
        if self.idle:
            return True
        return await asyncio.to_thread(self.flush_sync, timeout)
