"""Jira Cloud issues (REST v3 ``IssueBean``) -> :class:`~symphony_tui.domain.Issue` (spec
§4.1.1, §11.3).

Input is one issue as ``POST /rest/api/3/search/jql`` or ``/issue/bulkfetch`` return it with
:data:`FIELDS`. ``id`` is Jira's immutable id, ``identifier`` the key (``SD-4``), ``state`` the
status name as Jira spells it, ``url`` ``<base_url>/browse/<key>``. ``description`` is Atlassian
Document Format, flattened to text (:func:`adf_text`). Labels are trimmed, lowercased,
deduplicated. ``priority`` maps Jira's default scheme by name (Highest 1, High 2, Medium 3,
Low and Lowest 4; the older Blocker / Critical 1, Major 2, Minor / Trivial 4); any other name
is ``None``. ``blocked_by`` comes from inward ``Blocks`` links (the linked issue "blocks" this
one), each with the blocker's status name. ``assignees`` holds the assignee's ``accountId``.

An issue whose status category is ``new`` (not started: To Do, Backlog, Open...) waits
while any blocker is not in a terminal state (:func:`waits_for_blockers`); started issues are
not held back by blockers.

A record without a string ``id``, ``key``, a ``fields`` object, a non-blank ``summary`` or a
status name raises ``TrackerError("tracker_response")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from symphony_tui.domain import BlockerRef, Issue
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.rest import parse_time

FIELDS = (
    "summary",
    "description",
    "status",
    "labels",
    "assignee",
    "priority",
    "created",
    "updated",
    "project",
    "issuelinks",
)
PRIORITIES = {
    "highest": 1,
    "blocker": 1,
    "critical": 1,
    "high": 2,
    "major": 2,
    "medium": 3,
    "low": 4,
    "lowest": 4,
    "minor": 4,
    "trivial": 4,
}
_BLOCK_TYPES = ("blocks", "blocker")
_MAX_ADF_DEPTH = 64


def normalize_issue(raw: Any, base_url: str) -> Issue:
    """One issue -> :class:`Issue`. Raises ``tracker_response`` on a malformed record."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    issue_id = raw.get("id") if isinstance(raw, dict) else None
    key = raw.get("key") if isinstance(raw, dict) else None
    if not isinstance(fields, dict):
        raise _malformed(raw, "fields")
    summary, state = fields.get("summary"), status_name(fields)
    missing = [
        name
        for name, value in (("id", issue_id), ("key", key), ("summary", summary), ("status", state))
        if not isinstance(value, str) or not value.strip()
    ]
    if missing:
        raise _malformed(raw, ", ".join(missing))
    assignee = fields.get("assignee")
    account = assignee.get("accountId") if isinstance(assignee, dict) else None
    return Issue(
        id=issue_id,
        identifier=key,
        title=summary.strip(),
        description=adf_text(fields.get("description")),
        priority=priority(fields.get("priority")),
        state=state,
        url=f"{base_url.rstrip('/')}/browse/{quote(key, safe='')}",
        labels=labels(fields.get("labels")),
        assignees=(account,) if isinstance(account, str) and account else (),
        assignee_id=account if isinstance(account, str) and account else None,
        native_ref={"key": key, "project": project_key(raw)},
        dispatchable=True,  # the tracker narrows it (blockers, assignee): JiraTracker._route
        blocked_by=blockers(fields.get("issuelinks")),
        created_at=parse_time(fields.get("created")),
        updated_at=parse_time(fields.get("updated")),
    )


def project_key(raw: Any) -> str | None:
    """``fields.project.key`` of a record, if any."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    project = fields.get("project") if isinstance(fields, dict) else None
    key = project.get("key") if isinstance(project, dict) else None
    return key if isinstance(key, str) else None


def status_name(fields: dict) -> str | None:
    status = fields.get("status")
    name = status.get("name") if isinstance(status, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def status_category(raw: Any) -> str | None:
    """``fields.status.statusCategory.key`` (``new``, ``indeterminate``, ``done``), lowercase."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    status = fields.get("status") if isinstance(fields, dict) else None
    category = status.get("statusCategory") if isinstance(status, dict) else None
    key = category.get("key") if isinstance(category, dict) else None
    return key.strip().lower() if isinstance(key, str) else None


def waits_for_blockers(raw: Any, issue: Issue, terminal_states: Iterable[str]) -> bool:
    """Whether the issue must not be dispatched yet: its status category is ``new`` (or,
    when Jira gives no category, its status is ``To Do`` / ``Todo``) and a blocker is not in
    one of ``terminal_states`` (a blocker of unknown state counts as open)."""
    category = status_category(raw)
    if category is not None:
        gated = category == "new"
    else:
        gated = issue.state.strip().lower() in ("to do", "todo")
    if not gated:
        return False
    done = {s.strip().lower() for s in terminal_states}
    return any(b.state is None or b.state.strip().lower() not in done for b in issue.blocked_by)


def blockers(links: Any) -> tuple[BlockerRef, ...]:
    """Inward links of type ``Blocks`` -> blocker refs (id, key, status name)."""
    out: list[BlockerRef] = []
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict) or not isinstance(link.get("inwardIssue"), dict):
            continue
        kind = link.get("type") if isinstance(link.get("type"), dict) else {}
        name = str(kind.get("name") or "").strip().lower()
        if name not in _BLOCK_TYPES:
            continue
        other = link["inwardIssue"]
        fields = other.get("fields") if isinstance(other.get("fields"), dict) else {}
        out.append(
            BlockerRef(
                id=_str(other.get("id")),
                identifier=_str(other.get("key")),
                state=status_name(fields),
            )
        )
    return tuple(out)


def labels(value: Any) -> tuple[str, ...]:
    out: list[str] = []
    for label in value if isinstance(value, list) else []:
        if isinstance(label, str) and label.strip() and label.strip().lower() not in out:
            out.append(label.strip().lower())
    return tuple(out)


def priority(value: Any) -> int | None:
    name = value.get("name") if isinstance(value, dict) else None
    return PRIORITIES.get(name.strip().lower()) if isinstance(name, str) else None

    text = value.strip()
    if len(text) > 5 and text[-5] in "+-" and text[-4:].isdigit():
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def adf_text(doc: Any) -> str | None:
    """Atlassian Document Format (or a plain string) -> text: paragraphs, headings, list
    items and block quotes end a line, ``hardBreak`` breaks one, mentions and emoji keep
    their text; blank -> ``None``."""
    if isinstance(doc, str):
        return doc.strip() or None
    parts: list[str] = []
    _walk(doc, parts, 0)
    text = "".join(parts)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    out = "\n".join(lines).strip("\n")
    return out or None


def _walk(node: Any, out: list[str], depth: int) -> None:
    if not isinstance(node, dict) or depth > _MAX_ADF_DEPTH:
        return
    kind = node.get("type")
    if kind == "text" and isinstance(node.get("text"), str):
        out.append(node["text"])
        return
    if kind == "hardBreak":
        out.append("\n")
        return
    attrs = node.get("attrs") if isinstance(node.get("attrs"), dict) else {}
    if kind in ("mention", "emoji", "status", "date", "inlineCard"):
        text = attrs.get("text") or attrs.get("shortName") or attrs.get("url")
        if isinstance(text, str):
            out.append(text)
        return
    if kind == "listItem":
        out.append("- ")
    for child in node.get("content") or []:
        _walk(child, out, depth + 1)
    if kind in ("paragraph", "heading", "blockquote", "codeBlock", "rule"):
        out.append("\n")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _malformed(raw: Any, what: str) -> TrackerError:
    ref = raw.get("key") or raw.get("id") if isinstance(raw, dict) else type(raw).__name__
    return TrackerError("tracker_response", f"issue {ref or '?'!s:.40} lacks {what}")
