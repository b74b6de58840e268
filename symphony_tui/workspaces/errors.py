"""Workspace errors (spec §9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from symphony_tui.text import one_line

if TYPE_CHECKING:
    from symphony_tui.workspaces.hooks import HookResult


class WorkspaceError(Exception):
    """A workspace could not be prepared, used or removed. ``str(err)`` is
    ``"<code>: <message>"`` on one line. ``hook`` carries the failed hook's result when a
    hook caused it (``after_create``). ``host_lost``: on a worker host, why its connection
    failed (one line), when that is the cause."""

    def __init__(
        self,
        code: str,
        message: str,
        hook: HookResult | None = None,
        *,
        host_lost: str | None = None,
    ) -> None:
        self.code = code
        self.message = one_line(message)
        self.hook = hook
        self.host_lost = host_lost
        super().__init__(f"{code}: {self.message}")
