"""Every ``# type: ignore`` names its error codes and says why beside it.

mypy (``[tool.mypy]`` in pyproject.toml, run by .ci/run) refuses an ignore without a code
in the files it checks and reports one it no longer needs; this check holds the rest of
the package and the test fakes to the same form, read from comments only:
``# type: ignore[code, ...]  # reason``.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPES = ("symphony_tui", "testing")  # the package and its test fakes
IGNORE = re.compile(r"type:\s*ignore")
WELL_FORMED = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def _python_files() -> list[Path]:
    return sorted(
        path for scope in SCOPES if (ROOT / scope).is_dir() for path in (ROOT / scope).rglob("*.py")
    )


def bad_ignores(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each ``type: ignore`` comment without codes or a reason."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        comment = tok.string
        if (
            tok.type == tokenize.COMMENT
            and IGNORE.search(comment)
            and not WELL_FORMED.match(comment)
        ):
            found.append((tok.start[0], comment))
    return found


def test_the_form_is_told_apart():
    good = "x = f()  # type: ignore[attr-defined]  # set by the mixin's host\n"
    two = "x = f()  # type: ignore[method-assign,assignment]  # wrapped\n"
    assert bad_ignores(good) == [] and bad_ignores(two) == []
    assert bad_ignores("x = f()  # type: ignore\n") == [(1, "# type: ignore")]
    assert bad_ignores("x = f()  # type: ignore[misc]\n") == [(1, "# type: ignore[misc]")]
    assert bad_ignores('x = "# type: ignore"\n') == []  # a string, not a comment


def test_each_ignore_in_the_package_and_its_fakes_has_codes_and_a_reason():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {comment}"
        for path in _python_files()
        if "type:" in (text := path.read_text(encoding="utf-8"))
        for line, comment in bad_ignores(text)
    ]
    assert offenders == [], "say the codes and why:\n" + "\n".join(offenders)
