"""Demo directives: ``[demo: ...]`` tags in a prompt that steer the simulated agent.

The demo issues carry them in their descriptions, so they reach the agent through the
rendered WORKFLOW.md prompt. Several may share one tag (``[demo: approval, slow]``) or use
several tags. Matching is case-insensitive; unknown words are reported, not fatal.

Known directives:

* ``approval``: run one command that needs the operator's approval first.
* ``fail-once``: the first attempt in a workspace fails (marker ``.symphony-demo/failed-once``).
* ``slow``: everything takes 24 times longer (time to try the interrupt key).
* ``two-turns``: the work finishes on the thread's second turn (a continuation turn).
* ``escape-sample``: the agent's text and command output contain ANSI escapes and Rich
  markup, to show that the console renders agent text as plain, sanitized text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KNOWN = frozenset({"approval", "fail-once", "slow", "two-turns", "escape-sample"})

_TAG = re.compile(r"\[demo:\s*([^\]]*)\]", re.IGNORECASE)


@dataclass(frozen=True)
class Directives:
    """The directive words found in a text: ``known`` ones and ``unknown`` leftovers."""

    known: frozenset[str] = frozenset()
    unknown: tuple[str, ...] = ()

    def __contains__(self, word: object) -> bool:
        return word in self.known

    def merged(self, other: Directives) -> Directives:
        """Union of two sets (a thread remembers the first turn's directives, because
        continuation prompts do not repeat the issue description)."""
        unknown = self.unknown + tuple(u for u in other.unknown if u not in self.unknown)
        return Directives(self.known | other.known, unknown)


def parse_directives(text: str) -> Directives:
    """Every directive word of every ``[demo: ...]`` tag in ``text``."""
    known: set[str] = set()
    unknown: list[str] = []
    for match in _TAG.finditer(text):
        for word in re.split(r"[\s,;]+", match.group(1).strip().lower()):
            if not word:
                continue
            if word in KNOWN:
                known.add(word)
            elif word not in unknown:
                unknown.append(word)
    return Directives(frozenset(known), tuple(unknown))
