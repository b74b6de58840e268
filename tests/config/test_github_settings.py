"""The ``github`` section: defaults (every reaction off), values read, and a misspelt key
inside it named with a did-you-mean line, as any other unread key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from symphony_tui.config.errors import flatten_validation_error
from symphony_tui.config.settings import resolve_settings
from symphony_tui.config.unread import unread_warnings


def test_defaults_turn_every_reaction_off() -> None:
    reactions = resolve_settings({}, Path(".")).github.reactions
    assert not any(
        (reactions.ci_failure, reactions.review_comments, reactions.merge_conflict,
         reactions.label_commands, reactions.auto_merge)
    )  # fmt: skip
    assert (reactions.max_per_issue, reactions.cooldown_ms) == (3, 600_000)


def test_values_are_read_and_bounded() -> None:
    raw = {"github": {"reactions": {"ci_failure": True, "log_lines": 20, "merge_method": "rebase"},
                      "pull_requests": {"branch": "agent/{identifier}", "poll_ms": 0}}}  # fmt: skip
    github = resolve_settings(raw, Path(".")).github
    assert github.reactions.ci_failure and github.reactions.log_lines == 20
    assert github.reactions.merge_method == "rebase"
    assert github.pull_requests.branch == "agent/{identifier}"
    with pytest.raises(ValidationError):
        resolve_settings({"github": {"reactions": {"max_per_issue": 0}}}, Path("."))
    assert resolve_settings({"github": None}, Path(".")).github.reactions.max_per_issue == 3


def test_a_misspelt_reaction_is_named() -> None:
    raw = {"github": {"reactions": {"ci_failures": True}}}
    assert unread_warnings(raw) == (
        "unknown setting github.reactions.ci_failures is ignored (nothing reads it); "
        "did you mean github.reactions.ci_failure?",
    )


def test_trust_and_the_least_poll_interval() -> None:
    reactions = resolve_settings({}, Path(".")).github.reactions
    assert reactions.trusts("alice", "MEMBER") and reactions.trusts("bob", "OWNER")
    assert not reactions.trusts("mallory", "NONE") and not reactions.trusts(None, None)
    assert not reactions.trusts("carol", "CONTRIBUTOR")
    raw = {"github": {"reactions": {"trusted_associations": ["owner"],
                                    "trusted_users": ["Carol", " dependabot[bot] "]}}}  # fmt: skip
    reactions = resolve_settings(raw, Path(".")).github.reactions
    assert reactions.trusts("carol", "CONTRIBUTOR") and reactions.trusts("Dependabot[bot]", "NONE")
    assert reactions.trusts("x", "OWNER") and not reactions.trusts("alice", "MEMBER")

    def error(raw: dict) -> str:
        with pytest.raises(ValidationError) as caught:
            resolve_settings(raw, Path("."))
        return flatten_validation_error(caught.value)

    said = error({"github": {"reactions": {"trusted_associations": ["MEMBERS"]}}})
    assert "\n" not in said and "unknown association(s) MEMBERS" in said
    said = error({"github": {"pull_requests": {"poll_ms": 5000}}})
    assert "\n" not in said and "github.pull_requests.poll_ms" in said
    assert "at least 10000 (10 s), got 5000" in said
    assert resolve_settings({"github": {"pull_requests": {"poll_ms": 10_000}}}, Path("."))
