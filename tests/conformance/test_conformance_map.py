"""docs/conformance.md stays true: every bullet of §17.1-§17.7 of the specification revision
this implementation follows has a row keyed by the bullet's text (§17.5 with a cell for each
agent backend), and every test a row names exists. The bullets come from the specification's
own text at that commit (tests/conformance/data/spec-17-<commit>.md), not from a list kept by
hand. The tests are found by reading the test files' syntax trees (fast, no collection run).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from symphony_tui.spec import SPEC_COMMIT

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "conformance.md"
SPEC_TEXT = Path(__file__).with_name("data") / f"spec-17-{SPEC_COMMIT}.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
#: A cell for a bullet that cannot apply to that backend, with the reason (at least a few
#: words): ``n/a: <why>``.
NOT_APPLICABLE = re.compile(r"^n/a: \S.{15,}$")
BACKENDS = ("codex", "OpenHands", "OpenCode", "ACP")
SECTIONS = ("17.1", "17.2", "17.3", "17.4", "17.5", "17.6", "17.7")
BEYOND = "Beyond the letter of the spec"


def spec_bullets(text: str) -> dict[str, list[str]]:
    """Section number -> its bullets, as the spec writes them (markdown kept). A bullet's
    wrapped lines join with one space; a bullet that introduces sub-bullets (ending in
    ``:``) is not a row itself: each sub-bullet is, prefixed with it."""
    found: dict[str, list[str]] = {}
    section: str | None = None
    parent: str | None = None
    current: list[str] | None = None
    for line in text.splitlines():
        heading = re.match(r"### (17\.\d) ", line)
        if heading:
            section, parent, current = heading.group(1), None, None
            found[section] = []
            continue
        if section is None:
            continue
        if line.startswith("- "):
            current, parent = [line[2:].strip()], None
            found[section].append(current)
        elif line.startswith("  - ") and found[section]:
            if parent is None:
                parent = found[section].pop()[0]
            current = [f"{parent} {line[4:].strip()}"]
            found[section].append(current)
        elif line.startswith("  ") and line.strip() and current is not None:
            current[0] += " " + line.strip()
        elif line.strip():
            current = None  # prose between lists
    return {number: [b[0] for b in bullets] for number, bullets in found.items()}


def doc_rows(doc: str) -> dict[str, list[list[str]]]:
    """Section title -> its table rows as cells (header and separator rows left out)."""
    found: dict[str, list[list[str]]] = {}
    current: str | None = None
    for line in doc.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = []
        elif current is not None and line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if cells[0].startswith("Bullet"):
                continue
            found[current].append(cells)
    return found


def section_rows(doc: str, number: str) -> list[list[str]] | None:
    rows = doc_rows(doc)
    title = next((t for t in rows if t.startswith(number + " ")), None)
    return None if title is None else rows[title]


def map_problems(doc: str, bullets: dict[str, list[str]]) -> list[str]:
    """Every way ``doc`` fails to map ``bullets``: a section or a bullet without a row, a row
    that is no bullet of this revision, a cell that names no test (and is not ``n/a: why``),
    a §17.5 row without a cell per backend."""
    problems: list[str] = []
    for number in SECTIONS:
        rows = section_rows(doc, number)
        if rows is None:
            problems.append(f"section {number} is missing")
            continue
        keys = [r[0] for r in rows]
        for bullet in bullets.get(number, []):
            if bullet not in keys:
                problems.append(f"{number}: no row for {bullet!r}")
        for key in keys:
            if key not in bullets.get(number, []):
                problems.append(f"{number}: row {key!r} is no bullet of SPEC.md at {SPEC_COMMIT}")
        width = 1 + (len(BACKENDS) if number == "17.5" else 1)
        for row in rows:
            if len(row) != width:
                problems.append(f"{number}: row {row[0]!r} has {len(row) - 1} test cells")
                continue
            for cell in row[1:]:
                if not TEST_REF.search(cell) and not NOT_APPLICABLE.match(cell):
                    problems.append(f"{number}: row {row[0]!r} has a cell naming no test")
            if not any(TEST_REF.search(cell) for cell in row[1:]):
                problems.append(f"{number}: row {row[0]!r} names no test at all")
    return problems


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


def test_the_spec_excerpt_is_the_revision_this_implementation_follows():
    text = SPEC_TEXT.read_text(encoding="utf-8")
    assert f"openai/symphony at commit {SPEC_COMMIT}" in text
    bullets = spec_bullets(text)
    assert list(bullets) == list(SECTIONS)
    counts = {n: len(b) for n, b in bullets.items()}
    assert counts == {
        "17.1": 16, "17.2": 12, "17.3": 12, "17.4": 15, "17.5": 21, "17.6": 6, "17.7": 6,
    }  # fmt: skip
    doc = DOC.read_text(encoding="utf-8")
    for number in SECTIONS:
        title = next(t for t in doc_rows(doc) if t.startswith(number + " "))
        assert f"SPEC.md at {SPEC_COMMIT}" in title, title


def test_every_bullet_of_the_spec_revision_has_a_row_naming_its_tests():
    bullets = spec_bullets(SPEC_TEXT.read_text(encoding="utf-8"))
    problems = map_problems(DOC.read_text(encoding="utf-8"), bullets)
    assert not problems, "docs/conformance.md:\n" + "\n".join(problems)
    assert len(doc_rows(DOC.read_text(encoding="utf-8"))[BEYOND]) >= 20


def test_the_map_checker_finds_a_missing_bullet_a_stale_row_and_a_cell_without_tests():
    bullets = {n: [] for n in SECTIONS}
    bullets["17.1"] = ["Alpha works", "Beta works"]
    bullets["17.5"] = ["Gamma works"]
    ref = "`tests/conformance/test_conformance_map.py::test_every_named_test_exists`"
    doc = "\n".join(
        [
            f"## {n} Section (SPEC.md at {SPEC_COMMIT})\n\n| Bullet | Tests |\n| --- | --- |"
            for n in SECTIONS
        ]
    )
    doc = doc.replace(
        "## 17.1 Section (SPEC.md at 1f3219b)\n\n| Bullet | Tests |\n| --- | --- |",
        f"## 17.1 Section\n\n| Bullet | Tests |\n| --- | --- |\n| Alpha works | {ref} |\n"
        f"| Old bullet | {ref} |",
    ).replace(
        "## 17.5 Section (SPEC.md at 1f3219b)\n\n| Bullet | Tests |\n| --- | --- |",
        f"## 17.5 Section\n\n| Bullet | codex | OpenHands | OpenCode | ACP |\n"
        f"| --- | --- | --- | --- | --- |\n"
        f"| Gamma works | {ref} | n/a: not a thing this backend has | nothing here | {ref} |",
    )
    assert map_problems(doc, bullets) == [
        "17.1: no row for 'Beta works'",
        f"17.1: row 'Old bullet' is no bullet of SPEC.md at {SPEC_COMMIT}",
        "17.5: row 'Gamma works' has a cell naming no test",
    ]


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
