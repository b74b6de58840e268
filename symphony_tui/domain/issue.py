"""The normalized tracker issue (spec §4.1.1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class BlockerRef(BaseModel):
    """An issue that blocks another one (spec §4.1.1 ``blocked_by``).

    Any field may be unknown (``None``): a Linear relation can point at an issue the
    token cannot read.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str | None = None
    identifier: str | None = None
    state: str | None = None


class IssueComment(BaseModel):
    """A comment on an issue, for the prompt (``issue.comments``): ``author`` as the tracker
    names people (GitHub: login; Linear: display name), ``body`` as written (Markdown)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str | None = None
    author: str | None = None
    body: str = ""
    created_at: datetime | None = None
    url: str | None = None


class Issue(BaseModel):
    """One tracker issue, normalized across trackers (spec §4.1.1).

    ``priority`` is an integer where lower is more urgent (Linear: 1 urgent .. 4 low); only
    1..4 rank ahead, any other value and ``None`` sort last (§8.2). ``labels`` are lowercase.
    Timestamps are timezone-aware when the tracker gives an offset.

    ``id`` is an opaque dispatch identity (it may name a board entry rather than the
    ticket); ``native_ref`` holds non-secret provider identifiers for the adapter's tools
    and the prompt, never read by the scheduler (§4.2). ``dispatchable`` is the adapter's
    verdict on its own routing rules (assignment, board membership, blockers): every adapter
    sets it explicitly; the default only serves issues built outside an adapter (samples,
    recovered manifests). States keep the tracker's spelling and are compared trimmed and
    lowercased (:func:`state_key`).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    identifier: str
    title: str
    description: str | None = None
    priority: int | None = None
    state: str
    branch_name: str | None = None
    url: str | None = None
    labels: tuple[str, ...] = ()
    # Who the issue is assigned to, as the tracker names them (GitHub: logins); an addition
    # to spec §4.1.1, empty when the tracker does not say.
    assignees: tuple[str, ...] = ()
    blocked_by: tuple[BlockerRef, ...] = ()
    native_ref: dict[str, Any] | None = None
    assignee_id: str | None = None
    dispatchable: bool = True
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # Prompt inputs beyond spec §4.1.1, filled by the trackers that have them (empty
    # otherwise): the issue's comments, oldest first (GitHub and Linear read them when a
    # prompt uses them, scheduler/worker.py), and the repository it belongs to (owner/name).
    comments: tuple[IssueComment, ...] = ()
    repository: str | None = None

    def template_view(self) -> dict:
        """The ``issue`` object given to the prompt template (spec §5.4): plain, JSON-like,
        with ``assignee`` (the first of ``assignees``, or null) beside the list."""
        data = self.model_dump(mode="json")
        data["labels"] = list(self.labels)
        data["assignees"] = list(self.assignees)
        data["assignee"] = self.assignees[0] if self.assignees else None
        data["blocked_by"] = [b.model_dump(mode="json") for b in self.blocked_by]
        # ``author_name``: the same author, under the name some ports' prompts use.
        data["comments"] = [
            {**c.model_dump(mode="json"), "author_name": c.author} for c in self.comments
        ]
        return data


def state_key(state: str | None) -> str:
    """A state name as the scheduler compares it (§4.2): trimmed and lowercased."""
    return (state or "").strip().lower()


class IssueStateChange(BaseModel):
    """Result of a tracker state move: the issue as it is after the change."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    issue_id: str
    from_state: str | None = None
    to_state: str
    note: str = Field(default="")
