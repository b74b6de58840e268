"""Untrusted text made inert: no terminal escapes, no control characters.

Agent output, issue titles and tracker or server errors are untrusted: they are shown as
plain text, never as markup or terminal control. They may carry ANSI/VT escape sequences
(colours, cursor moves, OSC 52 clipboard writes, OSC 8 links, title changes), C0/C1 control
characters or Unicode bidi overrides.
:func:`clean` removes them; :func:`one_line` also folds the text onto one bounded line, for
reasons, errors and log lines. :func:`cap` and :func:`cap_tail` bound the size of agent text
kept per event (raw: the console sanitizes it when shown). Pure string functions: the console builds its literal
``rich`` text on top of them (``console/sanitize.py``), the core uses them directly.
"""

from __future__ import annotations

import re
from typing import Any

# Escape sequences, longest forms first. 7-bit (ESC-introduced) and 8-bit (C1) variants.
_STRING_SEQ = re.compile(
    # OSC / DCS / SOS / PM / APC: up to BEL or ST, or to the end if unterminated
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)",
    re.DOTALL,
)
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?")
# Other two/three-byte escapes: ESC + intermediates + final (charset selects, keypad modes...)
_ESC_OTHER = re.compile(r"\x1b[ -/]*[0-~]?")
# C0 (except \t \n, handled separately), DEL, C1, and bidi controls that reorder text
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACES = re.compile(r"[ \t]{2,}")
# Anything any of the patterns above could touch (C0 incl. ESC, tab and line breaks, DEL,
# C1, bidi): most text has none, and then cleaning is one scan instead of five.
_ANY = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, *, multiline: bool = False, tab_size: int = 4) -> str:
    """Return ``text`` without escape sequences or control characters.

    ``multiline=True`` keeps line breaks (``\\r\\n`` and lone ``\\r`` become ``\\n``);
    otherwise every line break becomes one space. Tabs become spaces. ``None`` gives
    ``""``; other non-strings are passed through ``str()`` first. Never raises.
    """
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    if not s:
        return ""
    if _ANY.search(s) is None:
        return s
    s = _STRING_SEQ.sub("", s)
    s = _CSI.sub("", s)
    s = _ESC_OTHER.sub("", s)
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    s = _CONTROLS.sub("", s)
    s = s.replace("\t", " " * tab_size)
    if not multiline:
        s = s.replace("\n", " ")
    return s


def one_line(text: object, limit: int | None = None) -> str:
    """:func:`clean` to a single line with runs of spaces collapsed, cut to ``limit``
    cells with a trailing ``…`` when longer."""
    s = clean(text)
    if "  " in s:
        s = _SPACES.sub(" ", s)
    s = s.strip()
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def one_line_tail(text: object, limit: int) -> str:
    """:func:`one_line` keeping the *end*: the last ``limit`` cells, with a leading ``…``
    when longer. For rolling agent text, whose newest words are at the end
    (``symphony_tui.domain.activity``)."""
    s = one_line(text)
    if len(s) > limit:
        s = "…" + s[len(s) - max(limit - 1, 0) :]
    return s


#: Characters of agent text or command output kept per event.
MAX_TEXT = 64 * 1024


def cap(text: Any, limit: int = MAX_TEXT) -> str:
    """``text`` as a string of at most ``limit`` characters plus a truncation marker."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    if len(s) <= limit:
        return s
    return s[:limit] + f"\n[... truncated {len(s) - limit} characters]"


def cap_tail(text: Any, limit: int = MAX_TEXT) -> str:
    """The end of ``text`` (command output: errors come last), at most ``limit`` characters
    from a line start, after a marker line saying how much was cut."""
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    if len(s) <= limit:
        return s
    kept = s[-limit:]
    newline = kept.find("\n")
    if 0 <= newline < len(kept) - 1:
        kept = kept[newline + 1 :]  # start on a whole line
    return f"[... {len(s) - len(kept)} characters cut]\n" + kept
