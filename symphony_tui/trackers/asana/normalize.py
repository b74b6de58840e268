"""Asana tasks -> :class:`~symphony_tui.domain.Issue` (spec §4.1.1, §11.3), as the reference's
Asana adapter: ``id`` is the task ``gid``, ``identifier`` ``ASANA-<gid>``, ``state`` the name of
the task's section in the configured project, ``url`` its ``permalink_url``, ``labels`` its
tag names (trimmed, lowercased, deduplicated), ``assignees`` the assignee's ``gid``.
``blocked_by`` holds the task's ``dependencies`` (Asana's "blocked by"), each with the state of
the dependency when it is known (its section in the project; a completed dependency is in the
first terminal state).

A task that is ``completed``, or a section-row separator (``resource_subtype`` ``section``),
is never dispatchable (:func:`startable`).

A record without a string ``gid``, a non-blank ``name`` or a section in the configured project
raises ``TrackerError("tracker_response")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symphony_tui.domain import BlockerRef, Issue
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.rest import parse_time

#: ``opt_fields`` of every task read (each one the description lists for the operation).
FIELDS = (
    "name",
    "notes",
    "completed",
    "resource_subtype",
    "assignee",
    "tags.name",
    "memberships.project",
    "memberships.section",
    "memberships.section.name",
    "permalink_url",
    "created_at",
    "modified_at",
    "dependencies",
)


def identifier(gid: str) -> str:
    return f"ASANA-{gid}"


def section(raw: Any, project_gid: str) -> tuple[str | None, str | None]:
    """(section gid, section name) of the task's membership in ``project_gid``."""
    memberships = raw.get("memberships") if isinstance(raw, dict) else None
    for member in memberships if isinstance(memberships, list) else []:
        if not isinstance(member, dict):
            continue
        project = member.get("project") if isinstance(member.get("project"), dict) else {}
        if project.get("gid") != project_gid:
            continue
        sec = member.get("section") if isinstance(member.get("section"), dict) else {}
        name = sec.get("name")
        gid = sec.get("gid")
        return (
            gid if isinstance(gid, str) else None,
            name.strip() if isinstance(name, str) and name.strip() else None,
        )
    return None, None


def in_project(raw: Any, project_gid: str) -> bool:
    memberships = raw.get("memberships") if isinstance(raw, dict) else None
    return any(
        isinstance(m, dict) and isinstance(m.get("project"), dict)
        and m["project"].get("gid") == project_gid
        for m in (memberships if isinstance(memberships, list) else [])
    )  # fmt: skip


def startable(raw: Any) -> bool:
    """Not completed and not a section separator."""
    return (
        isinstance(raw, dict)
        and raw.get("completed") is not True
        and raw.get("resource_subtype") != "section"
    )


def dependency_gids(raw: Any) -> list[str]:
    deps = raw.get("dependencies") if isinstance(raw, dict) else None
    return [
        d["gid"]
        for d in (deps if isinstance(deps, list) else [])
        if isinstance(d, dict) and isinstance(d.get("gid"), str)
    ]


def state_of(raw: Any, project_gid: str, done: str | None) -> str | None:
    """A dependency's state: ``done`` when completed, else its section in the project."""
    if isinstance(raw, dict) and raw.get("completed") is True and done:
        return done
    return section(raw, project_gid)[1]


def normalize_task(raw: Any, project_gid: str, known: Mapping[str, Any], done: str | None) -> Issue:
    """One task -> :class:`Issue`; ``known`` maps gids to task records whose state a
    dependency takes, ``done`` is the state a completed dependency is in. Raises
    ``tracker_response`` when malformed."""
    gid = raw.get("gid") if isinstance(raw, dict) else None
    name = raw.get("name") if isinstance(raw, dict) else None
    state = section(raw, project_gid)[1] if isinstance(raw, dict) else None
    missing = [
        key
        for key, value in (("gid", gid), ("name", name), ("section", state))
        if not isinstance(value, str) or not value.strip()
    ]
    if missing:
        ref = gid if isinstance(gid, str) else "?"
        raise TrackerError("tracker_response", f"task {ref:.40} lacks {', '.join(missing)}")
    notes = raw.get("notes")
    assignee = raw.get("assignee") if isinstance(raw.get("assignee"), dict) else {}
    who = assignee.get("gid")
    blockers = tuple(
        BlockerRef(id=d, identifier=identifier(d), state=state_of(known.get(d), project_gid, done))
        for d in dependency_gids(raw)
    )
    return Issue(
        id=gid,
        identifier=identifier(gid),
        title=name.strip(),
        description=notes.strip() or None if isinstance(notes, str) else None,
        state=state,
        url=raw.get("permalink_url") if isinstance(raw.get("permalink_url"), str) else None,
        labels=_labels(raw.get("tags")),
        assignees=(who,) if isinstance(who, str) and who else (),
        assignee_id=who if isinstance(who, str) and who else None,
        native_ref={"project_gid": project_gid, "gid": gid},
        # A completed task keeps its section but is never dispatched; the tracker narrows the
        # rest (blockers, assignee): AsanaTracker._route.
        dispatchable=startable(raw),
        blocked_by=blockers,
        created_at=parse_time(raw.get("created_at")),
        updated_at=parse_time(raw.get("modified_at")),
    )


def _labels(tags: Any) -> tuple[str, ...]:
    out: list[str] = []
    for tag in tags if isinstance(tags, list) else []:
        name = tag.get("name") if isinstance(tag, dict) else None
        if isinstance(name, str) and name.strip() and name.strip().lower() not in out:
            out.append(name.strip().lower())
    return tuple(out)
