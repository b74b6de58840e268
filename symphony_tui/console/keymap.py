"""User key remapping: a TOML or JSON file of ``{binding_id = "key"}``.

Default location: ``platformdirs.user_config_dir("symphony-tui")/keymap.toml``. Ids are the
``ConsoleCommand.id`` values of :mod:`symphony_tui.console.registry`; values are Textual
key names, several comma separated (``interrupt = "ctrl+x,x"``). The result is handed to
``App.set_keymap`` (after posting's keymap config).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from symphony_tui.console.registry import BY_ID, ConsoleCommand, display_key


def default_keymap_path() -> Path:
    return Path(platformdirs.user_config_dir("symphony-tui")) / "keymap.toml"


@dataclass(frozen=True)
class LoadedKeymap:
    """``keymap`` maps binding id -> key string; ``errors`` are one-line problems found
    (unreadable file, bad syntax, unknown ids, non-string keys), for a notification."""

    keymap: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()


def load_keymap(path: Path | None) -> LoadedKeymap:
    """Read ``path`` (``.json`` as JSON, anything else as TOML). A missing file is an empty
    keymap without error; everything else wrong is reported, never raised."""
    if path is None or not path.exists():
        return LoadedKeymap()
    try:
        raw_text = path.read_text(encoding="utf-8")
        data = json.loads(raw_text) if path.suffix == ".json" else tomllib.loads(raw_text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return LoadedKeymap(errors=(f"keymap {path}: {first}",))
    if not isinstance(data, dict):
        return LoadedKeymap(errors=(f"keymap {path}: expected a table of id = key",))
    # A [keymap] table is accepted too, so the file can grow other sections later.
    if isinstance(data.get("keymap"), dict):
        data = data["keymap"]
    keymap: dict[str, str] = {}
    errors: list[str] = []
    for binding_id, key in data.items():
        if binding_id not in BY_ID:
            errors.append(f"keymap {path}: unknown command id {binding_id!r}")
        elif not isinstance(key, str) or not key.strip():
            errors.append(f"keymap {path}: {binding_id} must be a non-empty key string")
        else:
            keymap[binding_id] = ",".join(k.strip() for k in key.split(",") if k.strip())
    return LoadedKeymap(keymap=keymap, errors=tuple(errors))


class Keys:
    """The keys of each command now: the registry's, or the user's keymap's (``keymap``:
    binding id -> Textual key names, comma separated, as :func:`load_keymap` reads it)."""

    def __init__(self) -> None:
        self.keymap: dict[str, str] = {}

    def of(self, cmd: ConsoleCommand) -> list[str]:
        """The Textual key names that run ``cmd``."""
        return self.keymap.get(cmd.id, cmd.key).split(",")

    def display(self, cmd: ConsoleCommand) -> str:
        """The key(s) that run ``cmd``, for display (``?``, ``ctrl+x, x``)."""
        return display_key(self.keymap.get(cmd.id, cmd.key))
