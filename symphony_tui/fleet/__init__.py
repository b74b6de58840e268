"""``symphony-tui fleet``: one console over many schedulers (docs/fleet.md).

A front end beside :mod:`symphony_tui.api` (it uses its client): never the console's
widgets, never Textual."""
