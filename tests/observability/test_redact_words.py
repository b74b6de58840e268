"""Masking must not eat ordinary words next to auth-scheme names."""

from symphony_tui.observability.redact import Redactor


def test_scheme_words_in_prose_are_not_masked_but_credentials_are():
    r = Redactor()
    assert r.redact("Original token count: 11") == "Original token count: 11"
    assert r.redact("Basic usage explained") == "Basic usage explained"
    assert "abcdefghijklmnop1234" not in r.redact("Bearer abcdefghijklmnop1234")


def test_every_shape_is_found_in_any_letter_case():
    # The shapes are looked for only when the lowercased text holds one of their triggers:
    # upper- and mixed-case spellings must still be masked.
    from symphony_tui.observability.redact import Redactor

    r = Redactor()
    cases = {
        "API_KEY=abcdef123456": "API_KEY=***",
        "Password: hunter2hunter2": "Password: ***",
        "Authorization=xyz123456789": "Authorization=***",
        "BEARER abcdefghijklmnop": "BEARER ***",
        "key lin_api_ABCDEFGH1234 here": "key lin_api_*** here",
        "use sk-proj-ABCDEFGHIJKLMNOP now": "use sk-proj-*** now",
        "ghp_ABCDEFGHIJKLMNOPQRST": "ghp_***",
    }
    for text, masked in cases.items():
        assert r.redact(text) == masked, text
    plain = "@1764000000.1 the quick brown fox " * 10
    assert r.redact(plain) is plain  # nothing to mask: the same object back, no copy
