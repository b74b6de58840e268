"""The compact profile of ``tracker.kind: asana`` (spec §11.2), as docs/trackers.md shows it."""

from __future__ import annotations

from symphony_tui.trackers.base import TrackerProfile
from symphony_tui.trackers.jira.profile import REST_ERRORS

ASANA_PROFILE = TrackerProfile(
    kind="asana",
    config=(
        "`tracker.provider` (or flat `tracker.`) keys: `endpoint` (default "
        "`https://app.asana.com/api/1.0`), `api_key` (default `$ASANA_PAT`; `$VAR` "
        "indirection), `project_gid` (required), `assignee` (a user gid or `me`); "
        "`active_states` and `terminal_states` are the project's section names; `timeout_ms` "
        "30000. Validation errors: `invalid_asana_endpoint`, `missing_asana_api_key`, "
        "`missing_asana_project_gid`."
    ),
    scope=(
        "Tasks of the project, `GET /projects/:gid/tasks`, 100 a page following "
        "`next_page.offset` (at most 500 pages); candidates ask for incomplete tasks only "
        "(`completed_since=now`); section rows are no issues. A dependency the listing does "
        "not carry is read with `GET /tasks/:gid`, its state kept 5 minutes. Id refresh: `GET "
        "/tasks/:gid` each (404 or another project: absent). `assignee: me` is read once from "
        "`GET /users/me`. Rate limits as for Jira: a 429 pauses every request until "
        "`Retry-After`."
    ),
    identity=(
        "`id` is the task `gid`, `identifier` `ASANA-<gid>`; `native_ref` is `{project_gid, gid}`."
    ),
    normalization=(
        "`state` is the name of the task's section in the project; labels are tag names "
        "trimmed, lowercased, deduplicated; `priority` null; `created_at` / `modified_at` ISO "
        "8601, else null; `url` the `permalink_url`; `assignee_id` the assignee's gid; "
        "`blocked_by` the task's dependencies with their section (a completed one in the first "
        "terminal state); `dispatchable` is false for a completed task, for a task in the "
        "first active section with a blocker not in a terminal state (unknown counts as "
        "open), and for a task not assigned to `assignee` when set. A task without a string "
        "`gid`, a `name` or a section in the project is malformed: left out of state-list "
        "reads with a log line, fails an id refresh."
    ),
    agent_tools=(
        "`asana_api`: one REST request with the configured token; reads of tasks, sections, "
        "the project and `/users/me`, writes only on `/tasks/<own gid>` and below and `POST "
        "/sections/<gid>/addTask` of its own task, never a `DELETE` of the task itself; "
        "returns `{status, body}` or `{error: {code, message}}`. Moves put the task into the "
        "section of that name."
    ),
    errors=REST_ERRORS.format(
        move="no section of the name asked for",
        paging="a `next_page` without a new offset, or too many pages",
    ),
    secret_env=("ASANA_PAT",),
)
