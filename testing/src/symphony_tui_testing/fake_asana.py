"""A fake Asana: a real HTTP server on 127.0.0.1 serving, under ``/api/1.0``, the operations
the Asana tracker and the ``asana_api`` tool use, each request and answer checked against
Asana's published OpenAPI description (the subset in ``data/asana_openapi.json``; see
:mod:`.fake_rest` for the checks and the shared knobs).

Served: ``GET /projects/:gid/tasks`` (``opt_fields``, ``limit`` <= 100, ``offset``,
``completed_since=now``), ``GET /projects/:gid/sections``, ``POST /sections/:gid/addTask``,
``GET|PUT /tasks/:gid``, ``GET|POST /tasks/:gid/stories`` and ``GET /users/:gid`` (``me``).
Every answer is the record whole, whatever ``opt_fields`` asks (the checks say whether the
fields asked for exist). Requests need ``Authorization: Bearer <token>``.

Usage::

    with FakeAsana(token="asana_test", project="1200") as asana:
        asana.add_task("Fix the login", section="To do")
        settings = {"kind": "asana", "endpoint": asana.url, "api_key": "asana_test",
                    "project_gid": "1200"}
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from symphony_tui_testing.fake_rest import Answer, FakeRest
from symphony_tui_testing.openapi_contract import OpenApiContract

DATA = Path(__file__).parent / "data" / "asana_openapi.json"
SECTIONS = ("Backlog", "To do", "Doing", "Review", "Done")


@functools.cache
def asana_contract() -> OpenApiContract:
    """Asana's description of the operations used (loaded once)."""
    return OpenApiContract(
        json.loads(DATA.read_text()), uri="https://asana.example/openapi.json", vendor="Asana"
    )


@dataclass
class AsanaTask:
    """One fixture task; ``dependencies`` lists gids of tasks that block this one."""

    gid: str
    name: str
    section: str
    notes: str = ""
    completed: bool = False
    tags: list[str] = field(default_factory=list)
    assignee: str | None = None
    dependencies: list[str] = field(default_factory=list)
    created_at: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    modified_at: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    stories: list[dict] = field(default_factory=list)
    project: str | None = None
    raw: dict | None = None


class FakeAsana(FakeRest):
    """Asana over :class:`AsanaTask` fixtures (see the module docstring)."""

    vendor = "Asana"
    prefix = "/api/1.0"

    def __init__(
        self,
        *,
        token: str = "asana_fake_token",
        project: str = "1200000000000100",
        user: str = "1200000000000007",
        sections: Iterable[str] = SECTIONS,
        clock: Callable[[], datetime] | None = None,
        validate: bool = True,
    ) -> None:
        super().__init__(clock=clock, validate=validate)
        self.token = token
        self.project = project
        self.user = user
        self.sections = {str(1200000000000200 + n): name for n, name in enumerate(sections)}
        self.tasks: dict[str, AsanaTask] = {}

    def contract(self) -> OpenApiContract:
        return asana_contract()

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.token}"

    def unauthorized(self) -> Answer:
        return 401, {"errors": [{"message": "Not Authorized"}]}, {}

    # -- fixture data ------------------------------------------------------------------

    def add_task(
        self,
        name: str,
        *,
        section: str = "To do",
        notes: str = "",
        completed: bool = False,
        tags: Iterable[str] = (),
        assignee: str | None = None,
        dependencies: Iterable[str] = (),
        project: str | None = None,
        raw: dict | None = None,
    ) -> AsanaTask:
        with self._lock:
            n = len(self.tasks) + 1
            created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n)
            task = AsanaTask(
                str(1200000000001000 + n),
                name,
                section,
                notes,
                completed,
                list(tags),
                assignee,
                list(dependencies),
                created,
                created,
                project=project,
                raw=raw,
            )
            self.tasks[task.gid] = task
            return task

    def add_tasks(self, count: int, **kw: Any) -> list[AsanaTask]:
        return [self.add_task(f"Task {n + 1}", **kw) for n in range(count)]

    def update(self, gid: str, **changes: Any) -> None:
        with self._lock:
            task = self.tasks[gid]
            for key, value in changes.items():
                setattr(task, key, value)
            task.modified_at = self._clock()

    # -- records -----------------------------------------------------------------------

    def _section_gid(self, name: str) -> str:
        return next((g for g, n in self.sections.items() if n == name), "1200000000000299")

    def _task_json(self, task: AsanaTask) -> dict:
        if task.raw is not None:
            return task.raw
        project = task.project or self.project
        record = {
            "gid": task.gid,
            "resource_type": "task",
            "resource_subtype": "default_task",
            "name": task.name,
            "notes": task.notes,
            "completed": task.completed,
            "tags": [{"gid": str(900 + n), "name": t} for n, t in enumerate(task.tags)],
            "memberships": [
                {
                    "project": {"gid": project, "resource_type": "project"},
                    "section": {
                        "gid": self._section_gid(task.section),
                        "resource_type": "section",
                        "name": task.section,
                    },
                }
            ],
            "permalink_url": f"https://app.asana.com/1/1/project/{project}/task/{task.gid}",
            "created_at": _time(task.created_at),
            "modified_at": _time(task.modified_at),
            "dependencies": [{"gid": d, "resource_type": "task"} for d in task.dependencies],
        }
        # Asana sends ``"assignee": null`` for an unassigned task, but its description writes
        # the field as allOf(UserCompact, nullable) and so does not allow null: left out.
        if task.assignee:
            record["assignee"] = {"gid": task.assignee, "resource_type": "user"}
        return record

    # -- routes ------------------------------------------------------------------------

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        parts = [p for p in path.split("/") if p]
        not_found = (404, {"errors": [{"message": "Not Found"}]}, {})
        if parts[:1] == ["projects"] and len(parts) == 3 and parts[1] == self.project:
            if parts[2] == "tasks" and method == "GET":
                return self._list(query)
            if parts[2] == "sections" and method == "GET":
                rows = [
                    {"gid": g, "resource_type": "section", "name": n}
                    for g, n in self.sections.items()
                ]
                return 200, {"data": rows, "next_page": None}, {}
            return not_found
        if parts[:1] == ["sections"] and parts[2:] == ["addTask"] and method == "POST":
            name = self.sections.get(parts[1])
            gid = ((body or {}).get("data") or {}).get("task") if isinstance(body, dict) else None
            if name is None or gid not in self.tasks:
                return 400, {"errors": [{"message": "task: Not a recognized ID"}]}, {}
            self.update(gid, section=name)
            return 200, {"data": {}}, {}
        if parts[:1] == ["users"] and len(parts) == 2 and method == "GET":
            if parts[1] not in ("me", self.user):
                return not_found
            return 200, {"data": {"gid": self.user, "resource_type": "user", "name": "Bot"}}, {}
        if parts[:1] == ["tasks"] and len(parts) >= 2:
            task = self.tasks.get(parts[1])
            if task is None:
                return not_found
            if parts[2:] == [] and method == "GET":
                return 200, {"data": self._task_json(task)}, {}
            if parts[2:] == [] and method == "PUT":
                data = (body or {}).get("data") if isinstance(body, dict) else None
                for key in ("name", "notes", "completed"):
                    if isinstance(data, dict) and key in data:
                        setattr(task, key, data[key])
                return 200, {"data": self._task_json(task)}, {}
            if parts[2:] == ["stories"]:
                if method == "GET":
                    return 200, {"data": task.stories, "next_page": None}, {}
                data = (body or {}).get("data") if isinstance(body, dict) else None
                text = data.get("text") if isinstance(data, dict) else None
                if not isinstance(text, str) or not text:
                    return 400, {"errors": [{"message": "text: Missing input"}]}, {}
                story = {
                    "gid": str(1200000000009000 + len(task.stories)),
                    "resource_type": "story",
                    "type": "comment",
                    "text": text,
                    "created_at": _time(self._clock()),
                }
                task.stories.append(story)
                return 201, {"data": story}, {}
        return not_found

    def _list(self, query: dict[str, list[str]]) -> Answer:
        limit = int((query.get("limit") or ["20"])[0])
        start = int((query.get("offset") or ["0"])[0].removeprefix("eyJ"))
        incomplete = (query.get("completed_since") or [""])[0] == "now"
        found = [
            t
            for t in self.tasks.values()
            if t.raw is not None
            or ((t.project or self.project) == self.project and not (incomplete and t.completed))
        ]
        page = found[start : start + limit]
        following = None
        if start + limit < len(found):
            token = f"eyJ{start + limit}"
            following = {
                "offset": token,
                "path": f"/projects/{self.project}/tasks?limit={limit}&offset={token}",
                "uri": f"{self.url}/projects/{self.project}/tasks?limit={limit}&offset={token}",
            }
        return 200, {"data": [self._task_json(t) for t in page], "next_page": following}, {}


def _time(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
