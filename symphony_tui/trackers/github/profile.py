"""The compact profile of ``tracker.kind: github`` (spec §11.2), as docs/trackers.md shows it."""

from __future__ import annotations

from symphony_tui.trackers.base import TrackerProfile

GITHUB_PROFILE = TrackerProfile(
    kind="github",
    config=(
        "`tracker.provider` (or flat `tracker.`) keys: `repo` (`owner/name`, default "
        "`$GITHUB_REPO`, required), `token` or `api_key` (default `$GITHUB_TOKEN`; `$VAR` "
        "indirection), `api_url` (default `https://api.github.com`), `assignee` (a login or "
        "`me`); `project` (`number`, `owner`, `status_field` default `Status`, "
        "`priority_field`), `state_labels`, `priority_labels`; states default `open` / "
        "`closed` without a board or state labels. Errors: `missing_github_token`, "
        "`missing_github_repo`, `github_unknown_project`."
    ),
    scope=(
        "Issues of the repository (pull requests dropped), REST 100 a page oldest first, "
        "following `Link` with ETags; with a board, states come from its items. Id refresh: "
        "one GraphQL request per 50 issue numbers. Rate limits (primary and secondary) pause "
        "requests until the announced reset."
    ),
    identity=(
        "`id` is the issue number, `identifier` `GH-<number>`; `native_ref` is "
        "`{repository, number}` plus `project_item_id` for an issue on the board."
    ),
    normalization=(
        "`state` is the board status, else the first `state_labels` label, else `open` / "
        "`closed` (an open issue with no board status is left out); labels trimmed, "
        "lowercased, deduplicated; `priority` from the board's priority field, else the "
        "lowest `priority_labels` value, else null; timestamps RFC 3339 or null; "
        "`assignee_id` the first assignee's login; `blocked_by` from issue dependencies "
        "(candidates, and `Todo` issues in an id refresh); `dispatchable` is false when "
        "`assignee` is set and the issue is not "
        "assigned to it, or for a `Todo` issue with an open blocker. An item without "
        "number, title or state is malformed: left out of lists with a log line, fails an "
        "id refresh."
    ),
    agent_tools=(
        "`github_api`: one REST request with the configured token; GET anywhere under the "
        "repository, writes only on the session's own issue; returns `{status, body}` or "
        "`{error: {code, message}}`."
    ),
    errors=(
        "`TrackerError.category` -> portable: `missing_github_token` -> "
        "`missing_tracker_secret`; `missing_github_repo`, `github_unknown_project` -> "
        "`invalid_tracker_config`; `github_api_request` -> `tracker_request`; "
        "`github_api_status` -> `tracker_status`; `github_graphql_errors`, "
        "`github_unknown_payload`, `github_unknown_state` -> `tracker_response`; "
        "`rate_limited` -> `tracker_rate_limited`."
    ),
    secret_env=("GITHUB_TOKEN",),
)
