"""Work that comes back: each watched issue's pull request, and the reactions to its
feedback (docs/configuration.md ``github``).

A task (:meth:`Feedback.watch`) reads, every ``github.pull_requests.poll_ms``, the pull
request of each watched issue (issues running, retrying, held or known, and every issue
that had a run in this scheduler's life, until the issue is closed) through the tracker's
``pulls`` (the GitHub tracker's :class:`~symphony_tui.trackers.github.pulls.GitHubPulls`),
and posts :class:`~symphony_tui.scheduler.inbox.PullRequestsRead`. The loop keeps the links
for the snapshot and decides the reactions here (:meth:`Feedback.read`); what a reaction
needs from the outside (a job's log, a move back to an active state, a merge, a label's
removal) runs in its own task, which posts :class:`~symphony_tui.scheduler.inbox.FeedbackReady`
when the turn may start. A reaction's turn is a run of the issue (a continuation of its
thread when the backend resumes one) whose first prompt starts with the feedback.

Reactions, each on by its setting (``github.reactions``):

- ``ci_failure``: a check of the head commit failed: the failing jobs' names and the last
  ``log_lines`` lines of each log (at most ``log_chars`` characters, secrets masked).
- ``review_comments``: changes requested or unresolved review threads: the comments (file,
  line, author, text).
- ``merge_conflict``: the pull request conflicts with its base: rebase.
- ``label_commands``: ``retry_label`` reruns the issue, ``stop_label`` stops and holds it;
  the label is removed first (so it acts once) and the command is audited as the
  operator's would be.
- ``auto_merge``: every required check passed on the head, the review is approved and it
  merges cleanly: merged with the head's ``sha`` as a precondition (GitHub refuses when the
  head moved since).

Trust: only review comments whose author is trusted (``trusted_associations``, by default
``OWNER``, ``MEMBER``, ``COLLABORATOR``, or a login in ``trusted_users``) reach a prompt,
and a pull request from a fork whose author is not trusted gets no reaction at all (no CI
log, no review, no rebase, no merge): anyone may comment on, or open a pull request
against, a public repository.

No loop: a reaction acts once per feedback (the same failure on the same head commit does
not start a second turn), an issue gets at most ``max_per_issue`` reaction turns in a
scheduler's life, at least ``cooldown_ms`` apart, and none while the issue runs, waits for a
failure's retry or is held (a continuation retry gives way to the reaction's run). Every reaction is an event (``feedback``) and an audit entry.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symphony_tui.config.github import ReactionSettings
from symphony_tui.domain import EventKind, Issue
from symphony_tui.domain.commands import Command, Rerun, Stop
from symphony_tui.domain.pull_requests import PullRequestLink
from symphony_tui.observability.redact import redact
from symphony_tui.scheduler.audit import AuditLog
from symphony_tui.scheduler.inbox import FeedbackHold, FeedbackReady, PullRequestsRead, SystemNoted
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.state import SchedulerState
from symphony_tui.text import clean
from symphony_tui.trackers.base import Tracker, TrackerError

log = logging.getLogger("symphony_tui.scheduler")

#: Failed jobs whose logs go into one prompt.
MAX_FAILED_JOBS = 3
#: Review notes in one prompt, and characters of each.
MAX_NOTES = 20
NOTE_CHARS = 1_000
#: Characters kept of one log line.
LINE_CHARS = 400
GIT_TIMEOUT_S = 5.0
WHO = "github"

_STAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def log_excerpt(text: str, lines: int, chars: int, mask: Callable[[str], str] = redact) -> str:
    """The end of a job's log for a prompt: timestamps, escape sequences (colours, cursor
    moves, links) and control characters dropped, each line cut to its first
    :data:`LINE_CHARS` characters (the last line, where a log without line breaks ends, to
    its last ones), the last ``lines`` lines within ``chars`` characters, secrets masked
    (``mask``, the project's redaction); a first line says how many were left out."""
    rows = [_STAMP.sub("", clean(row)).rstrip() for row in text.splitlines()]
    while rows and not rows[-1]:
        rows.pop()
    rows = [mask(row) for row in rows]
    rows = [row if len(row) <= LINE_CHARS else row[:LINE_CHARS] + " [cut]" for row in rows[:-1]] + [
        row if len(row) <= LINE_CHARS else "[cut] " + row[-LINE_CHARS:] for row in rows[-1:]
    ]
    kept = rows[-lines:]
    while kept and sum(len(r) + 1 for r in kept) > chars:
        kept.pop(0)
    left_out = len(rows) - len(kept)
    head = [f"[{left_out} earlier line(s) not shown]"] if left_out else []
    return "\n".join(head + kept)


def ci_prompt(link: PullRequestLink, logs: Mapping[str, str]) -> str:
    """The turn's opening for failed checks: each failed job's name and its log excerpt."""
    parts = [
        f"The checks of pull request #{link.number} ({link.url}) failed on its head commit "
        f"{link.head_sha[:12]}. Find the cause, fix it on branch {link.head_ref}, push, and "
        "make sure the checks pass."
    ]
    for check in link.failed_checks[:MAX_FAILED_JOBS]:
        excerpt = logs.get(check.label)
        parts.append(f"Failed: {clean(check.label)} ({str(check.conclusion).lower()})")
        if excerpt:
            fence = "`" * max(3, 1 + max(map(len, re.findall("`+", excerpt)), default=0))
            parts.append(f"The end of its log:\n{fence}\n{excerpt}\n{fence}")  # not closed by it
        else:
            parts.append(
                "(its log could not be read" + (f": see {check.url})" if check.url else ")")
            )
    more = len(link.failed_checks) - MAX_FAILED_JOBS
    if more > 0:
        parts.append(f"{more} more check(s) failed.")
    return "\n\n".join(parts)


def review_prompt(link: PullRequestLink) -> str:
    """The turn's opening for review feedback: each unresolved comment (file, line, text)."""
    decision = (link.review_decision or "").lower().replace("_", " ")
    lines = [
        f"Pull request #{link.number} ({link.url}) has review feedback"
        + (f" ({decision})" if decision else "")
        + f". Address each point on branch {link.head_ref} and push:"
    ]
    for note in link.review_notes[:MAX_NOTES]:
        text = redact(clean(note.render(), multiline=True))
        lines.append("- " + (text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS] + " [cut]"))
    more = len(link.review_notes) - MAX_NOTES
    if more > 0:
        lines.append(f"({more} more comment(s) on the pull request)")
    return "\n".join(lines)


def conflict_prompt(link: PullRequestLink) -> str:
    return (
        f"Pull request #{link.number} ({link.url}) conflicts with its base branch "
        f"{link.base_ref or 'main'}. Rebase branch {link.head_ref} onto the current "
        f"{link.base_ref or 'main'}, resolve the conflicts, run the tests, and push."
    )


@dataclass
class IssueReactions:
    """What was done for one issue: reaction turns started, when the last one started
    (monotonic seconds), and the feedback already acted on (its keys)."""

    turns: int = 0
    last_mono: float | None = None
    handled: set[str] = field(default_factory=set)
    told: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Reaction:
    kind: str
    key: str
    link: PullRequestLink


Send = Callable[..., Awaitable[Any]]


class Feedback:
    """The reactions' rules on the loop, and the watch task (see the module docstring).
    ``dispatch(issue, feedback)`` starts a reaction's run; ``send(command, who=, via=)``
    is the operator command path (``Orchestrator.send``: applied and audited)."""

    def __init__(
        self,
        state: SchedulerState,
        tracker: Tracker,
        mailbox: Mailbox,
        audit: AuditLog,
        *,
        dispatch: Callable[[Issue, str], bool],
        send: Send,
    ) -> None:
        self._state = state
        self._tracker = tracker
        self._mailbox = mailbox
        self._audit = audit
        self._dispatch = dispatch
        self._send = send
        self._watched: dict[str, Issue] = {}
        self._done: dict[str, IssueReactions] = {}
        self._acting: set[str] = set()  # issue ids with a reaction's task under way
        self._label_failed: set[str] = set()  # label keys whose failed removal was said

    @property
    def pulls(self) -> Any:
        """The tracker's pull-request reader, or None (a tracker without pull requests)."""
        return getattr(self._tracker, "pulls", None)

    @property
    def enabled(self) -> bool:
        settings = self._state.settings
        return (
            settings.tracker.kind == "github"
            and settings.github.pull_requests.poll_ms > 0
            and self.pulls is not None
        )

    # ------------------------------------------------------------------ the watch task

    async def watch(self) -> None:
        """Read the watched issues' pull requests every ``poll_ms`` (until cancelled)."""
        while True:
            poll_ms = self._state.settings.github.pull_requests.poll_ms
            await asyncio.sleep(max(1.0, poll_ms / 1000) if poll_ms else 5.0)
            if not self.enabled:
                continue
            try:
                await self.read_once()
            except Exception:  # a bug must not end the watch: the next read tries again
                log.exception("pull request read crashed")

    async def read_once(self) -> None:
        """One read of every watched issue's pull request, posted to the loop."""
        targets = self.targets()
        if not targets:
            return
        branches = await asyncio.to_thread(self._branches, targets)
        try:
            found = await self.pulls.read({_number(i.id): branches.get(i.id) for i in targets})
        except TrackerError as exc:
            self._mailbox.post(PullRequestsRead({}, {}, (), {}, error=exc))
            return
        by_id = {i.id: i for i in targets}
        links = {
            issue_id: found[_number(issue_id)].pull_request
            for issue_id in by_id
            if _number(issue_id) in found
        }
        labels = {
            issue_id: found[_number(issue_id)].labels
            for issue_id in by_id
            if _number(issue_id) in found
        }
        closed = tuple(
            issue_id
            for issue_id in by_id
            if _number(issue_id) not in found or not found[_number(issue_id)].open
        )
        self._mailbox.post(PullRequestsRead(links, labels, closed, by_id))

    def targets(self) -> list[Issue]:
        """The issues to read (see the module docstring): the watched ones and those the
        state has now (the loop adds them to the watched set when the read comes back)."""
        state = self._state
        found = dict(self._watched)
        for run in state.running.values():
            found[run.issue.id] = run.issue
        for retry in state.retrying.values():
            found[retry.issue.id] = retry.issue
        for issue in state.known.values():
            if issue.identifier in state.completed or issue.id in state.held:
                found[issue.id] = issue
        return [i for i in found.values() if _number(i.id) is not None]

    def _branches(self, issues: list[Issue]) -> dict[str, str]:
        """Each issue's branch: the tracker's, else its local workspace's checked-out
        branch (not ``main`` / ``master``), else ``github.pull_requests.branch``."""
        settings = self._state.settings
        pattern = settings.github.pull_requests.branch
        out: dict[str, str] = {}
        for issue in issues:
            branch = issue.branch_name
            if not branch and not self._state.hosts.enabled:
                branch = _git_branch(self._state.workspaces.path_for(issue.identifier))
            if not branch and pattern:
                try:
                    branch = pattern.format(identifier=issue.identifier, number=_number(issue.id))
                except (KeyError, IndexError, ValueError):
                    branch = None
            if branch:
                out[issue.id] = branch
        return out

    # ------------------------------------------------------------------ on the loop

    def read(self, item: PullRequestsRead) -> None:
        """A read came back: keep the links, forget closed issues, decide reactions."""
        state = self._state
        if item.error is not None:
            state.log("warning", "pull request read failed", error=str(item.error))
            return
        for issue_id, seen in item.issues.items():
            if issue_id not in item.closed:
                self._watched[issue_id] = seen  # as the state last had it
        changed = False
        links = state.pull_requests  # by identifier
        for issue_id in item.closed:
            gone = self._watched.pop(issue_id, None)
            if gone is not None:
                changed |= links.pop(gone.identifier, None) is not None
        for issue_id, link in item.links.items():
            issue = self._watched.get(issue_id)
            if issue is None:
                continue
            if link is None:
                changed |= links.pop(issue.identifier, None) is not None
            elif links.get(issue.identifier) != link:
                links[issue.identifier] = link
                changed = True
        if changed:
            state.changed()
        reactions = state.settings.github.reactions
        for issue_id, labels in item.labels.items():
            issue = self._watched.get(issue_id)
            if issue is not None and reactions.label_commands:
                self._label_commands(issue, labels, reactions)
        for issue_id, link in item.links.items():
            issue = self._watched.get(issue_id)
            if issue is not None and link is not None and issue_id not in item.closed:
                self._react(issue, link, reactions)

    def ready(self, item: FeedbackReady) -> None:
        """A reaction's I/O is done: say what it did, and start its turn (``prompt``)
        unless the issue got busy meanwhile."""
        self._acting.discard(item.key)
        self._state.reacting.discard(item.key)
        issue = item.issue
        if item.kind == "label":  # a label that cannot be removed is said once, not per read
            if item.failed and item.key in self._label_failed:
                return
            (self._label_failed.add if item.failed else self._label_failed.discard)(item.key)
        if item.reset:
            self._done.pop(issue.id, None)  # the operator's word: a fresh count of reactions
        if item.note:
            self._note(issue, item.note)
        if item.prompt is None:
            self._give_back(item)  # its I/O failed (a reaction with a turn to start)
            return
        busy = self._busy(issue.id)
        if busy or not self._dispatch(issue, item.prompt):
            why = "is busy" if busy else "is not eligible now (or no slot is free)"
            self._note(issue, f"{item.kind}: no turn started, {issue.identifier} {why}; later")
            self._give_back(item)
            return
        self._note(issue, f"{item.kind}: turn started for {issue.identifier}")

    def _give_back(self, item: FeedbackReady) -> None:
        """A reaction whose turn did not start is not spent: the next read acts on the same
        feedback again (its turn, and the cool-down's start, given back; an auto-merge
        took neither)."""
        done = self._done.get(item.issue.id)
        if done is not None and item.reaction_key is not None:
            done.handled.discard(item.reaction_key)
            if item.kind != "auto_merge":
                done.turns = max(0, done.turns - 1)
                done.last_mono = item.previous_mono

    def hold(self, item: FeedbackHold) -> None:
        """``stop_label`` on an issue that was not running: no retry, held."""
        state = self._state
        state.pop_retry(item.issue.id)
        path = None if state.hosts.enabled else state.workspaces.path_for(item.issue.identifier)
        state.hold(item.issue, path if path is not None and path.is_dir() else None)
        self._note(item.issue, f"label {item.label}: {item.issue.identifier} held")

    def _react(self, issue: Issue, link: PullRequestLink, reactions: ReactionSettings) -> None:
        state = self._state
        if link.state != "OPEN" or issue.id in self._acting:
            return
        if self._busy(issue.id):
            return
        if state.dispatch_paused:
            return  # the operator paused dispatch: the feedback waits with it
        link = self._trusted(issue, link, reactions)
        chosen = self._choose(link, reactions)
        if chosen is None:
            return
        done = self._done.setdefault(issue.id, IssueReactions())
        if link.cross_repository and not reactions.trusts(link.author, link.author_association):
            self._tell_once(
                issue, done, f"fork:{link.number}",
                f"{chosen.kind}: not acted on, pull request #{link.number} comes from a fork "
                f"({link.head_owner or 'another repository'}) by {link.author or 'a ghost'} "
                f"({str(link.author_association or 'no association').lower()}), who is not "
                "trusted (github.reactions.trusted_associations, trusted_users): no reaction "
                "to it, ever",
            )  # fmt: skip
            return
        if chosen.key in done.handled:
            return
        previous = done.last_mono
        if chosen.kind != "auto_merge":
            if done.turns >= reactions.max_per_issue:
                self._tell_once(
                    issue, done, f"cap:{chosen.key}",
                    f"{chosen.kind}: not acted on, {issue.identifier} had its "
                    f"{reactions.max_per_issue} reaction turn(s) (github.reactions.max_per_issue)",
                )  # fmt: skip
                return
            now = state.clock.monotonic()
            wait = (
                (done.last_mono + reactions.cooldown_ms / 1000 - now)
                if done.last_mono is not None
                else 0.0
            )
            if wait > 0:
                self._tell_once(
                    issue, done, f"cool:{chosen.key}",
                    f"{chosen.kind}: waits {wait:.0f} s more, the cool-down after the last "
                    f"reaction on {issue.identifier} (github.reactions.cooldown_ms)",
                )  # fmt: skip
                return
            done.turns += 1
            done.last_mono = now
        done.handled.add(chosen.key)
        self._acting.add(issue.id)  # the reaction's key: one at a time per issue
        if chosen.kind != "auto_merge":
            state.reacting.add(issue.id)  # no plain run of it while its turn is prepared
        what = {
            "ci_failure": "failed checks: " + ", ".join(c.label for c in link.failed_checks),
            "review_comments": f"review feedback ({len(link.review_notes)} comment(s))",
            "merge_conflict": f"conflicts with {link.base_ref or 'its base'}",
            "auto_merge": f"checks passed and approved on {link.head_sha[:12]}",
        }[chosen.kind]
        self._note(issue, f"{chosen.kind}: pull request #{link.number} {what}")
        self._audit.record(
            f"reaction {chosen.kind}", who=WHO, via="github reactions",
            issue=issue.identifier, detail=f"#{link.number} {what}",
        )  # fmt: skip
        self._mailbox.spawn(
            self._act(issue, chosen, reactions, previous), name=f"feedback-{issue.id}"
        )

    def _trusted(
        self, issue: Issue, link: PullRequestLink, reactions: ReactionSettings
    ) -> PullRequestLink:
        """``link`` with only the review notes of trusted authors (``trusted_associations``,
        ``trusted_users``): nothing anyone else wrote reaches an agent. The ones left out
        are said once per set of authors."""
        kept = tuple(n for n in link.review_notes if reactions.trusts(n.author, n.association))
        if len(kept) == len(link.review_notes):
            return link
        if reactions.review_comments:
            left = sorted({n.author or "a ghost" for n in link.review_notes if n not in kept})
            done = self._done.setdefault(issue.id, IssueReactions())
            self._tell_once(
                issue, done, f"untrusted:{link.number}:{','.join(left)}",
                f"review_comments: {len(link.review_notes) - len(kept)} comment(s) on pull "
                f"request #{link.number} by {', '.join(left)} left out: not trusted "
                "(github.reactions.trusted_associations, trusted_users)",
            )  # fmt: skip
        return link.model_copy(update={"review_notes": kept})

    def _busy(self, issue_id: str) -> bool:
        """The issue runs, is held, or waits for a failure's retry. A continuation retry
        (an issue still active after a normal run) is not busy: the reaction's run takes
        its place, carrying the feedback."""
        state = self._state
        retry = state.retrying.get(issue_id)
        waits = retry is not None and not retry.entry.continuation
        return issue_id in state.running or issue_id in state.held or waits

    @staticmethod
    def _choose(link: PullRequestLink, reactions: ReactionSettings) -> Reaction | None:
        """The reaction the pull request calls for, if any (its key names the feedback)."""
        head = link.head_sha
        current = link.checks_sha == head
        failed = link.failed_checks if current else ()
        if reactions.ci_failure and failed:
            names = ",".join(sorted(c.label for c in failed))
            return Reaction("ci_failure", f"ci:{head}:{names}", link)
        if reactions.merge_conflict and link.mergeable == "CONFLICTING":
            return Reaction("merge_conflict", f"conflict:{head}:{link.base_ref}", link)
        if reactions.review_comments and (
            link.review_decision == "CHANGES_REQUESTED" or any(n.path for n in link.review_notes)
        ):
            said = "\n".join(n.render() for n in link.review_notes)
            digest = hashlib.sha1(said.encode()).hexdigest()[:16]
            return Reaction("review_comments", f"review:{head}:{digest}", link)
        if (
            reactions.auto_merge
            and current
            and not link.draft
            and link.checks_state == "SUCCESS"
            and link.review_decision == "APPROVED"
            and link.mergeable == "MERGEABLE"
        ):
            return Reaction("auto_merge", f"merge:{head}", link)
        return None

    async def _act(
        self,
        issue: Issue,
        reaction: Reaction,
        reactions: ReactionSettings,
        previous_mono: float | None,
    ) -> None:
        """The reaction's I/O, then :class:`FeedbackReady` (or a note saying why not)."""
        link = reaction.link
        try:
            if reaction.kind == "auto_merge":
                await self._merge(issue, link, reactions)
                return
            if reaction.kind == "ci_failure":
                prompt = ci_prompt(link, await self._logs(link, reactions))
            elif reaction.kind == "review_comments":
                prompt = review_prompt(link)
            else:
                prompt = conflict_prompt(link)
            fresh = await self._active(issue, reactions)
        except Exception as exc:  # any failure gives the issue back (``ready``)
            why = exc if isinstance(exc, TrackerError) else f"{type(exc).__name__}: {exc}"
            note = f"{reaction.kind}: not acted on, tried again at the next read ({why})"
            self._mailbox.post(
                FeedbackReady(
                    issue,
                    reaction.kind,
                    issue.id,
                    note=note,
                    reaction_key=reaction.key,
                    previous_mono=previous_mono,
                )
            )
            return
        self._mailbox.post(
            FeedbackReady(
                fresh,
                reaction.kind,
                issue.id,
                prompt=prompt,
                reaction_key=reaction.key,
                previous_mono=previous_mono,
            )
        )

    async def _logs(self, link: PullRequestLink, reactions: ReactionSettings) -> dict[str, str]:
        out: dict[str, str] = {}
        mask = self._mask()
        for check in link.failed_checks[:MAX_FAILED_JOBS]:
            if check.job_id is None:
                continue
            try:
                text = await self.pulls.job_log_tail(check.job_id)
            except TrackerError as exc:
                if _passing(exc):
                    raise  # the reaction waits for the next read rather than go without its log
                log.warning("job log read failed job=%s error=%s", check.job_id, exc)
                continue
            out[check.label] = log_excerpt(text, reactions.log_lines, reactions.log_chars, mask)
        return out

    def _mask(self) -> Callable[[str], str]:
        own = getattr(self._tracker, "redact", None)
        if own is None:
            return redact
        return lambda text: redact(own(text))

    async def _active(self, issue: Issue, reactions: ReactionSettings) -> Issue:
        """The issue as it is now, moved back to an active state when it left them
        (``rework_state``, default the first active state)."""
        tracker = self._state.settings.tracker
        fresh = await self._tracker.fetch_issues_by_ids([issue.id])
        current = fresh[0] if fresh else issue
        if tracker.is_active(current.state) or tracker.is_terminal(current.state):
            return current
        target = reactions.rework_state or (tracker.active_states or ("",))[0]
        if not target:
            return current
        moved = await self._tracker.move_issue(issue.id, target)
        self._mailbox.post(
            SystemNoted(
                EventKind.FEEDBACK, f"{issue.identifier} moved back to {moved.state}", moved
            )
        )
        return moved

    async def _merge(
        self, issue: Issue, link: PullRequestLink, reactions: ReactionSettings
    ) -> None:
        check = await self.pulls.required_checks(link.number)
        if not check.ready or check.head != link.head_sha:
            why = check.why if check.head == link.head_sha else "the head moved since the read"
            merged, said = False, f"not merged: {why}"
        else:
            merged, said = await self.pulls.merge(link.number, check.head, reactions.merge_method)
            said = "merged" if merged else f"merge refused: {said}"
        message = f"auto_merge: pull request #{link.number} {said}"
        self._mailbox.post(FeedbackReady(issue, "auto_merge", issue.id, note=message))
        self._audit.record(
            "auto-merge", who=WHO, via="github reactions", issue=issue.identifier,
            detail=f"#{link.number} at {check.head[:12]}", ok=merged, message=said,
        )  # fmt: skip

    def _label_commands(
        self, issue: Issue, labels: tuple[str, ...], reactions: ReactionSettings
    ) -> None:
        wanted = {reactions.retry_label.lower(): "retry", reactions.stop_label.lower(): "stop"}
        for label in labels:
            command = wanted.get(label.lower())
            key = f"label:{issue.id}:{label.lower()}"
            if command is None or key in self._acting:
                continue
            self._acting.add(key)
            if key not in self._label_failed:
                self._note(issue, f"label {label}: {command} {issue.identifier}")
            self._mailbox.spawn(
                self._label_command(issue, label, command, key), name=f"label-{issue.id}"
            )

    async def _label_command(self, issue: Issue, label: str, command: str, key: str) -> None:
        try:
            await self.pulls.remove_label(_number(issue.id), label)
        except TrackerError as exc:
            note = f"label {label}: not removed, nothing done until it is ({exc})"
            self._mailbox.post(FeedbackReady(issue, "label", key, note=note, failed=True))
            return
        order: Command = Rerun(issue_id=issue.id) if command == "retry" else Stop(issue_id=issue.id)
        result = await self._send(order, who=f"{WHO} label {label}", via="github label")
        if command == "stop" and not result.ok:
            self._mailbox.post(FeedbackHold(issue, label))
        note = f"label {label}: {result.message}"
        self._mailbox.post(FeedbackReady(issue, "label", key, note=note, reset=command == "retry"))

    def _note(self, issue: Issue, message: str) -> None:
        self._state.emit_system(EventKind.FEEDBACK, message, issue=issue)

    def _tell_once(self, issue: Issue, done: IssueReactions, key: str, message: str) -> None:
        if key not in done.told:
            done.told.add(key)
            self._note(issue, message)


_PASSING_STATUS = re.compile(r"HTTP (?:5\d\d|429)\b")


def _passing(exc: TrackerError) -> bool:
    """A failure the next read may not meet: no answer, a rate limit, a 5xx or 429. A log
    that is gone (404, 410) or refused (403) is not, and the turn goes without it."""
    return exc.portable in ("tracker_request", "tracker_rate_limited") or bool(
        _PASSING_STATUS.match(exc.message)
    )


def _number(issue_id: str) -> int | None:
    text = str(issue_id).strip().removeprefix("GH-").removeprefix("#")
    return int(text) if text.isdigit() else None


def _git_branch(path: Path) -> str | None:
    """The branch checked out in ``path`` (None: no checkout, detached, or main/master)."""
    if not (path / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(path), "symbolic-ref", "--quiet", "--short", "HEAD"],
            capture_output=True, timeout=GIT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    branch = done.stdout.decode(errors="replace").strip()
    return branch if done.returncode == 0 and branch not in ("", "main", "master") else None
