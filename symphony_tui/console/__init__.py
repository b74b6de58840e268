"""The Textual operator console (the only package allowed to import textual or rich).

Entry point: :class:`symphony_tui.console.app.SymphonyApp`, loaded on first use so that
importing a console helper (``console.sanitize``, ``console.fmt``) does not import the
app, its screens and all of Textual (PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

__all__ = ["SymphonyApp"]


def __getattr__(name: str) -> object:
    if name == "SymphonyApp":
        from symphony_tui.console.app import SymphonyApp

        return SymphonyApp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
