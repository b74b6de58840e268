"""GitHub issues -> :class:`~symphony_tui.domain.Issue` (spec §4.1.1), from REST objects
(``GET /repos/{owner}/{repo}/issues``) and from GraphQL ``Issue`` nodes (:mod:`.queries`).

Identity as the reference's adapter: ``id`` is the issue number as a string, ``identifier``
``GH-<number>``; labels lowercased; ``url`` the web URL. Pull requests (REST items with a
``pull_request`` key) are not issues and are dropped by the callers.

The **state** is decided by :func:`state_of` from the issue's open/closed state, its labels
(``tracker.state_labels``) and its board status (``tracker.project``). **Priority** comes from
the board's priority field when it has one, else from ``tracker.priority_labels`` (the lowest
number among the issue's labels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from symphony_tui.config.settings import TrackerSettings
from symphony_tui.domain import BlockerRef, Issue, IssueComment
from symphony_tui.trackers.base import TrackerError


@dataclass(frozen=True)
class BoardValues:
    """One issue's values on the configured board: ``status`` (option name) and
    ``priority`` (an int, or ``None``)."""

    status: str | None
    priority: int | None = None
    item_id: str | None = None


def identifier(number: int) -> str:
    return f"GH-{number}"


def state_of(
    open_: bool, labels: Iterable[str], board: BoardValues | None, tracker: TrackerSettings
) -> str | None:
    """The issue's state name: the board status with a board (``None`` when the issue is not
    on the board or has no status; ``closed`` for a closed issue whose status is not a
    terminal state, so it is not worked on); else, with ``state_labels``, the first of them the open
    issue carries (``open`` when none); else ``open`` / ``closed``. A closed issue is
    ``closed`` without a board."""
    if tracker.project is not None:
        status = board.status if board is not None and board.status else None
        if status is not None and not open_ and not tracker.is_terminal(status):
            return "closed"  # closed on GitHub while the board still says it is in play
        return status
    if not open_:
        return "closed"
    have = {label.lower() for label in labels}
    for name in tracker.state_labels:
        if name.strip().lower() in have:
            return name
    return "open"


def label_priority(labels: Iterable[str], tracker: TrackerSettings) -> int | None:
    """The lowest ``tracker.priority_labels`` value among ``labels`` (lowercase), or None."""
    found = [tracker.priority_labels[label] for label in labels if label in tracker.priority_labels]
    return min(found) if found else None


def from_rest(
    item: Any,
    tracker: TrackerSettings,
    board: BoardValues | None = None,
    blocked_by: tuple[BlockerRef, ...] = (),
) -> Issue | None:
    """A REST issue object -> Issue; ``None`` when its state is unknown (not on the board).
    Raises ``TrackerError("github_unknown_payload")`` when number, title or state lack."""
    if not isinstance(item, dict):
        raise TrackerError("github_unknown_payload", f"issue is {type(item).__name__}")
    number = item.get("number")
    title = item.get("title")
    rest_state = item.get("state")
    if not _number(number) or not isinstance(title, str) or rest_state not in ("open", "closed"):
        raise TrackerError(
            "github_unknown_payload", f"issue {number!r:.20} lacks number/title/state"
        )
    labels = _labels(item.get("labels"), lambda x: x.get("name") if isinstance(x, dict) else x)
    state = state_of(rest_state == "open", labels, board, tracker)
    if state is None:
        return None
    return _issue(
        number, title, item.get("body"), state, labels, board, tracker,
        url=item.get("html_url"),
        assignees=assignees_rest(item),
        created=item.get("created_at"),
        updated=item.get("updated_at"),
        blocked_by=blocked_by,
    )  # fmt: skip


def from_graphql(
    node: Any, tracker: TrackerSettings, board: BoardValues | None = None
) -> Issue | None:
    """A GraphQL ``Issue`` node (``ISSUE_FIELDS`` of :mod:`.queries`) -> Issue; ``None``
    when its state is unknown. Raises like :func:`from_rest`."""
    if not isinstance(node, dict):
        raise TrackerError("github_unknown_payload", f"issue node is {type(node).__name__}")
    number = node.get("number")
    title = node.get("title")
    state = node.get("state")
    if not _number(number) or not isinstance(title, str) or state not in ("OPEN", "CLOSED"):
        raise TrackerError(
            "github_unknown_payload", f"issue {number!r:.20} lacks number/title/state"
        )
    labels = _labels(_nodes(node.get("labels")), lambda x: x.get("name"))
    name = state_of(state == "OPEN", labels, board, tracker)
    if name is None:
        return None
    return _issue(
        number, title, node.get("body"), name, labels, board, tracker,
        url=node.get("url"),
        assignees=tuple(
            a["login"] for a in _nodes(node.get("assignees")) if isinstance(a.get("login"), str)
        ),
        created=node.get("createdAt"),
        updated=node.get("updatedAt"),
    )  # fmt: skip


def _issue(
    number: int,
    title: str,
    body: Any,
    state: str,
    labels: tuple[str, ...],
    board: BoardValues | None,
    tracker: TrackerSettings,
    *,
    url: Any,
    assignees: tuple[str, ...],
    created: Any,
    updated: Any,
    blocked_by: tuple[BlockerRef, ...] = (),
) -> Issue:
    """The :class:`Issue` both API shapes come to: the board's priority first, else the
    labels' (``priority_labels``)."""
    priority = board.priority if board is not None else None
    native_ref: dict[str, Any] = {"repository": tracker.repo, "number": number}
    if board is not None and board.item_id:
        native_ref["project_item_id"] = board.item_id
    return Issue(
        id=str(number),
        identifier=identifier(number),
        native_ref=native_ref,
        assignee_id=assignees[0] if assignees else None,
        dispatchable=True,  # the tracker narrows it (assignee, blockers): GitHubTracker._route
        title=title,
        description=body if isinstance(body, str) else None,
        priority=priority if priority is not None else label_priority(labels, tracker),
        state=state,
        url=_str(url),
        labels=labels,
        assignees=assignees,
        blocked_by=blocked_by,
        created_at=parse_timestamp(created),
        updated_at=parse_timestamp(updated),
        repository=tracker.repo,
    )


def assignees_rest(item: Mapping[str, Any]) -> tuple[str, ...]:
    """Logins of a REST issue's ``assignees``."""
    return tuple(
        a["login"]
        for a in item.get("assignees") or []
        if isinstance(a, dict) and isinstance(a.get("login"), str)
    )


def comments_rest(items: Any) -> tuple[IssueComment, ...]:
    """``GET /repos/{owner}/{repo}/issues/{n}/comments`` items -> comments, oldest first
    (GitHub's order); the author is the user's login. Items without a text body are
    skipped."""
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("body"), str):
            continue
        user = item.get("user")
        out.append(
            IssueComment(
                id=str(item["id"]) if _number(item.get("id")) else None,
                author=_str(user.get("login")) if isinstance(user, dict) else None,
                body=item["body"],
                created_at=parse_timestamp(item.get("created_at")),
                url=_str(item.get("html_url")),
            )
        )
    return tuple(out)


def blocker_count(item: Mapping[str, Any]) -> int:
    """``issue_dependencies_summary.blocked_by`` (open blockers) of a REST issue; 0 if
    GitHub did not send the summary."""
    summary = item.get("issue_dependencies_summary")
    if not isinstance(summary, dict):
        return 0
    value = summary.get("total_blocked_by", summary.get("blocked_by"))
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def blocker_ref(item: Any, state: str | None) -> BlockerRef:
    """One entry of ``/dependencies/blocked_by`` -> a blocker ref with ``state``."""
    if not isinstance(item, dict):
        return BlockerRef()
    number = item.get("number")
    return BlockerRef(
        id=str(number) if _number(number) else None,
        identifier=identifier(number) if _number(number) else None,
        state=state,
    )


def parse_timestamp(value: Any) -> datetime | None:
    """ISO-8601 (``Z`` or an offset) -> datetime; anything else -> ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _labels(items: Any, name_of: Any) -> tuple[str, ...]:
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        name = name_of(item)
        if isinstance(name, str) and name.strip():
            label = name.strip().lower()
            if label not in out:
                out.append(label)
    return tuple(out)


def _nodes(connection: Any) -> list[Any]:
    if isinstance(connection, dict) and isinstance(connection.get("nodes"), list):
        return [n for n in connection["nodes"] if isinstance(n, dict)]
    return []


def _number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
