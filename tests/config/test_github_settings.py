"""The ``github`` section: defaults (every reaction off), values read, and a misspelt key
inside it named with a did-you-mean line, as any other unread key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

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
