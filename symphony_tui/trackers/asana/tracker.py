"""``tracker.kind: asana``: the tasks of one Asana project, its sections as states (spec §11;
the reference's Asana adapter, with dependencies as blockers).

**Reads**: ``GET /projects/<project_gid>/tasks`` with :data:`.normalize.FIELDS`, 100 a page
following ``next_page.offset``. Candidates ask only for incomplete tasks
(``completed_since=now``) and keep those in ``tracker.active_states`` that are neither
completed nor section rows. A task's dependencies are its blockers; one the listing did not
carry is read with ``GET /tasks/<gid>`` (and its state reused for :data:`DEPENDENCY_TTL`).
``dispatchable`` is false for a completed task, for a task in the first active state (work
not started) with a blocker not in a terminal state, and for a task not assigned to
``tracker.assignee`` when set (a user gid, or ``me``, asked once from ``GET /users/me``), in
every read. A malformed record in a state read is logged and
skipped; in a read by id it fails the read.

**Refresh by id**: ``GET /tasks/<gid>`` each (its dependencies' states as for candidates;
no ids, no request); a task Asana no longer has (404) or that left the project is absent.

**Moves**: to the project's section named ``state`` (case-insensitive; ``GET
/projects/<gid>/sections``) with ``POST /sections/<gid>/addTask``.

Auth is ``Authorization: Bearer <personal access token>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx

from symphony_tui.agents.base import ToolResult
from symphony_tui.config.settings import Settings, TrackerSettings
from symphony_tui.domain import Issue
from symphony_tui.trackers.asana import normalize
from symphony_tui.trackers.asana.profile import ASANA_PROFILE
from symphony_tui.trackers.base import TrackerError, dedupe_ids
from symphony_tui.trackers.rest import RestTracker, Vendor
from symphony_tui.trackers.rest_tool import call_rest_tool, deletes_itself, tool_spec, under

log = logging.getLogger(__name__)

LIMIT = 100
MAX_PAGES = 500
_DEPENDENCY_FIELDS = "completed,memberships.project,memberships.section.name"
DEPENDENCY_TTL = timedelta(minutes=5)
"""How long the state of a dependency read on its own is reused (it is outside the listing:
completed, or in another project, so it seldom changes)."""

ASANA_API_TOOL = tool_spec(
    "asana_api",
    "Asana",
    "/tasks/1200000000000001/stories",
    "Reads tasks, sections and the configured project; writes only on your own task "
    "(comment as a story, edit).",
)


def _headers(tracker: TrackerSettings) -> dict[str, str]:
    if not tracker.api_key:
        raise TrackerError("missing_tracker_secret", "no Asana token (tracker.api_key)")
    return {
        "Authorization": f"Bearer {tracker.api_key}",
        "Accept": "application/json",
        "User-Agent": "symphony-tui",
    }


def _base_url(tracker: TrackerSettings) -> str:
    return tracker.endpoint.rstrip("/")


def _secrets(tracker: TrackerSettings) -> tuple[str, ...]:
    return (tracker.api_key,) if tracker.api_key else ()


class AsanaTracker(RestTracker):
    """The Asana tracker (implements :class:`~symphony_tui.trackers.base.Tracker`). Methods
    raise :class:`TrackerError` with a portable category (§11.4): ``missing_tracker_secret``,
    ``invalid_tracker_config``, ``tracker_request``, ``tracker_status``,
    ``tracker_response`` (a malformed answer, an unknown section), ``tracker_pagination``,
    ``tracker_rate_limited`` (with ``retry_at``)."""

    kind = "asana"
    profile = ASANA_PROFILE
    VENDOR = Vendor("Asana", "asana", _base_url, _headers, _secrets)
    agent_tool = ASANA_API_TOOL

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(settings, transport=transport, clock=clock)
        self._me: str | None = None
        self._dependencies: dict[str, tuple[datetime, dict | None]] = {}

    # -- the Tracker protocol ----------------------------------------------------------

    async def fetch_candidate_issues(self) -> list[Issue]:
        """Incomplete tasks in ``tracker.active_states``, project order; those that may not
        start now (blockers, assignee) with ``dispatchable=False``."""
        tracker = self._tracker()
        tasks = await self._tasks(incomplete=True)
        who = await self._assignee(tracker.assignee)
        known = {t["gid"]: t for t in tasks}
        wanted = [
            t
            for t in tasks
            if normalize.startable(t)
            and tracker.is_active(normalize.section(t, self._project())[1] or "")
        ]
        missing = {d for t in wanted for d in normalize.dependency_gids(t) if d not in known}
        for gid in sorted(missing):
            record = await self._dependency(gid)
            if record is not None:
                known[gid] = record
        out = []
        for raw in wanted:
            issue = self._normalize(raw, known)
            if issue is not None:
                out.append(self._route(issue, tracker, who))
        return out

    async def fetch_issues_by_states(self, states: Sequence[str]) -> list[Issue]:
        """Tasks of the project in any of ``states``; ``[]`` without a request when empty."""
        names = {s.strip().lower() for s in states if s and s.strip()}
        if not names:
            return []
        tracker = self._tracker()
        tasks = await self._tasks(incomplete=False)
        who = await self._assignee(tracker.assignee)
        known = {t["gid"]: t for t in tasks}
        out = []
        for raw in tasks:
            state = normalize.section(raw, self._project())[1]
            if state is None or state.lower() not in names:
                continue
            issue = self._normalize(raw, known)
            if issue is not None:
                out.append(self._route(issue, tracker, who))
        return out

    async def fetch_issues_by_ids(self, issue_ids: Sequence[str]) -> list[Issue]:
        """Full current snapshots of ``issue_ids`` (gids; a set), input order; tasks Asana no
        longer has, or that left the project, are absent; no ids, no request. A malformed
        requested record raises ``tracker_response``."""
        gids = list(dict.fromkeys(_gid(i) for i in dedupe_ids([str(i).strip() for i in issue_ids])))
        if not gids:
            return []
        tracker = self._tracker()
        records = []
        for gid in gids:
            raw = await self._task(gid, ",".join(normalize.FIELDS))
            if raw is not None and normalize.in_project(raw, self._project()):
                records.append(raw)
        known: dict[str, Any] = {r["gid"]: r for r in records if isinstance(r.get("gid"), str)}
        for dep in sorted({d for r in records for d in normalize.dependency_gids(r)} - set(known)):
            record = await self._dependency(dep)
            if record is not None:
                known[dep] = record
        who = await self._assignee(tracker.assignee)
        return [
            self._route(
                normalize.normalize_task(r, self._project(), known, self._done()), tracker, who
            )
            for r in records
        ]

    async def move_issue(self, issue_id: str, state: str) -> Issue:
        """Move task ``issue_id`` to the project's section named ``state``."""
        gid = _gid(issue_id)
        sections = await self._sections()
        wanted = state.strip().lower()
        match = next((s for s in sections if s[1].strip().lower() == wanted), None)
        if match is None:
            known = ", ".join(name for _, name in sections) or "none"
            raise TrackerError("tracker_response", f"no section {state!r} (project has: {known})")
        await self.client.json(
            "POST", f"/sections/{match[0]}/addTask", body={"data": {"task": gid}}
        )
        moved = await self.fetch_issues_by_ids([gid])
        if not moved:
            raise TrackerError("tracker_response", f"task {gid} not returned after move")
        log.info("asana task moved gid=%s section=%s", gid, moved[0].state)
        return moved[0]

    async def call_agent_tool(self, issue: Issue, arguments: Any) -> ToolResult:
        """One ``asana_api`` call for the session working on ``issue``: reads of tasks,
        sections, the configured project and ``/users/me``; writes on that task only (and
        ``POST /sections/<gid>/addTask`` of that task: a move to a section)."""
        project = f"/projects/{self._project()}"
        own = f"/tasks/{issue.id}"

        def refusal(method: str, path: str, body: Any) -> str | None:
            if method == "GET":
                if any(under(path, p) for p in ("/tasks", "/sections", project, "/users/me")):
                    return None
                return f"reads are limited to tasks, sections, {project} and /users/me"
            if under(path, own):
                return deletes_itself(method, path, own)
            parts = path.strip("/").split("/")
            data = body.get("data") if isinstance(body, dict) else None
            task = data.get("task") if isinstance(data, dict) else None
            moves_own = parts[0] == "sections" and parts[2:] == ["addTask"] and task == issue.id
            if method == "POST" and len(parts) == 3 and moves_own:
                return None
            return f"writes are limited to your own task: {own}"

        return await call_rest_tool(self.client, arguments, refusal)

    # -- internals ---------------------------------------------------------------------

    def _project(self) -> str:
        gid = (self._tracker().project_gid or "").strip()
        if not gid:
            raise TrackerError("invalid_tracker_config", "tracker.project_gid is not set")
        return _gid(gid)

    def _done(self) -> str | None:
        terminal = self._tracker().terminal_states
        return terminal[0] if terminal else None

    def _normalize(self, raw: dict, known: dict[str, Any]) -> Issue | None:
        try:
            return normalize.normalize_task(raw, self._project(), known, self._done())
        except TrackerError as exc:
            if exc.portable != "tracker_response":
                raise
            log.warning("tracker record omitted kind=asana reason=%s", exc.message)
            return None

    @staticmethod
    def _route(issue: Issue, tracker: TrackerSettings, who: str | None) -> Issue:
        """``issue`` with ``dispatchable`` narrowed: false when it is in the first active
        state with a blocker outside the terminal states, or not assigned to ``who``."""
        first = tracker.active_states[0].strip().lower() if tracker.active_states else None
        waits = issue.state.strip().lower() == first and any(
            b.state is None or not tracker.is_terminal(b.state) for b in issue.blocked_by
        )
        assigned = who is None or issue.assignee_id == who
        return issue.model_copy(
            update={"dispatchable": issue.dispatchable and assigned and not waits}
        )

    async def _paged(self, path: str, params: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        offset: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            query = {**params, "limit": LIMIT}
            if offset is not None:
                query["offset"] = offset
            body = await self.client.json("GET", path, params=query)
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list):
                raise TrackerError("tracker_response", f"{path} answer has no data list")
            out.extend(data)
            following = body.get("next_page")
            if following is None:
                return out
            offset = following.get("offset") if isinstance(following, dict) else None
            if not isinstance(offset, str) or not offset or offset in seen:
                raise TrackerError("tracker_pagination", "next_page has no new offset")
            seen.add(offset)
        raise TrackerError("tracker_pagination", f"{path} has more than {MAX_PAGES} pages")

    async def _tasks(self, *, incomplete: bool) -> list[dict]:
        params: dict[str, Any] = {"opt_fields": ",".join(normalize.FIELDS)}
        if incomplete:
            params["completed_since"] = "now"
        tasks = await self._paged(f"/projects/{self._project()}/tasks", params)
        out = []
        for raw in tasks:
            if isinstance(raw, dict) and isinstance(raw.get("gid"), str):
                out.append(raw)
            else:
                log.warning("asana record skipped: a task without a gid")
        return out

    async def _task(self, gid: str, fields: str) -> dict | None:
        response = await self.client.request(
            "GET", f"/tasks/{_gid(gid)}", params={"opt_fields": fields}
        )
        if response.status == 404:
            return None
        body = self.client.ok_body(response, f"/tasks/{gid}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise TrackerError("tracker_response", f"task {gid} answer has no data object")
        return data

    async def _dependency(self, gid: str) -> dict | None:
        """A dependency the listing did not carry (completed, or in another project), read
        at most once per :data:`DEPENDENCY_TTL`; ``None`` when Asana no longer has it."""
        now = self.client.now()
        kept = self._dependencies.get(gid)
        if kept is not None and now - kept[0] < DEPENDENCY_TTL:
            return kept[1]
        record = await self._task(gid, _DEPENDENCY_FIELDS)
        self._dependencies[gid] = (now, record)
        if len(self._dependencies) > 4096:
            oldest = min(self._dependencies, key=lambda k: self._dependencies[k][0])
            del self._dependencies[oldest]
        return record

    async def _sections(self) -> list[tuple[str, str]]:
        rows = await self._paged(f"/projects/{self._project()}/sections", {"opt_fields": "name"})
        return [
            (r["gid"], r["name"])
            for r in rows
            if isinstance(r, dict) and isinstance(r.get("gid"), str)
            and isinstance(r.get("name"), str)
        ]  # fmt: skip

    async def _assignee(self, value: str | None) -> str | None:
        text = (value or "").strip()
        if not text:
            return None
        if text.lower() != "me":
            return text
        if self._me is None:
            body = await self.client.json("GET", "/users/me", params={"opt_fields": "name"})
            data = body.get("data") if isinstance(body, dict) else None
            gid = data.get("gid") if isinstance(data, dict) else None
            if not isinstance(gid, str) or not gid:
                raise TrackerError("tracker_response", "/users/me has no gid")
            self._me = gid
        return self._me


def _gid(value: str) -> str:
    text = str(value).strip().removeprefix("ASANA-")
    if not text.isdigit():
        raise TrackerError("tracker_response", f"{value!r} is not an Asana gid")
    return text
