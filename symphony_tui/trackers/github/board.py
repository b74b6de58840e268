"""A GitHub Projects (v2) board as the issue state (``tracker.project``; GitHub GraphQL API,
"Using the API to manage Projects").

The board is read once (its id, the status field and its options, the priority field) and
kept until a move fails on it. Items are read 100 a page following ``pageInfo.endCursor`` to
the end; only issues of the configured repository count. An issue's state is its status
option's name; priority is the priority field's number, or the 1-based position of its
single-select option (first option = most urgent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.config.settings import Settings
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.github import queries
from symphony_tui.trackers.github.client import GitHubClient
from symphony_tui.trackers.github.normalize import BoardValues

_MAX_PAGES = 500


@dataclass
class BoardInfo:
    """What the board is: ids of the project and status field, status options (name ->
    option id, in board order) and the priority options (option name -> rank)."""

    project_id: str
    status_field_id: str
    options: dict[str, str]
    priority_ranks: dict[str, int] = field(default_factory=dict)
    #: What ``tracker.project.priority_field`` names on the board: ``"single_select"``,
    #: ``"number"``, another field's data type (``"TEXT"``...), or None (no such field).
    priority_kind: str | None = None


class Board:
    """Reads and moves issues on ``tracker.project`` through ``client``."""

    def __init__(self, settings: Callable[[], Settings], client: GitHubClient) -> None:
        self._settings = settings
        self._client = client
        self._info: BoardInfo | None = None
        self._key: tuple[Any, ...] | None = None

    async def info(self) -> BoardInfo:
        """The board (read once per configuration). Raises ``github_unknown_project`` when
        the owner has no such project or it has no single-select status field."""
        tracker = self._settings().tracker
        project = tracker.project
        if project is None:
            raise TrackerError("github_unknown_project", "tracker.project is not set")
        owner = project.owner or (tracker.repo or "").split("/")[0]
        key = (owner, project.number, project.status_field, project.priority_field)
        if self._info is not None and self._key == key:
            return self._info
        data = await self._client.graphql(
            queries.BOARD,
            {"owner": owner, "number": project.number, "statusField": project.status_field},
        )
        board = (data.get("repositoryOwner") or {}).get("projectV2")
        if not isinstance(board, dict) or not isinstance(board.get("id"), str):
            raise TrackerError(
                "github_unknown_project", f"{owner} has no project number {project.number}"
            )
        status = board.get("field")
        if not isinstance(status, dict) or not isinstance(status.get("options"), list):
            raise TrackerError(
                "github_unknown_project",
                f"project {project.number} has no single-select field {project.status_field!r}",
            )
        options = {
            o["name"]: o["id"]
            for o in status["options"]
            if isinstance(o, dict) and isinstance(o.get("name"), str)
        }
        info = BoardInfo(board["id"], status["id"], options)
        if project.priority_field:
            data = await self._client.graphql(
                queries.PRIORITY_FIELD,
                {"projectId": info.project_id, "priorityField": project.priority_field},
            )
            prio = (data.get("node") or {}).get("field") or {}
            if prio.get("__typename") == "ProjectV2SingleSelectField":
                info.priority_kind = "single_select"
            elif prio.get("__typename"):
                kind = prio.get("dataType")
                info.priority_kind = "number" if kind == "NUMBER" else str(kind or "unknown")
            for rank, option in enumerate(prio.get("options") or [], start=1):
                if isinstance(option, dict) and isinstance(option.get("name"), str):
                    info.priority_ranks[option["name"]] = rank
        self._info, self._key = info, key
        return info

    def forget(self) -> None:
        """Read the board again next time (after a move failed on stale ids)."""
        self._info = None

    async def values(self) -> dict[int, BoardValues]:
        """Issue number -> its board values, for every issue of the repository on the board."""
        tracker = self._settings().tracker
        info = await self.info()
        priority = bool(tracker.project and tracker.project.priority_field)
        document = queries.board_items(priority)
        variables: dict[str, Any] = {
            "projectId": info.project_id,
            "first": queries.PAGE_SIZE,
            "statusField": tracker.project.status_field if tracker.project else "Status",
        }
        if priority and tracker.project is not None:
            variables["priorityField"] = tracker.project.priority_field
        repo = (tracker.repo or "").lower()
        out: dict[int, BoardValues] = {}
        after: str | None = None
        for _ in range(_MAX_PAGES):
            data = await self._client.graphql(document, {**variables, "after": after})
            items = (data.get("node") or {}).get("items")
            if not isinstance(items, dict) or not isinstance(items.get("nodes"), list):
                raise TrackerError("github_unknown_payload", "board answer has no items.nodes")
            for node in items["nodes"]:
                content = node.get("content") if isinstance(node, dict) else None
                if not isinstance(content, dict) or content.get("__typename") != "Issue":
                    continue  # draft issues and pull requests are not issues to work on
                where = (content.get("repository") or {}).get("nameWithOwner", "")
                if str(where).lower() != repo or not isinstance(content.get("number"), int):
                    continue
                out[content["number"]] = self.item_values(node, info)
            page = items.get("pageInfo") or {}
            if page.get("hasNextPage") is not True:
                return out
            cursor = page.get("endCursor")
            if not isinstance(cursor, str) or not cursor or cursor == after:
                raise TrackerError("github_unknown_payload", "board pageInfo.endCursor is empty")
            after = cursor
        raise TrackerError("github_unknown_payload", f"board has more than {_MAX_PAGES} pages")

    def item_values(self, node: dict, info: BoardInfo) -> BoardValues:
        """One item's ``status`` / ``priority`` aliases -> :class:`BoardValues`."""
        status = node.get("status") if isinstance(node.get("status"), dict) else {}
        prio = node.get("priority") if isinstance(node.get("priority"), dict) else {}
        priority: int | None = None
        if isinstance(prio.get("number"), int | float) and not isinstance(prio.get("number"), bool):
            priority = int(prio["number"])
        elif isinstance(prio.get("name"), str):
            priority = info.priority_ranks.get(prio["name"])
        name = status.get("name") if isinstance(status.get("name"), str) else None
        item_id = node.get("id") if isinstance(node.get("id"), str) else None
        return BoardValues(status=name, priority=priority, item_id=item_id)

    def from_issue_node(self, node: dict, info: BoardInfo) -> BoardValues | None:
        """The board values of a GraphQL issue node's ``projectItems`` on this board."""
        items = (node.get("projectItems") or {}).get("nodes") or []
        for item in items:
            if isinstance(item, dict) and (item.get("project") or {}).get("id") == info.project_id:
                return self.item_values(item, info)
        return None

    async def move(self, item_id: str, state: str) -> str:
        """Set an item's status to the option named ``state`` (case-insensitive); returns
        the option's name. Raises ``github_unknown_state`` for a name the board lacks."""
        info = await self.info()
        wanted = state.strip().lower()
        match = next((n for n in info.options if n.strip().lower() == wanted), None)
        if match is None:
            known = ", ".join(info.options)
            raise TrackerError("github_unknown_state", f"no status {state!r} (board has: {known})")
        try:
            await self._client.graphql(
                queries.SET_STATUS,
                {
                    "projectId": info.project_id,
                    "itemId": item_id,
                    "fieldId": info.status_field_id,
                    "optionId": info.options[match],
                },
            )
        except TrackerError:
            self.forget()
            raise
        return match
