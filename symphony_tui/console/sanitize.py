"""Make agent and tracker text inert before it reaches the operator's terminal.

The cleaning itself (escape sequences, control characters, bidi overrides) is
:mod:`symphony_tui.text`, shared with the core. This module adds :func:`inert`: a
``rich.text.Text`` built without markup parsing, so markup such as ``[bold]`` in agent text
shows literally.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from symphony_tui.text import clean, one_line

__all__ = ["clean", "inert", "one_line"]


def inert(
    text: object,
    style: str | Style = "",
    *,
    multiline: bool = False,
    limit: int | None = None,
) -> Text:
    """A ``Text`` holding the cleaned ``text`` as literal characters (no markup, no emoji
    codes, no highlighting). Single-line unless ``multiline``; ``limit`` truncates a
    single line with ``…``."""
    s = clean(text, multiline=True) if multiline else one_line(text, limit)
    return Text(s, style=style, end="")
