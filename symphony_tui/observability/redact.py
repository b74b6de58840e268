"""Mask secrets in text before it reaches a log sink (spec §13: never print secrets).

Two layers: values registered at run time (a resolved ``tracker.api_key``, a session key
read from the environment) are masked wherever they appear, and common token shapes are
masked even when nobody registered them (``lin_api_...``, ``sk-...``, ``Bearer ...``,
``api_key=...``). The mask is ``***``; the shape's prefix is kept so a reader can still
tell which kind of credential was there.
"""

from __future__ import annotations

import re
import threading

MASK = "***"
# Shorter values are too likely to be ordinary words; masking them would garble logs.
MIN_SECRET_LENGTH = 4

_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(lin_(?:api|oauth)_)[A-Za-z0-9]{8,}"), r"\1" + MASK),
    (re.compile(r"\b(sk-(?:[A-Za-z0-9]+-)?)[A-Za-z0-9_\-]{12,}"), r"\1" + MASK),
    (re.compile(r"\b(gh[pousr]_|github_pat_)[A-Za-z0-9_]{16,}"), r"\1" + MASK),
    (
        # A credential after an auth scheme: long enough not to be a word ("token count: 11").
        re.compile(r"\b([Bb]earer|BEARER|Basic|Token)(\s+)[A-Za-z0-9._~+/=\-]{12,}"),
        r"\1\2" + MASK,
    ),
    (
        re.compile(
            r"""(?ix)
            \b((?:[a-z0-9]+[_-])*(?:api[_-]?key|token|secret|password|passwd|authorization))
            (["']?\s*[:=]\s*["']?)
            (?!\*\*\*|\$[A-Za-z_])([^\s"'&,;}]+)
            """
        ),
        r"\1\2" + MASK,
    ),
)


# Every shape above starts with one of these; text without any (most agent output) skips the
# shape substitutions: one search instead of five.
# (Substring tests on the lowercased text: far cheaper than a case-insensitive regex.)
_TRIGGERS = (
    "lin_", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "bearer", "basic",
    "token", "apikey", "api_key", "api-key", "secret", "passw", "authorization",
)  # fmt: skip
# One search of the lowercased text for any trigger: 4-6x faster than a substring test per
# trigger (and than a case-insensitive pattern), and agent text is redacted on every event.
_TRIGGER = re.compile("|".join(re.escape(t) for t in _TRIGGERS))


class Redactor:
    """Masks registered secrets and known token shapes. Thread-safe; registration is rare,
    redaction is hot, so the combined pattern is rebuilt on registration only."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def register(self, value: str | None) -> None:
        """Mask ``value`` from now on. ``None``, blanks and very short values are ignored."""
        if not value:
            return
        value = value.strip()
        if len(value) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if value in self._secrets:
                return
            self._secrets.add(value)
            # Longest first so a secret that contains another is masked whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def redact(self, text: str) -> str:
        """``text`` with every registered secret and known token shape replaced by ``***``."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(MASK, text)
        if _TRIGGER.search(text.lower()) is None:
            return text
        for shape, replacement in _SHAPES:
            text = shape.sub(replacement, text)
        return text

    def redact_values(self, text: str) -> str:
        """``text`` with every registered secret and unmistakable token (``lin_api_...``,
        ``sk-...``, ``ghp_...``, ``Bearer ...``) masked, but not the value after a key name:
        for the program's own messages, which name settings (``tracker.api_key is empty``)
        and never write a value that was not registered."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(MASK, text)
        if _TRIGGER.search(text.lower()) is None:
            return text
        for shape, replacement in _SHAPES[:-1]:
            text = shape.sub(replacement, text)
        return text

    def clear(self) -> None:
        """Forget registered secrets (tests)."""
        with self._lock:
            self._secrets.clear()
            self._pattern = None


_DEFAULT = Redactor()


def register_secret(value: str | None) -> None:
    """Register ``value`` with the process-wide redactor used by every log line."""
    _DEFAULT.register(value)


def redact(text: str) -> str:
    """Apply the process-wide redactor to ``text``."""
    return _DEFAULT.redact(text)


def redact_values(text: str) -> str:
    """Apply the process-wide redactor's :meth:`Redactor.redact_values` to ``text``."""
    return _DEFAULT.redact_values(text)


def default_redactor() -> Redactor:
    return _DEFAULT
