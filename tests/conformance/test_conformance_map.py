"""docs/conformance.md stays true: every test it names exists, and no spec section loses a
row. The tests are found by reading the test files' syntax trees (fast, no collection run)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "conformance.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")

#: Bullets of each matrix section in SPEC.md (§17.1 counts its two path-precedence cases).
SPEC_ROWS = {"17.1": 16, "17.2": 12, "17.3": 9, "17.4": 15, "17.6": 6, "17.7": 6}
BEYOND = "Beyond the letter of the spec"


def sections() -> dict[str, list[str]]:
    """Section title -> its table rows (header and separator rows left out)."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = []
        elif current is not None and line.startswith("| ") and not line.startswith("| ---"):
            if line.startswith("| Bullet |"):
                continue
            found[current].append(line)
    return found


@cache
def defined_tests(path: str) -> frozenset[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            names.add(node.name)
    return frozenset(names)


def missing_tests(doc: str) -> list[str]:
    """Every ``path::name`` in ``doc`` that is not a test function of a pytest file."""
    missing = []
    for path, name in TEST_REF.findall(doc):
        file = REPO / path
        if (
            not Path(path).name.startswith("test_")
            or not file.is_file()
            or name not in defined_tests(path)
        ):
            missing.append(f"{path}::{name}")
    return missing


def test_every_named_test_exists():
    doc = DOC.read_text(encoding="utf-8")
    assert len(TEST_REF.findall(doc)) > 100
    missing = missing_tests(doc)
    assert not missing, "docs/conformance.md names tests that do not exist: " + ", ".join(missing)


def test_every_spec_section_has_all_its_rows_and_each_row_names_a_test():
    found = sections()
    for number, rows in SPEC_ROWS.items():
        title = next((t for t in found if t.startswith(number + " ")), None)
        assert title is not None, f"section {number} is missing"
        assert len(found[title]) == rows, f"section {number}: {len(found[title])} rows, not {rows}"
    assert len(found[BEYOND]) >= 20
    for title, lines in found.items():
        for line in lines:
            assert TEST_REF.search(line), f"a row of {title!r} names no test: {line[:80]}"


def test_the_checker_reports_renamed_tests_and_missing_files():
    doc = (
        "| a | `tests/conformance/test_conformance_map.py::test_every_named_test_exists` |\n"
        "| b | `tests/conformance/test_conformance_map.py::test_renamed_away` |\n"
        "| c | `tests/conformance/test_gone.py::test_x` |\n"
        "| d | `tests/conformance/conftest.py::write_project` |\n"
    )
    assert missing_tests(doc) == [
        "tests/conformance/test_conformance_map.py::test_renamed_away",
        "tests/conformance/test_gone.py::test_x",
        "tests/conformance/conftest.py::write_project",
    ]
