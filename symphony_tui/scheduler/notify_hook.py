"""The scheduler's side of attention: the ``notify.command`` hook
(config/settings.py ``NotifySettings``), run for each new alert that
:class:`~symphony_tui.scheduler.attention.AttentionWatch` finds, so headless runs notify
too. The console's side (bell, desktop notification) is console/attention.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from symphony_tui.config.child_env import ChildEnv
from symphony_tui.observability.logs import log_kv
from symphony_tui.scheduler.attention import Alert, AttentionWatch
from symphony_tui.workspaces.hooks import run_hook

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings, Settings
    from symphony_tui.domain import Snapshot

log = logging.getLogger("symphony_tui.scheduler")


class NotifyHook:
    """Runs ``notify.command`` for each alert of a kind in ``notify.command_on``, one at a
    time in arrival order (a slow hook delays the next, never the scheduler), with the
    agents' environment recipe (the scheduler's secrets scrubbed) plus the alert's
    ``SYMPHONY_ALERT_*``. A failing hook is logged, never raised."""

    def __init__(
        self,
        settings: Callable[[], NotifySettings],
        cwd: Callable[[], Path],
        env: Callable[[], ChildEnv],
    ) -> None:
        self._settings = settings
        self._cwd = cwd
        self._env = env
        self._queue: asyncio.Queue[Alert] = asyncio.Queue(maxsize=100)
        self._task: asyncio.Task | None = None

    def send(self, alert: Alert) -> None:
        settings = self._settings()
        if not settings.command or alert.kind not in settings.command_on:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="notify")
        with contextlib.suppress(asyncio.QueueFull):  # a hook that cannot keep up
            self._queue.put_nowait(alert)

    async def _drain(self) -> None:
        while True:
            alert = await self._queue.get()
            settings = self._settings()
            if not settings.command:
                continue
            result = await run_hook(
                "notify",
                settings.command,
                self._cwd(),
                settings.command_timeout_ms,
                alert.environment(),
                inherit=self._env().scrubbed(),
            )
            if not result.ok:
                log_kv(log, "warning", "notify.command failed", kind=alert.kind,
                       exit_code=result.exit_code, timed_out=result.timed_out)  # fmt: skip

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


#: Seconds between the hook watcher's looks at the snapshot.
WATCH_INTERVAL_S = 0.5


async def watch_for_hook(
    snapshot: Callable[[], Snapshot], settings: Callable[[], Settings]
) -> None:
    """The scheduler's side: while ``notify.command`` is set, look at the snapshot every
    :data:`WATCH_INTERVAL_S` and run the hook for each new alert. Runs until cancelled."""
    watch = AttentionWatch(lambda: settings().notify.failures)
    hook = NotifyHook(
        lambda: settings().notify,
        lambda: Path(settings().workflow_dir),
        lambda: ChildEnv(secrets=settings().tracker.secret_env_names),
    )
    try:
        while True:
            if settings().notify.command:
                for alert in watch.alerts(snapshot()):
                    hook.send(alert)
            await asyncio.sleep(WATCH_INTERVAL_S)
    finally:
        await hook.aclose()
