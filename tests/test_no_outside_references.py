"""Users see only the repository: its code, docs and tests cite docs/ or public specs.

Comments and docs once pointed at design notes kept outside the repository (a sibling
``shared`` folder). Every tracked file under the package, the tests, the docs, the CI
scripts and the README is searched for those names; a hit names the file and line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCOPES = ("symphony_tui", "tests", "docs", ".ci", "README.md")
# Built from parts so this file does not match itself.
NEEDLES = tuple(
    a + b
    for a, b in (
        ("../", "shared"),
        ("PROTOCOLS", ".md"),
        ("DESIGN", ".md"),
        ("SPEC-", "NOTES"),
        ("STYLE", ".md"),
        ("COMMON", ".md"),
    )
)


def tracked_files() -> list[Path]:
    """Tracked files in :data:`SCOPES` that exist in the work tree, from ``git ls-files``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--", *SCOPES],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout: {e}")
    paths = [ROOT / p for p in out.decode().split("\0") if p]
    return [p for p in paths if p.is_file()]


def outside_references(text: str) -> list[tuple[int, str]]:
    """``(line number, needle)`` for every needle on every line of ``text`` (1-based)."""
    return [
        (n, needle)
        for n, line in enumerate(text.splitlines(), 1)
        for needle in NEEDLES
        if needle in line
    ]


def test_needles_are_found():
    """The scan itself works: each needle is caught, in any position on a line."""
    for needle in NEEDLES:
        assert outside_references(f"see {needle} there\nclean\n") == [(1, needle)]
    assert outside_references("docs/protocols.md and spec §9\n") == []


def test_scopes_are_scanned():
    """The file list really holds the package, the tests and the docs (and this file)."""
    files = {p.relative_to(ROOT).as_posix() for p in tracked_files()}
    assert "README.md" in files
    assert "tests/test_no_outside_references.py" in files
    assert any(f.startswith("symphony_tui/") for f in files)
    assert any(f.startswith("docs/") for f in files)


def test_no_file_cites_anything_outside_the_repository():
    hits = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (e.g. images); they carry no citations
        for n, needle in outside_references(text):
            hits.append(f"{path.relative_to(ROOT)}:{n}: {needle}")
    assert not hits, "cite docs/ or a public spec instead:\n" + "\n".join(hits)
