"""docs/keys.md lists every key binding of the console's command registry.

The tables there are written by ``scripts/keys_doc.py`` from ``console/registry.py``; a
command added, removed or rebound without running it makes these tests fail.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from symphony_tui.console.registry import COMMANDS, display_key

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "keys.md"


def _keys_doc():
    spec = importlib.util.spec_from_file_location("keys_doc", ROOT / "scripts" / "keys_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(text: str) -> set[tuple[str, str]]:
    """``(key, id)`` of every table row ``| `key` | `id` | ...`` in ``text``."""
    return set(re.findall(r"^\| `([^`]+)` \| `([a-z_]+)` \|", text, re.MULTILINE))


def test_every_registered_binding_is_listed_with_its_key():
    rows = _rows(DOC.read_text(encoding="utf-8"))
    missing = [
        f"{c.id} ({c.key_display or display_key(c.key)})"
        for c in COMMANDS
        if (c.key_display or display_key(c.key), c.id) not in rows
    ]
    assert not missing, "docs/keys.md lacks: " + ", ".join(missing)
    listed = {command_id for _, command_id in rows}
    stale = listed - {c.id for c in COMMANDS}
    assert not stale, "docs/keys.md lists ids the registry does not have: " + ", ".join(stale)


def test_generated_tables_match_the_registry():
    keys_doc = _keys_doc()
    current = DOC.read_text(encoding="utf-8")
    assert keys_doc.splice(current, keys_doc.render()) == current, (
        "docs/keys.md differs from the registry: run python scripts/keys_doc.py"
    )
    assert keys_doc.main(["--check"]) == 0


def test_the_check_notices_a_drifted_table(tmp_path, monkeypatch):
    keys_doc = _keys_doc()
    drifted = DOC.read_text(encoding="utf-8").replace(
        "| `i` | `interrupt` |", "| `x` | `interrupt` |"
    )
    copy = tmp_path / "keys.md"
    copy.write_text(drifted, encoding="utf-8")
    monkeypatch.setattr(keys_doc, "DOC", copy)
    assert keys_doc.main(["--check"]) == 1
    assert keys_doc.main([]) == 0
    assert copy.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")
