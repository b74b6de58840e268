"""Pull requests of GitHub issues, for the links the scheduler shows and the reactions it
runs (``scheduler/feedback.py``).

An issue's pull request is, in order: the open (else newest) pull request whose head is the
run's branch (``repository.pullRequests(headRefName:)``), else the first of the issue's
``closedByPullRequestsReferences`` (GitHub fills it from closing keywords, ``Fixes`` then
the issue's number, and from the issue's development links), open ones first. One GraphQL
request reads :data:`BATCH` issues (aliases ``i<n>`` and ``b<n>``), with the issue's labels
(the label commands), the head commit's check rollup and the unresolved review threads, and
who wrote what (each comment's and the pull request's author and ``authorAssociation``,
whether its head is a fork's): the scheduler sends only what trusted people wrote.

Writes and reads on demand: :meth:`GitHubPulls.job_log_tail` (``GET
/repos/{o}/{r}/actions/jobs/{id}/logs`` answers ``302`` to a signed URL on another host,
read without the token, its tail kept), :meth:`GitHubPulls.required_checks` (a fresh read of
one pull request's head and required checks), :meth:`GitHubPulls.merge` (``PUT
.../pulls/{n}/merge`` with the ``sha`` the checks passed on: GitHub answers ``409`` when the
head moved) and :meth:`GitHubPulls.remove_label`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from symphony_tui.domain.pull_requests import PullCheck, PullRequestLink, ReviewNote
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.github.client import GitHubClient

log = logging.getLogger(__name__)

BATCH = 20
"""Issues per pull-request read (each brings up to two pull requests and their checks)."""
CHECKS_FIRST = 50
THREADS_FIRST = 20
COMMENTS_FIRST = 3
REVIEWS_FIRST = 10
CLOSING_FIRST = 3
BRANCH_FIRST = 2
# GitHub prices a query by the requests its connections need (each connection's count is
# the product of its parents' ``first``): review comments dominate, at (3 + 2) pull requests
# x 20 threads an issue; with the rest about 120 per issue, 2,400 for a batch of 20: about
# 24 points a request (GitHub counts a hundredth of them), of the 5,000 an hour a token has.
# Authors and associations are plain fields (no connection): they add nothing to it.
LOG_TAIL_BYTES = 256 * 1024
"""How much of a job's log is read from its end (the excerpt is cut from this)."""

PULL_FIELDS = f"""
fragment SymphonyGitHubPull on PullRequest {{
  number
  url
  state
  isDraft
  headRefName
  headRefOid
  baseRefName
  mergeable
  reviewDecision
  author {{ login }}
  authorAssociation
  isCrossRepository
  headRepositoryOwner {{ login }}
  commits(last: 1) {{
    nodes {{
      commit {{
        oid
        statusCheckRollup {{
          state
          contexts(first: {CHECKS_FIRST}) {{
            nodes {{
              __typename
              ... on CheckRun {{
                name
                conclusion
                databaseId
                detailsUrl
                checkSuite {{ workflowRun {{ workflow {{ name }} }} }}
              }}
              ... on StatusContext {{ context state targetUrl }}
            }}
          }}
        }}
      }}
    }}
  }}
  reviewThreads(first: {THREADS_FIRST}) {{
    nodes {{
      isResolved
      isOutdated
      path
      line
      comments(first: {COMMENTS_FIRST}) {{ nodes {{ author {{ login }} authorAssociation body url }} }}
    }}
  }}
  latestReviews(first: {REVIEWS_FIRST}) {{
    nodes {{ state body url author {{ login }} authorAssociation }}
  }}
}}
"""


def pulls_of(numbers: list[int], with_branch: list[int]) -> str:
    """One query for ``numbers`` (aliases ``i<n>``); those in ``with_branch`` also read the
    pull requests of their branch (``b<n>``, variable ``$b<n>``)."""
    variables = "".join(f", $b{n}: String!" for n in with_branch)
    parts = []
    for n in numbers:
        parts.append(
            f"i{n}: issue(number: {int(n)}) {{ number state labels(first: 50) {{ nodes {{ name }} }} "
            f"closedByPullRequestsReferences(first: {CLOSING_FIRST}, includeClosedPrs: true) "
            "{ nodes { ...SymphonyGitHubPull } } }"
        )
        if n in with_branch:
            parts.append(
                f"b{n}: pullRequests(headRefName: $b{n}, first: {BRANCH_FIRST}, "
                "orderBy: {field: CREATED_AT, direction: DESC}) "
                "{ nodes { ...SymphonyGitHubPull } }"
            )
    body = "\n    ".join(parts)
    return (
        f"query SymphonyGitHubPulls($owner: String!, $name: String!{variables}) {{\n"
        f"  repository(owner: $owner, name: $name) {{\n    {body}\n  }}\n}}\n" + PULL_FIELDS
    )


REQUIRED_CHECKS = f"""
query SymphonyGitHubRequiredChecks($owner: String!, $name: String!, $number: Int!) {{
  repository(owner: $owner, name: $name) {{
    pullRequest(number: $number) {{
      state
      headRefOid
      mergeable
      reviewDecision
      commits(last: 1) {{
        nodes {{
          commit {{
            oid
            statusCheckRollup {{
              contexts(first: {CHECKS_FIRST}) {{
                nodes {{
                  __typename
                  ... on CheckRun {{ name conclusion isRequired(pullRequestNumber: $number) }}
                  ... on StatusContext {{ context state isRequired(pullRequestNumber: $number) }}
                }}
              }}
            }}
          }}
        }}
      }}
    }}
  }}
}}
"""
"""A fresh read of one pull request before an auto-merge: head, and each check's
requirement (branch protection) on that head."""

ALL_DOCUMENTS: tuple[str, ...] = (pulls_of([1, 2], [2]), REQUIRED_CHECKS)
"""One instance of every shape, for the schema test."""


@dataclass(frozen=True)
class IssuePulls:
    """What one read gave for one issue: its ``labels`` (as GitHub spells them), its pull
    request (or None), and whether the issue is still ``open``."""

    labels: tuple[str, ...]
    pull_request: PullRequestLink | None
    open: bool = True


@dataclass(frozen=True)
class MergeCheck:
    """The fresh read before an auto-merge: ``head`` and whether every required check
    passed on it (``why`` says what is missing when not)."""

    head: str
    ready: bool
    why: str


class GitHubPulls:
    """Pull-request reads and writes of the tracker's repository (see the module doc)."""

    def __init__(self, client: GitHubClient, repo: Any) -> None:
        self._client = client
        self._repo = repo  # () -> (owner, name)

    async def read(self, issues: Mapping[int, str | None]) -> dict[int, IssuePulls]:
        """For each issue number (-> the run's branch, or None): its labels and its pull
        request. Issues GitHub does not return are absent. Raises :class:`TrackerError`."""
        owner, name = self._repo()
        numbers = list(issues)
        out: dict[int, IssuePulls] = {}
        for start in range(0, len(numbers), BATCH):
            chunk = numbers[start : start + BATCH]
            branched = [n for n in chunk if issues[n]]
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables.update({f"b{n}": issues[n] for n in branched})
            data = await self._client.graphql(pulls_of(chunk, branched), variables)
            repository = data.get("repository") or {}
            for n in chunk:
                node = repository.get(f"i{n}")
                if not isinstance(node, dict):
                    continue
                labels = tuple(
                    str(x.get("name"))
                    for x in _nodes(node.get("labels"))
                    if isinstance(x.get("name"), str)
                )
                pull = _choose(_nodes(repository.get(f"b{n}")), "branch") or _choose(
                    _nodes(node.get("closedByPullRequestsReferences")), "closing_reference"
                )
                out[n] = IssuePulls(labels, pull, open=node.get("state") != "CLOSED")
        return out

    async def job_log_tail(self, job_id: int) -> str:
        """The end of an Actions job's log (at most :data:`LOG_TAIL_BYTES`, decoded). The
        signed URL GitHub redirects to is read without the token."""
        owner, name = self._repo()
        path = f"/repos/{owner}/{name}/actions/jobs/{int(job_id)}/logs"
        response = await self._client.request("GET", path)
        location = response.headers.get("location")
        if response.status != 302 or not location:
            self._client.ok_body(response, path)
            raise TrackerError("github_unknown_payload", f"{path}: no log location")
        return await self._client.download_tail(location, LOG_TAIL_BYTES)

    async def required_checks(self, number: int) -> MergeCheck:
        """Pull request ``number``'s head and whether every required check passed on it,
        the review is approved and it merges cleanly."""
        owner, name = self._repo()
        data = await self._client.graphql(
            REQUIRED_CHECKS, {"owner": owner, "name": name, "number": int(number)}
        )
        pull = (data.get("repository") or {}).get("pullRequest")
        if not isinstance(pull, dict):
            raise TrackerError("github_unknown_payload", f"pull request {number} not found")
        head = str(pull.get("headRefOid") or "")
        commit = next(iter(_nodes(pull.get("commits"))), {}).get("commit") or {}
        if pull.get("state") != "OPEN":
            return MergeCheck(head, False, f"the pull request is {str(pull.get('state')).lower()}")
        if commit.get("oid") != head:
            return MergeCheck(head, False, "the checks are not of the head commit")
        if pull.get("reviewDecision") != "APPROVED":
            return MergeCheck(head, False, "the review is not approved")
        if pull.get("mergeable") != "MERGEABLE":
            return MergeCheck(head, False, f"mergeable is {pull.get('mergeable')}")
        contexts = _nodes((commit.get("statusCheckRollup") or {}).get("contexts"))
        required = [c for c in contexts if c.get("isRequired")]
        if not required:
            return MergeCheck(head, False, "no required check on the head commit")
        waiting = [
            str(c.get("name") or c.get("context"))
            for c in required
            if (c.get("conclusion") or c.get("state")) not in ("SUCCESS", "NEUTRAL", "SKIPPED")
        ]
        if waiting:
            return MergeCheck(head, False, "required checks not passed: " + ", ".join(waiting))
        return MergeCheck(head, True, f"{len(required)} required check(s) passed")

    async def merge(self, number: int, sha: str, method: str) -> tuple[bool, str]:
        """Merge pull request ``number`` only if its head is still ``sha``: (merged, what
        GitHub said). ``409``: the head moved; ``405``: not mergeable."""
        owner, name = self._repo()
        path = f"/repos/{owner}/{name}/pulls/{int(number)}/merge"
        response = await self._client.request(
            "PUT", path, body={"sha": sha, "merge_method": method}
        )
        body = response.body if isinstance(response.body, dict) else {}
        message = str(body.get("message") or f"HTTP {response.status}")
        if response.status == 200 and body.get("merged"):
            return True, message
        if response.status == 409:
            return False, f"head moved since {sha[:12]}: {message}"
        if response.status in (405, 422, 403, 404):
            return False, message
        self._client.ok_body(response, path)
        return False, message

    async def remove_label(self, number: int, label: str) -> None:
        """Take ``label`` off issue ``number`` (already gone: nothing to do)."""
        owner, name = self._repo()
        path = f"/repos/{owner}/{name}/issues/{int(number)}/labels/{quote(label, safe='')}"
        response = await self._client.request("DELETE", path)
        if response.status != 404:
            self._client.ok_body(response, path)


def _nodes(connection: Any) -> list[dict]:
    nodes = connection.get("nodes") if isinstance(connection, dict) else None
    return [n for n in nodes or [] if isinstance(n, dict)]


def _choose(nodes: list[dict], found_by: str) -> PullRequestLink | None:
    """The open pull request among ``nodes``, else the first (newest or GitHub's order)."""
    links = [link for link in (_link(n, found_by) for n in nodes) if link is not None]
    return next((p for p in links if p.state == "OPEN"), links[0] if links else None)


def _link(node: dict, found_by: str) -> PullRequestLink | None:
    number, url = node.get("number"), node.get("url")
    if not isinstance(number, int) or not isinstance(url, str):
        return None
    commit = next(iter(_nodes(node.get("commits"))), {}).get("commit") or {}
    rollup = commit.get("statusCheckRollup") or {}
    checks = tuple(check for check in (_check(c) for c in _nodes(rollup.get("contexts"))) if check)
    notes: list[ReviewNote] = []
    for thread in _nodes(node.get("reviewThreads")):
        if thread.get("isResolved") or thread.get("isOutdated"):
            continue
        for comment in _nodes(thread.get("comments")):
            notes.append(
                ReviewNote(
                    author=(comment.get("author") or {}).get("login"),
                    association=comment.get("authorAssociation"),
                    body=str(comment.get("body") or ""),
                    path=thread.get("path"),
                    line=thread.get("line"),
                    url=comment.get("url"),
                )
            )
    for review in _nodes(node.get("latestReviews")):
        if review.get("state") == "CHANGES_REQUESTED" and str(review.get("body") or "").strip():
            notes.append(
                ReviewNote(
                    author=(review.get("author") or {}).get("login"),
                    association=review.get("authorAssociation"),
                    body=str(review["body"]),
                    url=review.get("url"),
                )
            )
    return PullRequestLink(
        number=number,
        url=url,
        state=str(node.get("state") or "OPEN"),
        draft=bool(node.get("isDraft")),
        head_ref=str(node.get("headRefName") or ""),
        head_sha=str(node.get("headRefOid") or ""),
        base_ref=str(node.get("baseRefName") or ""),
        mergeable=str(node.get("mergeable") or "UNKNOWN"),
        review_decision=node.get("reviewDecision"),
        checks_state=rollup.get("state"),
        checks_sha=commit.get("oid"),
        checks=checks,
        review_notes=tuple(notes),
        found_by=found_by,
        author=(node.get("author") or {}).get("login"),
        author_association=node.get("authorAssociation"),
        cross_repository=bool(node.get("isCrossRepository")),
        head_owner=(node.get("headRepositoryOwner") or {}).get("login"),
    )


def _check(node: dict) -> PullCheck | None:
    if node.get("__typename") == "CheckRun" and isinstance(node.get("name"), str):
        workflow = (((node.get("checkSuite") or {}).get("workflowRun") or {}).get("workflow")) or {}
        return PullCheck(
            name=node["name"],
            conclusion=node.get("conclusion"),
            job_id=node.get("databaseId") if isinstance(node.get("databaseId"), int) else None,
            workflow=workflow.get("name"),
            url=node.get("detailsUrl"),
        )
    if node.get("__typename") == "StatusContext" and isinstance(node.get("context"), str):
        state = node.get("state")
        conclusion = {"SUCCESS": "SUCCESS", "FAILURE": "FAILURE", "ERROR": "FAILURE"}.get(
            str(state)
        )
        return PullCheck(name=node["context"], conclusion=conclusion, url=node.get("targetUrl"))
    return None
