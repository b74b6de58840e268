"""What screens ask of the console, as typed Textual messages.

Screens never import the app (that would be an import circle): they post one of these,
which bubbles from the screen to :class:`~symphony_tui.console.app.SymphonyApp`, whose
``on_*`` handlers act on it. What screens *read* from the app is the
:class:`ConsoleApp` protocol, reached through :func:`console_app`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from rich.text import Text
from textual.dom import DOMNode
from textual.message import Message

if TYPE_CHECKING:
    from symphony_tui.console.registry import ConsoleCommand
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import Snapshot
    from symphony_tui.domain.commands import Command
    from symphony_tui.scheduler.port import SchedulerPort


class SendCommand(Message):
    """Send ``command`` to the scheduler; its result becomes a notification."""

    def __init__(self, command: Command) -> None:
        super().__init__()
        self.command = command


class ConfirmCommand(Message):
    """Ask the operator (a ``Confirm`` dialog titled ``title`` with ``body`` and a ``yes``
    button), then send ``command`` if they agree."""

    def __init__(self, title: str, body: Text, command: Command, yes: str) -> None:
        super().__init__()
        self.title = title
        self.body = body
        self.command = command
        self.yes = yes


class OpenWorker(Message):
    """Open the worker detail screen of ``issue_id``."""

    def __init__(self, issue_id: str) -> None:
        super().__init__()
        self.issue_id = issue_id


class ConsoleApp(Protocol):
    """What screens read from the console app."""

    port: SchedulerPort
    cursor_blink: bool
    live_text_s: float  # streamed text (log lines, rows' last activity) repaints this often
    monotonic: Callable[[], float]  # the clock of live_text_s, in seconds

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot shown last (``None`` before the first tick)."""
        ...

    @property
    def project_filter(self) -> str | None:
        """A fleet console's project filter (``None``: every project)."""
        ...

    @property
    def starting(self) -> bool:
        """True until the scheduler is built (``console.starting``)."""
        ...

    @property
    def stopping(self) -> bool:
        """True once a quit or detach began: screens run no more actions."""
        ...

    @property
    def tones(self) -> Tones:
        """Styles of the current theme."""
        ...

    def key_for(self, cmd: ConsoleCommand) -> str:
        """The key(s) that run ``cmd`` now, after keymap remapping, for display."""
        ...


def console_app(node: DOMNode) -> ConsoleApp:
    """The console app of ``node`` (a mounted screen or widget), typed as what it offers."""
    return cast(ConsoleApp, node.app)
