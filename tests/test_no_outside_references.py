"""Users see only the repository: its code, docs and tests cite docs/ or public specs.

Two checks, each naming the file and line of a hit:

* No tracked file under the package, its test fakes, the tests, the docs, the CI scripts or
  the README names design notes kept outside the repository (a sibling ``shared`` folder).
* No comment, docstring or prose cites an entry of the project's own issue tracker, which
  the repository does not contain: "issue" and a number in parentheses, after a
  semicolon, before a colon or comma, with a numbered part, or after "see"; GitHub-style
  ``(#N)``. Comments explain the code as it is; why it changed belongs in the commit
  message. An issue of a tracker the code works with is not a citation: test data in
  strings is never read (only comments and docstrings of Python files, Markdown prose
  outside code blocks and shell comments are), and running text that names a test issue
  ("issue N is reassigned", "issue N's run") takes none of those positions. A reference
  to another project's tracker names that project ("Textual issue #N") and stays.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCOPES = ("symphony_tui", "testing", "tests", "docs", ".ci", "README.md")
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


def tracked_files(scopes: tuple[str, ...] = SCOPES) -> list[Path]:
    """Tracked files in ``scopes`` that exist in the work tree, from ``git ls-files``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--", *scopes],
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
    """The file list really holds the package, the fakes, the tests and the docs (and this file)."""
    files = {p.relative_to(ROOT).as_posix() for p in tracked_files()}
    assert "README.md" in files
    assert "tests/test_no_outside_references.py" in files
    assert any(f.startswith("symphony_tui/") for f in files)
    assert any(f.startswith("testing/src/symphony_tui_testing/") for f in files)
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


# -- citations of the project's issue tracker --------------------------------------------

#: Where citations are looked for: the package, its fakes, the tests and the CI scripts ...
CODE_SCOPES = ("symphony_tui", "testing", "tests", ".ci")
#: ... and the docs, the README and the changelog.
DOC_SCOPES = ("docs", "README.md", "CHANGELOG.md")

# A tracker number; never followed by more digits or a possessive ("issue N's run").
_NUMBER = r"\#?\d+(?![\d'\u2019])"
#: "issue" and a number where only a citation puts it (case-insensitive).
CITATION = re.compile(
    "|".join(
        (
            # opening parentheses: "issue" then a number, a colon or a quoted title
            rf"\(\s*issues?\s*(?:{_NUMBER}|[:\"\u201c])",
            # after a semicolon: "...; issue N"
            rf";\s*issues?\s+{_NUMBER}",
            # a numbered part: "issue N.M", "issue N.Mb"
            r"\bissues?\s+\#?\d+\.\d+",
            # before a colon, semicolon, comma, parentheses or a quoted title: "Issue N, the
            # ...", "issue N (a title)"
            r"\bissues?\s+\#?\d+[a-z]?(?=[:;,)\"\u201c]|\s+[(\"\u201c])",
            # a docstring that opens with one: "Issue N end to end"
            rf"(?:\"\"\"|''')\s*issues?\s+{_NUMBER}",
            # "see issue N", "per issue N", "fixes issue N"
            rf"\b(?:see|per|fixes|fixed in|closes|refs?)\s+issues?\s+{_NUMBER}",
            # GitHub-style: "(#N)", "fixes #N", "PR #N", "gh-N"
            r"\(\#\d+\)",
            r"\b(?:PR|pull request|fixes|closes|refs?)\s+\#\d+",
            r"\bgh-\d+\b",
        )
    ),
    re.IGNORECASE,
)
#: Another project's tracker, named right before the number: "Textual issue #N",
#: "owner/repo issue #N" (not one of the words that open a citation of this project's).
UPSTREAM = re.compile(
    r"\b(?!(?i:see|per|fixes|closes|refs?|issues?)\b)(?:[A-Z][\w.+-]*|[\w.-]+/[\w.-]+)"
    r"\s+issues?\s+\#\d+\s*$"
)


def prose_lines(path: str, text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of what a reader takes as prose in ``text`` (1-based): the
    comments and docstrings (every string that is a statement of its own) of a Python
    file, Markdown outside fenced code blocks, the comment lines of a shell script. Other
    files yield nothing; a Python file that does not parse yields its comment lines."""
    lines = text.splitlines()
    if path.endswith(".py"):
        found: list[tuple[int, str]] = []
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT:
                    found.append((tok.start[0], tok.string))
            tree = ast.parse(text)
        except (SyntaxError, tokenize.TokenError):
            return [(n, s) for n, s in enumerate(lines, 1) if s.lstrip().startswith("#")]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                end = node.end_lineno or node.lineno
                found.extend((n, lines[n - 1]) for n in range(node.lineno, end + 1))
        return sorted(found)
    if path.endswith(".md"):
        prose, fenced = [], False
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            elif not fenced:
                prose.append((n, line))
        return prose
    if lines and lines[0].startswith("#!") and "sh" in lines[0]:
        return [(n, s) for n, s in enumerate(lines[1:], 2) if s.lstrip().startswith("#")]
    return []


def issue_citations(path: str, text: str) -> list[tuple[int, str]]:
    """``(line number, cited text)`` for each citation of this project's tracker in the
    prose of ``text`` (:func:`prose_lines`; ``path``'s suffix says what kind of file)."""
    hits = []
    for n, line in prose_lines(path, text):
        for m in CITATION.finditer(line):
            if not UPSTREAM.search(line[: m.end()]):
                hits.append((n, m.group(0)))
    return hits


def _cite(n: str) -> str:
    """``issue <n>``, built here so this file holds no citation itself."""
    return "issue " + n


def test_citations_are_found_in_comments_and_docstrings():
    """Each form a citation takes is caught in a comment, a docstring, an attribute's doc
    comment, Markdown prose and a shell comment, with its line."""
    source = (
        f'"""Module doc ({_cite("11")}: launch to first frame)."""\n'
        f"x = 1  # freed by reference counting ({_cite('11')})\n"
        f"#: With worker hosts ({_cite('14')}): a column\n"
        "def f():\n"
        f'    """{_cite("14").capitalize()}, the hosts screen."""\n'
        f"    # tens of MB per table, {_cite('12.1')}\n"
        f"    # the helper: see {_cite('4')} for why\n"
        f"    # one reconnect helper (backoff; {_cite('12')} benchmark b)\n"
        "    # merged in (#12); fixes #13\n"
        f'    """(issue "Restart forgets usage"), (issue: CLI), (issues 11 and 12)"""\n'
    )
    hits = issue_citations("x.py", source)
    assert [n for n, _ in hits] == [1, 2, 3, 5, 6, 7, 8, 9, 9, 10, 10, 10], hits
    assert hits[:2] == [(1, "(" + _cite("11")), (2, "(" + _cite("11"))]
    assert hits[5] == (7, "see " + _cite("4"))
    markdown = f"# Title\n\nThe console ({_cite('11')}) paints first.\n"
    assert issue_citations("docs/a.md", markdown) == [(3, "(" + _cite("11"))]
    shell = f"#!/usr/bin/env bash\n# the cache dir ({_cite('7')})\necho hi\n"
    assert issue_citations(".ci/run", shell) == [(2, "(" + _cite("7"))]
    # a project's own name before the number is no upstream reference
    assert issue_citations("x.py", f"# (Symphony {_cite('11')})\n") == [(1, _cite("11"))]
    assert issue_citations("x.py", f"# {_cite('12')} (stalls at turnover): ...\n") == [
        (1, _cite("12"))
    ]
    opening = f"\"\"\"{_cite('14').capitalize()} end to end.\"\"\"\n'''{_cite('4')} additions'''\n"
    assert [n for n, _ in issue_citations("x.py", opening)] == [1, 2]
    assert issue_citations("x.py", f'# {_cite("14")} "bad input": ...\n') == [(1, _cite("14"))]
    assert issue_citations("x.py", f"# See {_cite('#4')}\n") == [(1, "See " + _cite("#4"))]


def test_issues_of_a_tracker_the_code_works_with_are_not_citations():
    """Test data and the domain's own issues stay: in strings, in running text of comments,
    in Markdown code blocks, words like "issue id" or "issue numbers", and a reference to
    another project's tracker."""
    source = (
        '"""The fake tracker: (issue id, cells), (issue numbers), (issue ``OHE-1``)."""\n'
        f'assert "{_cite("2")} lacks title" in caplog.text\n'
        f'EXPECTED = ("({_cite("3")} of 5)", "attempt #3;", "{_cite("#1")}: must be a map")\n'
        f"# Still active: {_cite('1')} is reassigned (not dispatchable), {_cite('2')}\n"
        f"# loses its label. {_cite('2').capitalize()}'s 1200 are its own, not growth over\n"
        f"# {_cite('1')}'s 1000; {_cite('0').capitalize()}'s run ended 3 times.\n"
        "render(template, issue, 3)  # attempt #3\n"
        f"# every key ever shown stays alive (Textual {_cite('#6666')}): so\n"
        f"# as textualize/textual {_cite('#6666')} says\n"
    )
    assert issue_citations("test_x.py", source) == []
    markdown = f"Run it:\n\n```\necho '({_cite('3')}) (#2)'\n```\n\nThe {_cite('2')} card.\n"
    assert issue_citations("docs/a.md", markdown) == []
    assert issue_citations("data.json", f'{{"t": "({_cite("11")})"}}') == []


def _citations_under(scopes: tuple[str, ...]) -> list[str]:
    """``path:line: cited text`` for every citation in the tracked files of ``scopes``
    (Markdown only for notes: docs, READMEs, the changelog; not fixtures or data)."""
    hits = []
    for path in tracked_files(scopes):
        rel = path.relative_to(ROOT).as_posix()
        if rel.endswith(".md") and not (
            rel.startswith("docs/") or rel.endswith("README.md") or rel == "CHANGELOG.md"
        ):
            continue  # Markdown fixtures and data (workflow files, a copy of the spec)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits.extend(f"{rel}:{n}: {cited}" for n, cited in issue_citations(rel, text))
    return hits


def test_no_comment_or_docstring_cites_the_issue_tracker():
    hits = _citations_under(CODE_SCOPES)
    assert not hits, "explain the code as it is; history goes in commit messages:\n" + "\n".join(
        hits
    )


def test_no_doc_cites_the_issue_tracker():
    hits = _citations_under(DOC_SCOPES)
    assert not hits, "say what is, not which tracker entry asked for it:\n" + "\n".join(hits)
