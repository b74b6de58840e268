"""The revision of the Symphony specification this implementation follows.

``SPEC.md`` of the public repository openai/symphony, at :data:`SPEC_COMMIT`. The test
matrix of its §17 is mapped bullet by bullet in docs/conformance.md (keyed by this commit);
``symphony-tui doctor`` names it.
"""

from __future__ import annotations

SPEC_REPOSITORY = "openai/symphony"
SPEC_COMMIT = "1f3219b"
SPEC_DATE = "2026-07-20"


def spec_revision() -> str:
    """One line naming the specification revision, for ``doctor`` and ``--version`` readers."""
    return f"Symphony specification ({SPEC_REPOSITORY} SPEC.md) at {SPEC_COMMIT}, {SPEC_DATE}"
