"""The Textual operator console (the only package allowed to import textual or rich).

Entry point: :class:`symphony_tui.console.app.SymphonyApp`.
"""

from symphony_tui.console.app import SymphonyApp

__all__ = ["SymphonyApp"]
