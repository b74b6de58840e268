"""Where the compatibility-corpus test leaves its figures for pytest's summary."""

from __future__ import annotations

import pytest

#: The report lines of tests/config/test_workflow_corpus.py, in ``config.stash``.
CORPUS_REPORT = pytest.StashKey[list[str]]()
