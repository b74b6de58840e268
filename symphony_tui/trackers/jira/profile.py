"""The compact profile of ``tracker.kind: jira`` (spec §11.2), as docs/trackers.md shows it."""

from __future__ import annotations

from symphony_tui.trackers.base import TrackerProfile

REST_ERRORS = (
    "`TrackerError.category` is the portable category itself: `missing_tracker_secret` (no "
    "credential), `invalid_tracker_config` (a setting missing when a request is built), "
    "`tracker_request` (transport failure or timeout), `tracker_status` (a non-2xx answer; a "
    "401 also marks the credentials refused), `tracker_response` (a malformed answer or "
    "record, {move}), `tracker_pagination` ({paging}), `tracker_rate_limited` (a 429, or a "
    "503 with `Retry-After`, with `retry_at`). The message names the vendor and never the "
    "credential."
)

JIRA_PROFILE = TrackerProfile(
    kind="jira",
    config=(
        "`tracker.provider` (or flat `tracker.`) keys: `base_url` (`https://SITE.atlassian.net`, "
        "default `$JIRA_BASE_URL`), `email` (default `$JIRA_EMAIL`), `api_token` (default "
        "`$JIRA_API_TOKEN`; `$VAR` indirection, an unset one falls back to the default), "
        "`project_key` (required), `assignee` (`me` or an account id); `active_states` default "
        "`To Do`, `In Progress`; `terminal_states` default `Done`, `Closed`, `Cancelled`, "
        "`Canceled`, `Won't Do`, `Duplicate`; `timeout_ms` 30000. Validation errors: "
        "`invalid_jira_base_url`, `missing_jira_email`, `missing_jira_api_token`, "
        "`missing_jira_project_key`."
    ),
    scope=(
        "JQL `project = KEY AND status IN (...) ORDER BY created ASC` through `POST "
        "/rest/api/3/search/jql`, 100 a page following `nextPageToken` until `isLast` (at most "
        '500 pages); `assignee` adds `assignee = currentUser()` or `= "<id>"` to candidate '
        "searches; an issue seen twice while paging is kept once. Id refresh: `POST "
        "/rest/api/3/issue/bulkfetch`, 100 ids or keys a request; issues of another project are "
        "absent. A 429 or a 503 with `Retry-After` pauses every request until then (else the "
        "reset header, else 60 s); `RateLimit-Remaining: 0` pauses until its reset."
    ),
    identity=(
        "`id` is Jira's immutable issue id, `identifier` the key (`SD-4`); `native_ref` is "
        "`{key, project}`."
    ),
    normalization=(
        "`state` is the status name as Jira spells it; labels trimmed, lowercased, "
        "deduplicated; `priority` from the priority name (Highest 1, High 2, Medium 3, Low and "
        "Lowest 4; Blocker / Critical 1, Major 2, Minor / Trivial 4), else null; `created` / "
        "`updated` parsed as ISO 8601, else null; `description` the Atlassian Document Format "
        "flattened to text; `url` `<base_url>/browse/<key>`; `assignee_id` the assignee's "
        "`accountId`; `blocked_by` from inward `Blocks` links with the blocker's status; "
        "`dispatchable` is false when the status category is `new` (To Do, Backlog...) and a "
        "blocker is not in a terminal state (unknown counts as open), or when `assignee` is an "
        "account id the issue is not assigned to. An issue without "
        "string `id`, `key`, `fields`, `summary` or status name is malformed: left out of "
        "state-list reads with a log line, fails an id refresh."
    ),
    agent_tools=(
        "`jira_rest`: one REST request with the configured credential; reads under "
        "`/rest/api/3/` and JQL searches, writes only on the session's own issue (by id or "
        "key) and below, never a `DELETE` of the issue itself; returns `{status, body}` or "
        "`{error: {code, message}}`. Moves (`symphony_set_issue_state`, the console's move) "
        "take the transition into the named status, else the transition of that name."
    ),
    errors=REST_ERRORS.format(
        move="no transition to the state asked for",
        paging="`isLast` false without a new `nextPageToken`, or too many pages",
    ),
    secret_env=("JIRA_API_TOKEN",),
)
