"""The ``github_api`` client-side tool (spec §10.5; the reference's GitHub adapter offers the
same tool): one GitHub REST request with the scheduler's token, which never enters the agent's
environment.

Input ``{"method", "path", "params"?, "body"?}``; ``path`` is relative to ``tracker.api_url``
(``/repos/owner/name/issues/7/comments``). The scheduler's token may reach much more than the
agent needs, so the tool is narrower than the token: reads (GET) under the configured
repository (``/repos/{owner}/{name}...``) and writes (POST, PATCH, PUT, DELETE) on the
session's own issue only (``/repos/{owner}/{name}/issues/{number}`` and below: comments,
labels, assignees, state). Result text is ``{"status": <int>, "body": <JSON>}`` (success for
2xx), or ``{"error": {"code", "message"}}`` for bad input, refusals and failed requests.
"""

from __future__ import annotations

import json
from typing import Any

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.domain import Issue
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.github.tracker import GitHubTracker
from symphony_tui.trackers.rest_tool import parse_arguments

METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")
_MAX_TEXT = 60_000

GITHUB_API_TOOL = ToolSpec(
    name="github_api",
    description=(
        "Send one GitHub REST API request with Symphony's configured auth. Reads anywhere in "
        "the configured repository; writes only on your own issue (comment, label, close...)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": list(METHODS), "description": "HTTP method"},
            "path": {
                "type": "string",
                "description": "REST path such as /repos/owner/repo/issues/1/comments",
            },
            "params": {
                "type": ["object", "null"],
                "description": "Query parameters",
                "additionalProperties": True,
            },
            "body": {"description": "JSON request body"},
        },
        "required": ["method", "path"],
        "additionalProperties": False,
    },
)


async def call_github_api(tracker: GitHubTracker, issue: Issue, arguments: Any) -> ToolResult:
    """Run one ``github_api`` call for the session working on ``issue`` (its current
    snapshot: the issue number is ``native_ref["number"]``, else the dispatch id); never
    raises for bad input, a refusal or a failed request."""
    parsed = _parse(arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    method, path, params, body = parsed
    repo = tracker.repo
    refusal = scope_refusal(method, path, repo, issue_number(issue))
    if refusal:
        return _failure("forbidden", refusal)
    try:
        response = await tracker.rest(method, path, params, body)
    except TrackerError as exc:
        extra: dict[str, Any] = {}
        if exc.retry_at is not None:
            extra["retry_at"] = exc.retry_at.isoformat()
        return _failure(exc.category, exc.message, **extra)
    payload = response.body if response.body is not None else response.text[:_MAX_TEXT]
    text = tracker.redact(json.dumps({"status": response.status, "body": payload}))
    return ToolResult(success=200 <= response.status < 300, text=text[: _MAX_TEXT * 2])


def issue_number(issue: Issue) -> str:
    """The GitHub issue number of ``issue``: its ``native_ref`` (§4.2: preserved for the
    adapter's tools) when it names one, else the dispatch id."""
    ref = issue.native_ref or {}
    number = ref.get("number")
    if isinstance(number, int) and not isinstance(number, bool) and number > 0:
        return str(number)
    return issue.id


def scope_refusal(method: str, path: str, repo: str, issue_id: str) -> str | None:
    """Why ``method path`` is outside the tool's scope (see the module doc), or None."""
    bare = path.split("?", 1)[0].rstrip("/")
    base = f"/repos/{repo}".lower()
    low = bare.lower()
    if low != base and not low.startswith(base + "/"):
        return f"path must be under /repos/{repo}"
    if method == "GET":
        return None
    own = f"{base}/issues/{issue_id}".lower()
    if low != own and not low.startswith(own + "/"):
        return f"writes are limited to your own issue: /repos/{repo}/issues/{issue_id}"
    return None


def _parse(arguments: Any) -> tuple[str, str, dict[str, Any] | None, Any] | ToolResult:
    return parse_arguments(arguments, METHODS)


def _failure(code: str, message: str, **extra: Any) -> ToolResult:
    return ToolResult(
        success=False,
        text=json.dumps({"error": {"code": code, "message": message, **extra}}, default=str),
    )
