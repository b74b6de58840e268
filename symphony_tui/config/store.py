"""The live workflow: last-known-good holder with reload and file watching (spec §6.2).

A bad edit never replaces a good workflow: the store keeps the last good one and exposes
the error (``.error``) for the operator until a good version is loaded again. The file is
re-read and hashed on every check rather than trusting mtimes, because two saves inside
one filesystem timestamp tick look identical to ``stat`` and the file is small.

A file is evaluated within the budgets of ``bounded.py`` (YAML aliases and size, Liquid
limits, a deadline), and a running scheduler evaluates it off its event loop
(:meth:`WorkflowStore.reload`), so a hostile edit costs one error line while the loop and
the API go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, awatch

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.workflow import Workflow, load_workflow, parse_within
from symphony_tui.observability.logs import log_kv

log = logging.getLogger(__name__)

#: Milliseconds watchfiles waits for a burst of events (editor save = several) to settle.
WATCH_DEBOUNCE_MS = 150
#: Milliseconds after which an idle watcher reports in (how ``ready`` learns it is armed).
WATCH_IDLE_MS = 500
#: Seconds to wait before re-arming the watcher after it failed (folder removed, ...).
WATCH_RETRY_S = 2.0


class WorkflowStore:
    """Holds the current good :class:`Workflow` of one ``WORKFLOW.md``.

    ``load_initial()`` must succeed before anything else (start-up fails otherwise).
    ``reload_if_changed()`` is cheap enough to call before every dispatch; ``watch()``
    calls it on filesystem events.
    """

    def __init__(self, path: Path, env: dict[str, str] | None = None) -> None:
        self.path = Path(path).expanduser().absolute()
        self._env = env
        self._current: Workflow | None = None
        self._last_seen_digest: str | None = None
        self.error: str | None = None
        self._reloading = asyncio.Lock()

    @property
    def current(self) -> Workflow:
        """The last good workflow. Raises ``RuntimeError`` before ``load_initial()``."""
        if self._current is None:
            raise RuntimeError("WorkflowStore.load_initial() has not succeeded yet")
        return self._current

    def load_initial(self) -> Workflow:
        """Load the file; raises :class:`WorkflowError` (start-up must fail on it)."""
        wf = load_workflow(self.path, self._env)
        self._warn(wf)
        self._current = wf
        self._last_seen_digest = wf.fingerprint
        self.error = None
        return wf

    def reload_if_changed(self) -> bool:
        """Re-read the file; take it when its content changed and it is valid.

        Returns True when a new good workflow became :attr:`current`. On an unreadable or
        invalid file the last good workflow stays and :attr:`error` holds the one-line
        reason; a later good load (or a revert to the current content) clears it. Blocks
        while a new content is evaluated (up to the deadline of ``bounded.py``).
        """
        read = self._new_content()
        return False if read is None else self._evaluate(read)

    def _new_content(self) -> bytes | None:
        """The file's bytes when they are new and need evaluating, else None (unchanged,
        the same bad content again, or unreadable: :attr:`error` says so). Cheap."""
        current = self.current
        try:
            data = self.path.read_bytes()
        except OSError as err:
            reason = err.strerror or type(err).__name__
            self._set_error(f"missing_workflow_file: cannot read {self.path}: {reason}")
            self._last_seen_digest = None
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest == current.fingerprint:
            self._last_seen_digest = digest
            self._set_error(None)
            return None
        if digest == self._last_seen_digest:
            return None  # the same bad content again: error already set
        self._last_seen_digest = digest
        return data

    def _evaluate(self, data: bytes) -> bool:
        try:
            wf = parse_within(self.path, data, self._env)
        except WorkflowError as err:
            self._set_error(str(err))
            return False
        self._current = wf
        self._set_error(None)
        log_kv(log, "INFO", "workflow reloaded", path=str(self.path))
        self._warn(wf)
        return True

    async def reload(self) -> bool:
        """:meth:`reload_if_changed`, one at a time, a new content evaluated in a thread:
        the event loop goes on meanwhile (up to the deadline of ``bounded.py``)."""
        async with self._reloading:
            read = self._new_content()
            return False if read is None else await asyncio.to_thread(self._evaluate, read)

    def _warn(self, wf: Workflow) -> None:
        """One WARNING line per front-matter key nothing reads."""
        for warning in wf.warnings:
            log_kv(log, "WARNING", "workflow setting ignored", path=str(self.path), detail=warning)

    def _set_error(self, error: str | None) -> None:
        if error != self.error and error is not None:
            log_kv(log, "ERROR", "workflow reload failed; keeping last good", error=error)
        self.error = error

    async def watch(
        self, on_change: Callable[[], None], *, ready: asyncio.Event | None = None
    ) -> None:
        """Watch the file until cancelled; after each relevant change call
        :meth:`reload_if_changed` and then ``on_change()`` when the workflow or the error
        changed. Watches the folder (not the file, not recursively) so editors that replace
        the file on save keep being followed. ``ready`` is set once the watcher is armed;
        a change made before that is caught by a check at arming time. Never raises except
        ``CancelledError``."""
        name = self.path.name

        def only_our_file(_change: Change, changed: str) -> bool:
            return Path(changed).name == name

        while True:
            try:
                armed = False
                async for changes in awatch(
                    self.path.parent,
                    watch_filter=only_our_file,
                    recursive=False,
                    debounce=WATCH_DEBOUNCE_MS,
                    rust_timeout=WATCH_IDLE_MS,
                    yield_on_timeout=True,
                    ignore_permission_denied=True,
                ):
                    if changes or not armed:
                        await self._check_and_notify(on_change)
                    if not armed:
                        armed = True
                        if ready is not None:
                            ready.set()
                # awatch ends only when its folder goes away.
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log_kv(log, "WARNING", "workflow watcher failed; retrying", error=str(err))
            await self._check_and_notify(on_change)
            await asyncio.sleep(WATCH_RETRY_S)

    async def _check_and_notify(self, on_change: Callable[[], None]) -> None:
        before = self.error
        try:
            changed = await self.reload()
        except Exception as err:  # never let the watcher die on an unexpected bug
            log_kv(log, "ERROR", "workflow reload crashed", error=repr(err))
            return
        if changed or self.error != before:
            try:
                on_change()
            except Exception as err:
                log_kv(log, "ERROR", "workflow on_change callback failed", error=repr(err))
