"""The compact profile of ``tracker.kind: gitlab`` (spec §11.2), as docs/trackers.md shows it."""

from __future__ import annotations

from symphony_tui.trackers.base import TrackerProfile
from symphony_tui.trackers.jira.profile import REST_ERRORS

GITLAB_PROFILE = TrackerProfile(
    kind="gitlab",
    config=(
        "`tracker.provider` (or flat `tracker.`) keys: `api_url` (default "
        "`https://gitlab.com/api/v4`), `api_key` or `token` (default `$GITLAB_PAT`, then "
        "`$GITLAB_ACCESS_TOKEN`; `$VAR` indirection), `project_path` (`group/project`, default "
        "`$GITLAB_PROJECT_PATH`, required), `assignee` (a username or `me`), `state_labels`, "
        "`priority_labels`; without `state_labels` the states are `opened` (active) and "
        "`closed` (terminal); `timeout_ms` 30000. Validation errors: `invalid_gitlab_api_url`, "
        "`missing_gitlab_api_key`, `missing_gitlab_project_path`, "
        "`invalid_gitlab_project_path`, `invalid_gitlab_states`."
    ),
    scope=(
        "Issues of the project, `GET /projects/:path/issues` oldest first, 100 a page "
        "following `X-Next-Page` (at most 500 pages); candidates are open issues, with "
        "`scope=assigned_to_me` or `assignee_username[]` when `assignee` is set, each with its "
        "links (`GET .../issues/:iid/links`). Id refresh: `iids[]`, 100 a request; links are "
        "read only for issues in the first active state. Rate limits as for Jira: a 429 or a "
        "503 with `Retry-After` pauses every request until the announced reset."
    ),
    identity=(
        "`id` is the issue's project-scoped `iid`, `identifier` `GL-<iid>`; `native_ref` is "
        "`{project_path, iid}`."
    ),
    normalization=(
        "`state` is `closed` for a closed issue, else the first `state_labels` label it "
        "carries, else `opened`; labels trimmed, lowercased, deduplicated; `priority` the "
        "lowest `priority_labels` value among them, else null; `created_at` / `updated_at` "
        "ISO 8601, else null; `assignee_id` the first assignee's username; `blocked_by` from "
        "links of type `is_blocked_by` (GitLab's paid tiers); `dispatchable` is false for an "
        "issue in the first active state with a blocker not in a terminal state (unknown "
        "counts as open), or, when `assignee` is a username, not assigned to it. A record "
        "without a positive integer `iid`, a `title` or a state `opened` / `closed` is "
        "malformed: left out of state-list reads with a log line, fails an id refresh."
    ),
    agent_tools=(
        "`gitlab_api`: one REST request with the configured token; reads under "
        "`/projects/<path>/`, writes only on `/projects/<path>/issues/<own iid>` and below, "
        "never a `DELETE` of the issue itself; returns `{status, body}` or `{error: {code, "
        "message}}`. Moves: to a state label (others removed, reopened if closed), to "
        "`closed` or another terminal state (closed), to `opened` (reopened)."
    ),
    errors=REST_ERRORS.format(
        move="a state it cannot move to",
        paging="an `X-Next-Page` that does not move on, or too many pages",
    ),
    secret_env=("GITLAB_PAT", "GITLAB_ACCESS_TOKEN"),
)
