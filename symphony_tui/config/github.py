"""The ``github`` settings section: pull request links and the reactions to their feedback
(``scheduler/feedback.py``; docs/configuration.md "github"). Read with ``tracker.kind:
github`` only; every reaction is off until its setting turns it on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from symphony_tui.config.numbers import Milliseconds, WholeNumber


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PullRequestSettings(_Section):
    """``github.pull_requests``: how an issue's pull request is found and how often it is
    read. ``branch``: the run's branch as a pattern (``{identifier}``, ``{number}``), tried
    when the workspace's git checkout does not name one; ``poll_ms``: the read's interval
    (0 turns the links and every reaction off)."""

    poll_ms: Milliseconds = Field(default=60_000, ge=0)
    branch: str | None = None


class ReactionSettings(_Section):
    """``github.reactions``: each reaction on by its own key; ``max_per_issue`` reactions
    that start a turn per issue and scheduler life, at least ``cooldown_ms`` apart."""

    ci_failure: bool = False
    review_comments: bool = False
    merge_conflict: bool = False
    label_commands: bool = False
    auto_merge: bool = False
    max_per_issue: WholeNumber = Field(default=3, gt=0)
    cooldown_ms: Milliseconds = Field(default=600_000, ge=0)
    log_lines: WholeNumber = Field(default=80, gt=0, le=2_000)
    log_chars: WholeNumber = Field(default=6_000, gt=0, le=100_000)
    retry_label: str = "symphony:retry"
    stop_label: str = "symphony:stop"
    merge_method: Literal["merge", "squash", "rebase"] = "squash"
    rework_state: str | None = None


class GitHubSettings(_Section):
    pull_requests: PullRequestSettings = Field(default_factory=PullRequestSettings)
    reactions: ReactionSettings = Field(default_factory=ReactionSettings)
