"""symphony_tui: the Symphony scheduler for coding agents, with a Textual operator console."""

__version__ = "0.1.0"
