"""An issue's pull request as the scheduler shows it and reacts to it (docs/configuration.md
``github``): its state, checks, review decision and mergeability, and the review comments
still unresolved. Filled by a tracker that knows pull requests (the GitHub tracker); plain
data, no I/O.

Values keep GitHub's GraphQL spelling: ``state`` ``OPEN`` / ``CLOSED`` / ``MERGED``;
``mergeable`` ``MERGEABLE`` / ``CONFLICTING`` / ``UNKNOWN``; ``review_decision``
``APPROVED`` / ``CHANGES_REQUESTED`` / ``REVIEW_REQUIRED`` or None; a check's ``conclusion``
``SUCCESS`` / ``FAILURE`` / ``TIMED_OUT``... (None while it runs).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

#: Check conclusions that fail a pull request's checks.
FAILED_CONCLUSIONS = frozenset({"FAILURE", "TIMED_OUT", "STARTUP_FAILURE", "ACTION_REQUIRED"})
#: Check conclusions that count as passed.
PASSED_CONCLUSIONS = frozenset({"SUCCESS", "NEUTRAL", "SKIPPED"})


class PullCheck(BaseModel):
    """One check of the pull request's head commit: a check run (``job_id`` is its id, the
    Actions job's id for a workflow's job; ``workflow`` the workflow's name) or a commit
    status (``job_id`` None)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    conclusion: str | None = None
    job_id: int | None = None
    workflow: str | None = None
    url: str | None = None

    @property
    def failed(self) -> bool:
        return self.conclusion in FAILED_CONCLUSIONS

    @property
    def passed(self) -> bool:
        return self.conclusion in PASSED_CONCLUSIONS

    @property
    def label(self) -> str:
        """``workflow / job`` for a workflow's job, else the check's name."""
        return f"{self.workflow} / {self.name}" if self.workflow else self.name


class ReviewNote(BaseModel):
    """A reviewer's word: an unresolved review thread's comment (``path``, ``line``) or a
    review's body (``path`` None). ``association``: the author's relation to the repository,
    GitHub's ``CommentAuthorAssociation`` (``OWNER``, ``MEMBER``, ``COLLABORATOR``,
    ``CONTRIBUTOR``, ``NONE``...; None when unknown)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    author: str | None = None
    association: str | None = None
    body: str
    path: str | None = None
    line: int | None = None
    url: str | None = None

    def render(self) -> str:
        """One line for a prompt or a log: ``path:line (author): text``."""
        where = f"{self.path}:{self.line}" if self.path and self.line else (self.path or "review")
        who = f" ({self.author})" if self.author else ""
        return f"{where}{who}: {self.body.strip()}"


class PullRequestLink(BaseModel):
    """An issue's pull request. ``found_by``: ``branch`` (the run's branch is its head),
    ``closing_reference`` (a closing keyword or a development link of the issue).
    ``checks_sha``: the commit ``checks`` belong to (the head when they are current).
    ``author`` / ``author_association``: who opened it and their relation to the repository
    (as :attr:`ReviewNote.association`); ``cross_repository``: its head is in another
    repository (a fork, owned by ``head_owner``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    number: int
    url: str
    state: str
    draft: bool = False
    head_ref: str = ""
    head_sha: str = ""
    base_ref: str = ""
    mergeable: str = "UNKNOWN"
    review_decision: str | None = None
    checks_state: str | None = None
    checks_sha: str | None = None
    checks: tuple[PullCheck, ...] = ()
    review_notes: tuple[ReviewNote, ...] = ()
    found_by: str = "closing_reference"
    author: str | None = None
    author_association: str | None = None
    cross_repository: bool = False
    head_owner: str | None = None

    @property
    def failed_checks(self) -> tuple[PullCheck, ...]:
        return tuple(c for c in self.checks if c.failed)

    @property
    def checks_summary(self) -> str:
        """``3 passed, 1 failed, 2 pending`` (``no checks`` when there are none)."""
        if not self.checks:
            return "no checks"
        passed = sum(1 for c in self.checks if c.passed)
        failed = sum(1 for c in self.checks if c.failed)
        pending = sum(1 for c in self.checks if c.conclusion is None)
        other = len(self.checks) - passed - failed - pending
        parts = [f"{passed} passed"] if passed else []
        parts += [f"{failed} failed"] if failed else []
        parts += [f"{pending} pending"] if pending else []
        parts += [f"{other} other"] if other else []
        return ", ".join(parts)

    def summary(self) -> str:
        """One line: ``#N open · checks 3 passed, 1 failed · changes requested · conflicts``."""
        state = "draft" if self.draft and self.state == "OPEN" else self.state.lower()
        parts = [f"#{self.number} {state}", f"checks {self.checks_summary}"]
        if self.review_decision:
            parts.append(self.review_decision.lower().replace("_", " "))
        if self.state == "OPEN":
            parts.append(
                {"MERGEABLE": "mergeable", "CONFLICTING": "conflicts"}.get(
                    self.mergeable, "mergeable unknown"
                )
            )
        return " · ".join(parts)

    def public(self) -> dict[str, object]:
        """The API's shape (docs/http-api.md ``pull_request``)."""
        return {
            "number": self.number,
            "url": self.url,
            "state": self.state,
            "draft": self.draft,
            "head_ref": self.head_ref,
            "head_sha": self.head_sha,
            "base_ref": self.base_ref,
            "mergeable": self.mergeable,
            "review_decision": self.review_decision,
            "checks_state": self.checks_state,
            "checks_summary": self.checks_summary,
            "failed_checks": [c.label for c in self.failed_checks],
            "unresolved_comments": sum(1 for n in self.review_notes if n.path),
            "found_by": self.found_by,
            "summary": self.summary(),
        }
