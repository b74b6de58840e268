"""The console's side of attention (scheduler/attention.py finds the alerts): the terminal
bell and a desktop notification through the terminal, per ``notify.bell`` /
``notify.desktop`` kinds.

Desktop notifications are terminal escapes: OSC 9 (``ESC ] 9 ; text BEL``: iTerm2,
WezTerm, Ghostty) or OSC 777 (``ESC ] 777 ; notify ; title ; body BEL``: VTE terminals
such as GNOME Terminal, foot, urxvt). Both travel over SSH with the rest of the output.
``notify.terminal: auto`` sends one only where the terminal says it is one of those (from
``TERM_PROGRAM``, ``TERM``, ``VTE_VERSION``); an unknown terminal could print the text.
The text is cleaned of every control character first (alerts already carry one inert
line), ``;`` is replaced in OSC 777 fields, and it is prefixed so that an agent's words
can never read as another OSC 9 sub-command.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from symphony_tui.console.sanitize import one_line
from symphony_tui.scheduler.attention import Alert, AttentionWatch

if TYPE_CHECKING:
    from symphony_tui.config.settings import NotifySettings
    from symphony_tui.domain import Snapshot

Protocol = Literal["osc9", "osc777"]

_OSC9_PROGRAMS = ("iTerm.app", "WezTerm", "ghostty")
_OSC777_TERMS = ("foot", "rxvt-unicode")


def desktop_protocol(setting: str, environ: Mapping[str, str] | None = None) -> Protocol | None:
    """The escape to use for ``notify.terminal`` = ``setting`` in ``environ``; None: none."""
    if setting == "off":
        return None
    if setting in ("osc9", "osc777"):
        return setting  # type: ignore[return-value]  # one of the Literal's, checked above
    env = os.environ if environ is None else environ
    if env.get("TERM_PROGRAM") in _OSC9_PROGRAMS:
        return "osc9"
    term = env.get("TERM", "")
    if env.get("VTE_VERSION") or term.startswith(_OSC777_TERMS):
        return "osc777"
    return None


def desktop_escape(protocol: Protocol, alert: Alert) -> str:
    """The escape sequence that shows ``alert`` as a desktop notification."""
    title = one_line(f"symphony: {alert.title}", 120)
    body = one_line(alert.message, 300)
    if protocol == "osc9":
        return f"\x1b]9;{one_line(f'{title}: {body}' if body else title, 400)}\x07"
    title, body = title.replace(";", ","), body.replace(";", ",")
    return f"\x1b]777;notify;{title};{body}\x07"


class ConsoleAttention:
    """Feed it each snapshot the console shows (:meth:`on_snapshot`); it calls ``bell()``
    and ``write(escape)`` (the app's terminal) for the alerts that apply."""

    def __init__(
        self,
        settings: Callable[[], NotifySettings],
        *,
        bell: Callable[[], None],
        write: Callable[[str], None],
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._settings = settings
        self._bell = bell
        self._write = write
        self._environ = environ
        self.watch = AttentionWatch(lambda: self._settings().failures)
        self.shown: list[Alert] = []  # every alert this console acted on, for tests

    def on_snapshot(self, snapshot: Snapshot) -> None:
        alerts = self.watch.alerts(snapshot)
        if not alerts:
            return
        settings = self._settings()
        protocol = desktop_protocol(settings.terminal, self._environ)
        rang = False
        for alert in alerts:
            acted = False
            if alert.kind in settings.bell and not rang:
                self._bell()  # once per snapshot, however many alerts it brings
                rang = acted = True
            if protocol is not None and alert.kind in settings.desktop:
                self._write(desktop_escape(protocol, alert))
                acted = True
            if acted:
                self.shown.append(alert)
