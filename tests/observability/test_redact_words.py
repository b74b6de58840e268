"""Masking must not eat ordinary words next to auth-scheme names."""

from symphony_tui.observability.redact import Redactor


def test_scheme_words_in_prose_are_not_masked_but_credentials_are():
    r = Redactor()
    assert r.redact("Original token count: 11") == "Original token count: 11"
    assert r.redact("Basic usage explained") == "Basic usage explained"
    assert "abcdefghijklmnop1234" not in r.redact("Bearer abcdefghijklmnop1234")
