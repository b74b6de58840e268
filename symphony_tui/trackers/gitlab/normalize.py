"""GitLab issues (REST v4 ``Issue`` entities) -> :class:`~symphony_tui.domain.Issue` (spec
§4.1.1, §11.3), as the reference's GitLab adapter: ``id`` is the project-scoped ``iid`` as a
string, ``identifier`` ``GL-<iid>``, ``url`` the ``web_url``.

The **state** (:func:`state_of`): a closed issue is ``closed``; an open one is the first of
``tracker.state_labels`` it carries (so labels such as ``Todo`` / ``In Progress`` / ``Human
Review`` are states), else ``opened``. Labels are trimmed, lowercased and deduplicated;
``priority`` is the lowest ``tracker.priority_labels`` number among them. ``assignees`` are
usernames.

A record without a positive integer ``iid``, a non-blank ``title`` or a ``state`` of
``opened`` / ``closed`` raises ``TrackerError("tracker_response")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from symphony_tui.config.settings import TrackerSettings
from symphony_tui.domain import BlockerRef, Issue
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.rest import parse_time


def identifier(iid: int) -> str:
    return f"GL-{iid}"


def state_of(opened: bool, labels: Iterable[str], tracker: TrackerSettings) -> str:
    if not opened:
        return "closed"
    have = {label.strip().lower() for label in labels if isinstance(label, str)}
    for name in tracker.state_labels:
        if name.strip().lower() in have:
            return name
    return "opened"


def normalize_issue(raw: Any, tracker: TrackerSettings) -> Issue:
    """One issue entity -> :class:`Issue`. Raises ``tracker_response`` when malformed."""
    if not isinstance(raw, dict):
        raise TrackerError("tracker_response", f"issue record is {type(raw).__name__}")
    iid, title, state = raw.get("iid"), raw.get("title"), raw.get("state")
    missing = []
    if not isinstance(iid, int) or isinstance(iid, bool) or iid <= 0:
        missing.append("iid")
    if not isinstance(title, str) or not title.strip():
        missing.append("title")
    if state not in ("opened", "closed"):
        missing.append("state")
    if missing:
        ref = iid if isinstance(iid, int) else raw.get("id", "?")
        raise TrackerError("tracker_response", f"issue {ref!s:.40} lacks {', '.join(missing)}")
    names = [label for label in raw.get("labels") or [] if isinstance(label, str)]
    description = raw.get("description")
    people = assignees(raw)
    return Issue(
        id=str(iid),
        identifier=identifier(iid),
        title=title.strip(),
        description=description.strip() or None if isinstance(description, str) else None,
        priority=priority(names, tracker),
        state=state_of(state == "opened", names, tracker),
        url=raw.get("web_url") if isinstance(raw.get("web_url"), str) else None,
        labels=labels(names),
        assignees=people,
        assignee_id=people[0] if people else None,
        native_ref={"project_path": tracker.project_path, "iid": iid},
        dispatchable=True,  # the tracker narrows it (blockers, assignee): GitLabTracker._route
        created_at=parse_time(raw.get("created_at")),
        updated_at=parse_time(raw.get("updated_at")),
    )


def blocker(raw: Any, tracker: TrackerSettings) -> BlockerRef | None:
    """A ``GET .../links`` entry -> a blocker ref when its ``link_type`` is
    ``is_blocked_by`` (the linked issue blocks this one), else ``None``."""
    if not isinstance(raw, dict) or raw.get("link_type") != "is_blocked_by":
        return None
    iid = raw.get("iid")
    state = raw.get("state")
    names = [label for label in raw.get("labels") or [] if isinstance(label, str)]
    known = state in ("opened", "closed")
    return BlockerRef(
        id=str(iid) if isinstance(iid, int) else None,
        identifier=identifier(iid) if isinstance(iid, int) else None,
        state=state_of(state == "opened", names, tracker) if known else None,
    )


def labels(names: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        label = name.strip().lower()
        if label and label not in out:
            out.append(label)
    return tuple(out)


def priority(names: Iterable[str], tracker: TrackerSettings) -> int | None:
    ranks = [
        tracker.priority_labels[n.strip().lower()]
        for n in names
        if n.strip().lower() in tracker.priority_labels
    ]
    return min(ranks) if ranks else None


def assignees(raw: dict) -> tuple[str, ...]:
    out: list[str] = []
    people = raw.get("assignees") if isinstance(raw.get("assignees"), list) else []
    if not people and isinstance(raw.get("assignee"), dict):
        people = [raw["assignee"]]
    for person in people:
        name = person.get("username") if isinstance(person, dict) else None
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return tuple(out)
