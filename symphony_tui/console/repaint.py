"""Set what a widget shows only when it changes: nothing written when nothing changed, and
only the changed cells when something did.

Textual repaints a widget's whole region on every ``Static.update`` and on every
assignment of ``border_title`` / ``border_subtitle``, equal value or not, and the terminal
then receives every line of that region again. The console's refresh runs several times a
second, so a pane set to what it already shows would be re-sent on every tick.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

_SHOWN = "_symphony_shown"


def same_text(a: object, b: object) -> bool:
    """Equal rich ``Text`` (plain, base style, spans, justification) or equal values.
    ``Text.__eq__`` ignores the base style, so a tone change would not count."""
    if a is b:
        return True
    if isinstance(a, Text) and isinstance(b, Text):
        return (
            a.plain == b.plain
            and a.style == b.style
            and a.spans == b.spans
            and a.justify == b.justify
            and a.overflow == b.overflow
            and a.no_wrap == b.no_wrap
            and a.end == b.end
        )
    if isinstance(a, Text) or isinstance(b, Text):
        return False
    return a == b


def _shown(widget: Widget) -> dict[str, object]:
    shown = getattr(widget, _SHOWN, None)
    if shown is None:
        shown = {}
        setattr(widget, _SHOWN, shown)
    return shown


def update_static(widget: Static, content: Text | str) -> bool:
    """``widget.update(content)`` unless it already shows ``content``. Returns True when it
    was updated."""
    shown = _shown(widget)
    if "content" in shown and same_text(shown["content"], content):
        return False
    widget.update(content)
    shown["content"] = content
    return True


_KEEP = object()


def set_border(widget: Widget, *, title: object = _KEEP, subtitle: object = _KEEP) -> bool:
    """Set ``border_title`` / ``border_subtitle`` (a ``Text``, ``str`` or ``None``; one not
    given is left as it is) unless already shown. Returns True when either changed."""
    shown = _shown(widget)
    changed = False
    for name, value in (("border_title", title), ("border_subtitle", subtitle)):
        if value is _KEEP:
            continue
        if name in shown and same_text(shown[name], value):
            continue
        setattr(widget, name, value)
        shown[name] = value
        changed = True
    return changed
