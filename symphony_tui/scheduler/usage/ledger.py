"""A crash-safe usage ledger per project: token and running-time totals survive ``kill -9``.

The file is append-only JSON Lines (record shapes in :mod:`.book`), one per project:
``usage.jsonl`` in the project's platformdirs state folder, beside its ``events.jsonl``.
Records are cumulative high-water marks per run, so a re-read record never adds twice and
a lost one only loses its own growth.

Durability: the event loop only queues records (no disk I/O there); one writer thread
appends each batch with a single ``write`` and then ``fdatasync``: a group commit. What was
written survives the process being killed (the kernel has it) and, once synced, a power
loss. A process killed mid-write can leave a torn last line: loading drops it with a
one-line warning, and start-up rewrites the file, so the next append starts on a clean line.

Resumed sessions: each mark also carries the session's absolute running total at the moment
its growth was counted (``usage/book.py``). A restarted scheduler starts counting a resumed
thread from that total, so a thread that read 120 before ``kill -9`` and 180 after its resume
adds 60: the project, the issue, its budgets and this ledger all read 180.

Re-adopted runs: a run whose agent outlived ``kill -9`` and that a restarted scheduler
re-adopts (``scheduler/adoption.py``) is the same run: it carries over what its last mark
counted (:meth:`UsageLedger.carry_over`, by its session key), so its tokens and spend read
the whole run. Its new records hold only its new growth in ``tokens`` and the carried part
in ``carried``, which no total adds: the earlier record already counts it.

Checkpoints: every ``checkpoint_s`` (1 s) of the scheduler clock, each live run whose
tokens or running time moved is queued; a run's end is queued at once. A crash therefore
loses at most the last checkpoint interval of growth. Running time is measured per run from
its start (scheduler monotonic clock), so after a restart the earlier runs' last marks are
final and the new process's runs are new records: nothing is counted twice.

Compaction: when the file passes ``compact_bytes`` (and twice its last compacted size), the
writer thread folds finished runs into one ``issue`` record per issue and atomically
replaces the file (temporary file, ``fsync``, ``os.replace``, ``fsync`` of the folder).
Start-up compacts too. One process writes a project's ledger: the project lock
(``project_lock.py``) keeps a second scheduler off the project.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from symphony_tui.domain import TokenUsage
from symphony_tui.observability.logs import log_kv
from symphony_tui.paths import project_state_dir
from symphony_tui.scheduler.clock import Clock, TimerHandle
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.book import (
    IssueUsage,
    RunUsage,
    UsageBook,
    decode,
    encode_run,
)

log = logging.getLogger("symphony_tui.scheduler")

#: Seconds of scheduler clock between checkpoints of live runs.
CHECKPOINT_S = 1.0
#: Ledger size (bytes) past which the writer compacts it.
COMPACT_BYTES = 1 << 20
#: Longest wait for the writer thread to drain at close (seconds).
CLOSE_TIMEOUT_S = 5.0

USAGE_FILE_NAME = "usage.jsonl"

_sync = getattr(os, "fdatasync", os.fsync)


def usage_file(project_key: str, state_dir: Path | None = None) -> Path:
    """The ledger of ``project_key`` (``project_lock.project_key_for``): ``usage.jsonl`` in
    the project's state folder, beside its ``events.jsonl`` (:mod:`symphony_tui.paths`;
    ``state_dir`` replaces the platformdirs user state folder)."""
    return project_state_dir(project_key, state_dir) / USAGE_FILE_NAME


@dataclass(frozen=True)
class LoadedUsage:
    """What a ledger held at start-up: per-issue usage, their sums and what was skipped.

    ``warning`` is one line for the operator when lines were dropped (a torn last line
    after a crash, or unreadable lines), else None.
    """

    by_issue: dict[str, IssueUsage] = field(default_factory=dict)
    warning: str | None = None
    #: Session key -> the last mark of a run that never ended there (its process was
    #: killed): what a re-adopted run carries over (:meth:`UsageLedger.carry_over`).
    unfinished: dict[str, RunUsage] = field(default_factory=dict)

    @property
    def tokens(self) -> TokenUsage:
        total = TokenUsage()
        for u in self.by_issue.values():
            total = total + u.tokens
        return total

    @property
    def seconds(self) -> float:
        return sum(u.seconds for u in self.by_issue.values())

    @property
    def unreported(self) -> dict[str, int]:
        """Issue id -> its runs that had no usage report (issues with none left out)."""
        return {i: u.unreported for i, u in self.by_issue.items() if u.unreported}

    @property
    def unpriced(self) -> dict[str, int]:
        """Issue id -> its runs whose tokens had no price (issues with none left out)."""
        return {i: u.unpriced for i, u in self.by_issue.items() if u.unpriced}

    @property
    def threads(self) -> dict[str, TokenUsage]:
        """Session key -> the session's absolute totals when its growth was last counted:
        where a resumed thread's counting starts (``TokenLedger.seed``)."""
        found: dict[str, TokenUsage] = {}
        for u in self.by_issue.values():
            found.update(u.threads)
        return found


def read_ledger(path: Path) -> tuple[UsageBook, str | None]:
    """Fold the ledger at ``path`` (missing = empty). Returns the book and a one-line
    warning when lines were dropped. Raises ``OSError`` when the file cannot be read."""
    book = UsageBook()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return book, None
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: b"" unless the last write was cut short
    bad: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            book.apply(decode(line))
        except ValueError as exc:
            bad.append(f"line {number}: {exc}")
    parts = []
    if torn.strip():
        parts.append(f"dropped a torn last line ({len(torn)} bytes, cut off by a crash)")
    if bad:
        parts.append(f"skipped {len(bad)} unreadable line(s) (first: {bad[0]})")
    return book, (f"usage ledger {path}: " + "; ".join(parts)) if parts else None


class UsageLedger:
    """The usage ledger of one project (see the module doc). Loop side: :meth:`open`
    (blocking, call it from a thread), :meth:`start_checkpoints`, :meth:`checkpoint`,
    :meth:`run_ended`, :meth:`close` (blocking, bounded). Write failures are logged once
    and the scheduler goes on without persistence; nothing raises into the event loop.
    """

    def __init__(
        self,
        path: Path,
        *,
        checkpoint_s: float = CHECKPOINT_S,
        compact_bytes: int = COMPACT_BYTES,
    ) -> None:
        self.path = path
        self.checkpoint_s = checkpoint_s
        self.compact_bytes = compact_bytes
        self._queue: queue.SimpleQueue[RunUsage | threading.Event | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self._book = UsageBook()  # owned by the writer thread once it runs
        self._compacted_size = 0
        self._live: dict[int, tuple[Run, str]] = {}  # id(run) -> (run, run id); loop only
        # run id -> (tokens, seconds, reported) of its last queued mark
        self._written: dict[str, tuple[TokenUsage, float, bool]] = {}
        self._timer: TimerHandle | None = None
        self._failed = False
        self._unfinished: dict[str, RunUsage] = {}  # loop only, after open()
        self.compactions = 0
        #: ``run -> (session key, absolute totals)`` of the session whose growth ``run.tokens``
        #: counts (None before it has one): recorded in each mark beside the growth.
        self.session_totals: Callable[[Run], tuple[str, TokenUsage] | None] | None = None

    # ------------------------------------------------------------------ start-up

    def open(self) -> LoadedUsage:
        """Load the ledger, rewrite it compacted (dropping a torn line), start the writer
        thread. Blocking file I/O: call it with ``asyncio.to_thread``. On ``OSError`` the
        error is logged and returned as the warning; the ledger then records nothing."""
        try:
            book, warning = read_ledger(self.path)
            unfinished = {
                r.thread: r for r in book.runs.values() if not r.ended and r.thread is not None
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._book = book
            self._rewrite(live=set())
            self._fd = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        except OSError as exc:
            self._failed = True
            message = f"usage ledger {self.path} unusable, totals will not survive a restart: {exc}"
            log_kv(log, "warning", message)
            return LoadedUsage(warning=message)
        if warning:
            log_kv(log, "warning", warning)
        self._unfinished = unfinished
        loaded = LoadedUsage(by_issue=book.per_issue(), warning=warning, unfinished=unfinished)
        # From here on the book belongs to the writer thread.
        self._thread = threading.Thread(target=self._write_loop, name="usage-ledger", daemon=True)
        self._thread.start()
        return loaded

    def start_checkpoints(self, clock: Clock, runs: Callable[[], Iterable[Run]]) -> None:
        """Checkpoint ``runs()`` (the live runs) every ``checkpoint_s`` on ``clock``."""

        def tick() -> None:
            self.checkpoint(runs(), clock.monotonic())
            self._timer = clock.call_later(self.checkpoint_s, tick)

        self._timer = clock.call_later(self.checkpoint_s, tick)

    # ------------------------------------------------------------------ loop side

    def carry_over(self, session_key: str) -> RunUsage | None:
        """The last mark of the unfinished run of ``session_key`` (an earlier process was
        killed while it ran), once: a re-adopted run of that session starts from its
        :attr:`~.book.RunUsage.whole` (``Run.carried``). None when there is none."""
        return self._unfinished.pop(session_key, None)

    def checkpoint(self, runs: Iterable[Run], now_mono: float) -> int:
        """Queue a mark for each run in ``runs`` whose tokens or running time moved since its
        last one. Returns how many were queued. Never blocks."""
        queued = 0
        for run in runs:
            mark = self._mark(run, now_mono, ended=False)
            if mark is not None:
                self._queue.put(mark)
                queued += 1
        return queued

    def run_ended(self, run: Run, now_mono: float) -> None:
        """Queue the final mark of ``run`` (its tokens and running time at its end)."""
        mark = self._mark(run, now_mono, ended=True)
        self._live.pop(id(run), None)
        if mark is not None:
            self._queue.put(mark)
            self._written.pop(mark.run, None)

    def wait_written(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Block until everything queued so far is written and synced (False on timeout or
        without a writer). For shutdown and tests; never call it on the event loop."""
        if self._thread is None or not self._thread.is_alive():
            return False
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop checkpoints, write what is queued, stop the writer and close the file."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _mark(self, run: Run, now_mono: float, *, ended: bool) -> RunUsage | None:
        if self._failed:
            return None
        entry = self._live.get(id(run))
        if entry is None or entry[0] is not run:
            entry = (run, uuid.uuid4().hex)
            self._live[id(run)] = entry
        run_id = entry[1]
        seconds = max(0.0, now_mono - run.started_mono)
        last = self._written.get(run_id)
        reported = not run.usage_unreported
        if (
            not ended
            and last is not None
            and last[0] == run.tokens
            and last[2] == reported
            and seconds - last[1] < 0.5
        ):
            return None
        self._written[run_id] = (run.tokens, seconds, reported)
        # The carried part is in the earlier process's record: only the growth is new.
        own = run.tokens if run.carried is None else run.tokens.growth_since(run.carried)
        session = self.session_totals(run) if self.session_totals is not None else None
        thread, thread_tokens = session if session is not None else (None, None)
        return RunUsage(
            run_id,
            run.issue.id,
            run.issue.identifier,
            own,
            seconds,
            ended,
            thread,
            thread_tokens,
            reported,
            run.carried,
        )

    # ------------------------------------------------------------------ writer thread

    def _write_loop(self) -> None:
        try:
            self._drain_until_stopped()
        except Exception as exc:  # never die silently: the loop would queue for ever
            log.exception("usage ledger writer failed")
            self._fail(OSError(str(exc)))
            self._release_waiters()

    def _release_waiters(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                item = self._queue.get_nowait()
                if isinstance(item, threading.Event):
                    item.set()

    def _drain_until_stopped(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(self._queue.get_nowait())
            marks: dict[str, RunUsage] = {}
            waiters: list[threading.Event] = []
            for item in batch:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    marks[item.run] = item  # cumulative: the newest mark of a run suffices
            if marks:
                self._append(list(marks.values()))
            for waiter in waiters:
                waiter.set()

    def _append(self, marks: list[RunUsage]) -> None:
        if self._fd is None:
            return
        data = b"".join(encode_run(m) for m in marks)
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            _sync(self._fd)
        except OSError as exc:
            self._fail(exc)
            return
        for m in marks:
            self._book.apply(m)
        try:
            size = os.fstat(self._fd).st_size
            if size > max(self.compact_bytes, 2 * self._compacted_size):
                live = {m.run for m in self._book.runs.values() if not m.ended}
                self._rewrite(live)
                old, self._fd = (
                    self._fd,
                    os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC),
                )
                os.close(old)
        except OSError as exc:
            self._fail(exc)

    def _rewrite(self, live: set[str]) -> None:
        """Replace the file with the compacted book, atomically (see the module doc)."""
        lines = self._book.compact(live)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            data = b"".join(lines)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._compacted_size = len(data)
        self.compactions += 1

    def _fail(self, exc: OSError) -> None:
        if not self._failed:
            log_kv(log, "warning", "usage ledger write failed", path=str(self.path), error=str(exc))
        self._failed = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
