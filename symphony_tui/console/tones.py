"""Rich styles derived from the active Textual theme.

Table cells and log lines are ``rich.text.Text`` (so agent text stays inert), which cannot
name ``$success`` directly; we resolve the theme variables once per theme instead of
hard-coding colours (theme variables, never hex literals). Textual strips colour for ``NO_COLOR``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style

_PLAIN = Style()
_DIM = Style(dim=True)
_BOLD = Style(bold=True)


@dataclass(frozen=True)
class Tones:
    """Styles by role; rich ``Style`` is immutable, so sharing defaults is safe."""

    success: Style = _PLAIN
    warning: Style = _PLAIN
    error: Style = _PLAIN
    primary: Style = _PLAIN
    accent: Style = _PLAIN
    muted: Style = _DIM
    bold: Style = _BOLD

    @classmethod
    def from_variables(cls, variables: dict[str, str]) -> Tones:
        """Build from ``App.get_css_variables()``; unknown or unparsable colours fall back
        to no colour (the glyph and word still say the state)."""

        def colour(name: str) -> Style:
            value = variables.get(name, "")
            try:
                return Style(color=value.split()[0]) if value else Style()
            except Exception:
                return Style()

        return cls(
            success=colour("success"),
            warning=colour("warning"),
            error=colour("error"),
            primary=colour("primary"),
            accent=colour("accent"),
        )
