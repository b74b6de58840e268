"""Linear issue nodes -> :class:`~symphony_tui.domain.Issue` (spec §4.1.1, §11.3).

Input is one ``nodes`` entry selected by ``SymphonyIssueFields`` in :mod:`.queries`.
Rules: labels lowercased; ``blocked_by`` from inverse relations whose type is ``blocks``;
priority an integer or ``None`` (Linear sends a number; integral floats count, anything else
is ``None``); ``createdAt`` / ``updatedAt`` parsed as ISO-8601 (unparseable -> ``None``).
A node without a string ``id``, ``identifier``, ``title`` or ``state.name`` raises
``TrackerError("linear_unknown_payload")``: the schema guarantees them, so their absence means
the payload is not what we asked for.

``assignee_id`` is the assignee's user id. ``dispatchable`` is false when an assignee filter
is set and the issue is not assigned to it, or when a ``Todo`` issue has a blocker that is
not in a terminal state (unknown counts as open). ``native_ref`` is null: Linear's issue id is
the dispatch id.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from symphony_tui.domain import BlockerRef, Issue, IssueComment
from symphony_tui.trackers.base import TrackerError, todo_waits_for_blockers


def _never_terminal(_state: str) -> bool:
    return False


def normalize_issue(
    node: Any,
    *,
    is_terminal: Callable[[str], bool] = _never_terminal,
    assignee: str | None = None,
) -> Issue:
    """One issue node -> :class:`Issue`. ``is_terminal`` tells blocker states apart
    (``tracker.terminal_states``); ``assignee`` is the resolved assignee filter (a user id,
    or ``None`` for none). Raises :class:`TrackerError` on a malformed node."""
    if not isinstance(node, dict):
        raise TrackerError("linear_unknown_payload", f"issue node is {type(node).__name__}")
    required = {
        "id": node.get("id"),
        "identifier": node.get("identifier"),
        "title": node.get("title"),
        "state": _name(node.get("state")),
    }
    missing = [k for k, v in required.items() if not isinstance(v, str) or not v]
    if missing:
        ref = node.get("identifier") or node.get("id") or "?"
        raise TrackerError(
            "linear_unknown_payload", f"issue {ref!s:.40} lacks {', '.join(sorted(missing))}"
        )
    description = node.get("description")
    blockers = extract_blockers(node.get("inverseRelations"))
    owner = assignee_id(node)
    dispatchable = (assignee is None or owner == assignee) and not todo_waits_for_blockers(
        required["state"], blockers, is_terminal
    )
    return Issue(
        id=required["id"],
        identifier=required["identifier"],
        title=required["title"],
        description=description if isinstance(description, str) else None,
        priority=parse_priority(node.get("priority")),
        state=required["state"],
        branch_name=_str_or_none(node.get("branchName")),
        url=_str_or_none(node.get("url")),
        labels=extract_labels(node.get("labels")),
        blocked_by=blockers,
        assignee_id=owner,
        dispatchable=dispatchable,
        created_at=parse_timestamp(node.get("createdAt")),
        updated_at=parse_timestamp(node.get("updatedAt")),
        assignees=assignee_names(node),
    )


def assignee_id(node: Any) -> str | None:
    """The ``assignee.id`` of an issue node, if any."""
    if isinstance(node, dict) and isinstance(node.get("assignee"), dict):
        return _str_or_none(node["assignee"].get("id"))
    return None


def assignee_names(node: Any) -> tuple[str, ...]:
    """The assignee's ``displayName`` (Linear has one assignee), or ``()``."""
    if isinstance(node, dict) and isinstance(node.get("assignee"), dict):
        name = _str_or_none(node["assignee"].get("displayName"))
        return (name,) if name else ()
    return ()


def extract_comments(connection: Any) -> tuple[IssueComment, ...]:
    """``comments { nodes { id body createdAt url user { displayName } botActor { name } } }``
    -> comments sorted oldest first; the author is the user's display name, else the bot's
    name. Nodes without a text ``body`` are skipped."""
    out = []
    for node in _nodes(connection):
        body = node.get("body")
        if not isinstance(body, str):
            continue
        user, bot = node.get("user"), node.get("botActor")
        author = _str_or_none(user.get("displayName")) if isinstance(user, dict) else None
        if author is None and isinstance(bot, dict):
            author = _str_or_none(bot.get("name"))
        out.append(
            IssueComment(
                id=_str_or_none(node.get("id")),
                author=author,
                body=body,
                created_at=parse_timestamp(node.get("createdAt")),
                url=_str_or_none(node.get("url")),
            )
        )
    far_past = datetime.min.replace(tzinfo=UTC)
    return tuple(sorted(out, key=lambda c: c.created_at or far_past))


def parse_priority(value: Any) -> int | None:
    """Integer priority or ``None`` (spec §11.3: non-integers become null)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_timestamp(value: Any) -> datetime | None:
    """ISO-8601 (``Z`` or an offset) -> datetime; anything else -> ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def extract_labels(connection: Any) -> tuple[str, ...]:
    """``labels { nodes { name } }`` -> lowercase names, order kept, duplicates dropped."""
    out: list[str] = []
    for node in _nodes(connection):
        name = node.get("name")
        if isinstance(name, str) and name.strip():
            label = name.strip().lower()
            if label not in out:
                out.append(label)
    return tuple(out)


def extract_blockers(connection: Any) -> tuple[BlockerRef, ...]:
    """Inverse relations of type ``blocks`` -> blocker refs (the relation's ``issue``)."""
    out: list[BlockerRef] = []
    for node in _nodes(connection):
        kind = node.get("type")
        blocker = node.get("issue")
        if not isinstance(kind, str) or kind.strip().lower() != "blocks":
            continue
        if not isinstance(blocker, dict):
            # The token may not see the blocking issue; it still blocks.
            out.append(BlockerRef())
            continue
        out.append(
            BlockerRef(
                id=_str_or_none(blocker.get("id")),
                identifier=_str_or_none(blocker.get("identifier")),
                state=_name(blocker.get("state")),
            )
        )
    return tuple(out)


def _nodes(connection: Any) -> list[dict]:
    if not isinstance(connection, dict) or not isinstance(connection.get("nodes"), list):
        return []
    return [n for n in connection["nodes"] if isinstance(n, dict)]


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        return _str_or_none(value.get("name"))
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
