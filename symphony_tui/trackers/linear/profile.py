"""The compact profile of ``tracker.kind: linear`` (spec §11.2), as docs/trackers.md shows it."""

from __future__ import annotations

from symphony_tui.trackers.base import TrackerProfile

LINEAR_PROFILE = TrackerProfile(
    kind="linear",
    config=(
        "`tracker.provider` (or flat `tracker.`) keys: `endpoint` (default "
        "`https://api.linear.app/graphql`), `api_key` (default `$LINEAR_API_KEY`; `$VAR` "
        "indirection; empty counts as missing), `project_slug` (required), `assignee` (a "
        "user id or `me`, default `$LINEAR_ASSIGNEE`); `active_states` default `Todo`, "
        "`In Progress`; `terminal_states` default `Closed`, `Cancelled`, `Canceled`, "
        "`Duplicate`, `Done`; `timeout_ms` 30000. Errors: `missing_tracker_api_key`, "
        "`missing_tracker_project_slug`."
    ),
    scope=(
        "Issues of the project whose `slugId` is `project_slug`, 50 a page following "
        "`pageInfo.endCursor` in Linear's order (at most 1000 pages); an issue seen twice "
        "while paging is kept once. Id refresh: at most 50 ids a request, typed `[ID!]`. "
        "A rate limit pauses every request until the reset Linear announces."
    ),
    identity=(
        "`id` is Linear's issue id, `identifier` the issue key (`ABC-123`); `native_ref` is "
        "null (the dispatch id is the ticket id)."
    ),
    normalization=(
        "`state` is `state.name` as Linear spells it; labels trimmed, lowercased, "
        "deduplicated; `priority` an integer (integral floats count), else null; `createdAt` "
        "/ `updatedAt` parsed as RFC 3339, else null; `assignee_id` is `assignee.id`; "
        "`blocked_by` from inverse relations of type `blocks`; `dispatchable` is false when "
        "`assignee` is set and the issue is assigned to someone else, or when a `Todo` issue "
        "has a blocker not in a terminal state (unknown counts as open). A node without "
        "string `id`, `identifier`, `title` or `state.name` is malformed: left out of "
        "state-list reads with a log line, fails an id refresh."
    ),
    agent_tools=(
        "`linear_graphql`: one GraphQL document (query or mutation) with the configured key, "
        "any scope the key reaches; returns the response body, GraphQL errors included; bad "
        "input and transport failures return an error payload."
    ),
    errors=(
        "`TrackerError.category` -> portable: `missing_tracker_api_key` -> "
        "`missing_tracker_secret`; `missing_tracker_project_slug` -> "
        "`invalid_tracker_config`; `linear_api_request` -> `tracker_request`; "
        "`linear_api_status` -> `tracker_status`; `linear_graphql_errors`, "
        "`linear_unknown_payload`, `linear_unknown_state` -> `tracker_response`; "
        "`linear_missing_end_cursor` -> `tracker_pagination`; `rate_limited` -> "
        "`tracker_rate_limited`. The message is the text after the category."
    ),
    secret_env=("LINEAR_API_KEY",),
)
