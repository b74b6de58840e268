"""Every relative link in the README, the changelog and docs/ leads somewhere.

A Markdown link or image (``[text](target)``, ``![alt](target)``) outside code blocks whose
target is not a URL must name a file or folder of the repository, relative to the document;
a ``#fragment`` on a Markdown target (or alone, for the same document) must name one of its
headings, as GitHub turns headings into anchors.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if match:
            found.add(anchor(match.group(1)))
    # headings with inline code lose it in prose(); read them raw too
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if match:
            found.add(anchor(match.group(1)))
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """One line per link of ``path`` that leads nowhere (or out of ``root``)."""
    problems = []
    for target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{path.relative_to(root)}: {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{path.relative_to(root)}: {target}: no such heading")
        elif root not in dest.parents and dest != root:
            problems.append(f"{path.relative_to(root)}: {target}: outside the repository")
    return problems


def test_the_checker_finds_broken_links(tmp_path):
    (tmp_path / "b.md").write_text("# Some Title: here\n", encoding="utf-8")
    doc = tmp_path / "a.md"
    doc.write_text(
        "[ok](b.md#some-title-here) [gone](c.md) [bad](b.md#nope)\n"
        "```\n[in code](missing.md)\n```\n`[span](missing.md)` [web](https://example.com)\n",
        encoding="utf-8",
    )
    problems = broken_links(doc, root=tmp_path)
    assert problems == ["a.md: c.md: no such file", "a.md: b.md#nope: no such heading"]


def test_every_relative_link_resolves():
    linked = [t for doc in documents() for t in LINK.findall(prose(doc.read_text("utf-8")))]
    assert any(t.startswith("docs/") for t in linked)  # the README's links are read
    problems = [p for doc in documents() for p in broken_links(doc)]
    assert not problems, "\n".join(problems)
