"""The ``github`` settings section: pull request links and the reactions to their feedback
(``scheduler/feedback.py``; docs/configuration.md "github"). Read with ``tracker.kind:
github`` only; every reaction is off until its setting turns it on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from symphony_tui.config.numbers import Milliseconds, WholeNumber


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


#: The least ``github.pull_requests.poll_ms`` other than 0 (each read spends GraphQL points).
MIN_POLL_MS = 10_000

#: GitHub's ``CommentAuthorAssociation`` values.
ASSOCIATIONS = frozenset(
    {"OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER",
     "MANNEQUIN", "NONE"}
)  # fmt: skip


class PullRequestSettings(_Section):
    """``github.pull_requests``: how an issue's pull request is found and how often it is
    read. ``branch``: the run's branch as a pattern (``{identifier}``, ``{number}``), tried
    when the workspace's git checkout does not name one; ``poll_ms``: the read's interval
    (0 turns the links and every reaction off, else at least :data:`MIN_POLL_MS`)."""

    poll_ms: Milliseconds = Field(default=60_000, ge=0)
    branch: str | None = None

    @field_validator("poll_ms")
    @classmethod
    def _at_least(cls, value: int) -> int:
        if 0 < value < MIN_POLL_MS:
            raise ValueError(f"must be 0 (off) or at least {MIN_POLL_MS} (10 s), got {value}")
        return value


class ReactionSettings(_Section):
    """``github.reactions``: each reaction on by its own key; ``max_per_issue`` reactions
    that start a turn per issue and scheduler life, at least ``cooldown_ms`` apart.
    ``trusted_associations`` (GitHub's ``CommentAuthorAssociation``, upper case) and
    ``trusted_users`` (logins, any case): whose review comments reach an agent, and whose
    pull requests from a fork get reactions at all."""

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
    trusted_associations: frozenset[str] = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
    trusted_users: frozenset[str] = frozenset()

    @field_validator("trusted_associations", "trusted_users", mode="before")
    @classmethod
    def _names(cls, value: object, info: ValidationInfo) -> object:
        """A name or a list of names: associations upper case and known, logins lower case."""
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple | set | frozenset):
            return value
        if info.field_name == "trusted_users":
            return frozenset(str(v).strip().lower() for v in value if str(v).strip())
        names = {str(v).strip().upper() for v in value}
        unknown = ", ".join(sorted(names - ASSOCIATIONS))
        if unknown:
            raise ValueError(
                f"unknown association(s) {unknown}; known: " + ", ".join(sorted(ASSOCIATIONS))
            )
        return frozenset(names)

    def trusts(self, login: str | None, association: str | None) -> bool:
        """Whether a comment or pull request by ``login`` (its ``association`` to the
        repository) may reach an agent."""
        if login and login.lower() in self.trusted_users:
            return True
        return association is not None and association.upper() in self.trusted_associations


class GitHubSettings(_Section):
    pull_requests: PullRequestSettings = Field(default_factory=PullRequestSettings)
    reactions: ReactionSettings = Field(default_factory=ReactionSettings)
