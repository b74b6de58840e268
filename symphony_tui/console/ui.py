"""What the console's helpers use of the Textual app: dialogs, notifications, workers.

The helpers (``actions``, ``workspace_actions``, ``exports``, ``refresh``, ``lifecycle``)
are plain classes. :class:`~symphony_tui.console.app.SymphonyApp` builds them and passes
itself typed as :class:`Ui`: a helper reaches the app through these calls only (Textual's
API, and the terminal hand-over for a shell or an editor), never through the console's
actions or hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen
    from textual.worker import Worker


class Ui(Protocol):
    """The Textual app's calls the helpers make (``textual.app.App``; ``notify`` with the
    console's default timeouts)."""

    def push_screen(self, screen: Screen, callback: Callable[[Any], None] | None = None) -> Any:
        """Show ``screen``; ``callback`` gets what it is dismissed with."""
        ...

    async def push_screen_wait(self, screen: Screen) -> Any:
        """Show ``screen`` and return what it is dismissed with (from a worker only)."""
        ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
        key: str | None = None,
    ) -> None:
        """A toast; one with a ``key`` replaces the one shown under the same key."""
        ...

    def run_worker(
        self,
        work: Any,
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...

    def copy_to_clipboard(self, text: str) -> None: ...

    def export_screenshot(self, *, title: str | None = None) -> str: ...

    def handed_over(self) -> AbstractContextManager[None]:
        """``App.suspend`` while the event loop goes on: nothing is painted meanwhile."""
        ...

    def launch(
        self,
        argv: Sequence[str],
        cwd: str,
        suspend: Callable[[], AbstractContextManager[None]],
    ) -> Awaitable[tuple[bool, str]]:
        """Run ``argv`` in ``cwd`` on the terminal inside ``suspend()``: ``(ok, what
        happened)`` (``workspace_actions.run_in_terminal``; tests replace it)."""
        ...
