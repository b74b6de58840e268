"""The client-side REST tool of the Jira, GitLab and Asana trackers (spec §10.5; the
reference's adapters offer ``jira_rest``, ``gitlab_api`` and ``asana_api``): one request with
the scheduler's credential, which never enters the agent's environment.

Input ``{"method", "path", "query"?, "body"?}`` (``params`` is read as ``query`` too);
``path`` is relative to the tracker's base URL. The credential may reach much more than the
agent needs, so each tracker narrows the tool (:meth:`RestToolScope.refusal`): reads within
the configured project, writes on the session's own issue only (comment, transition...).
Result text is ``{"status": <int>, "body": <JSON>}`` (success for 2xx), or ``{"error":
{"code", "message"}}`` for bad input, refusals and failed requests; the credential is
redacted from all of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.rest import RestClient

METHODS = ("GET", "POST", "PUT", "DELETE")
_MAX_TEXT = 60_000


def tool_spec(name: str, vendor: str, example: str, scope: str) -> ToolSpec:
    """The tool's description for the agent: ``example`` is a path it may use, ``scope``
    says what it may reach."""
    return ToolSpec(
        name=name,
        description=(
            f"Send one {vendor} REST API request with Symphony's configured auth. {scope}"
        ),
        input_schema={
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": list(METHODS), "description": "HTTP method"},
                "path": {"type": "string", "description": f"REST path such as {example}"},
                "query": {
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


async def call_rest_tool(
    client: RestClient, arguments: Any, refusal: Callable[[str, str, Any], str | None]
) -> ToolResult:
    """Run one call; ``refusal(method, path, body)`` says why a request is out of scope (or
    None). Never raises for bad input, a refusal or a failed request."""
    parsed = parse_arguments(arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    method, path, query, body = parsed
    why = refusal(method, path.split("?", 1)[0], body)
    if why:
        return failure("forbidden", why)
    try:
        response = await client.request(method, path, params=query, body=body)
    except TrackerError as exc:
        extra: dict[str, Any] = {}
        if exc.retry_at is not None:
            extra["retry_at"] = exc.retry_at.isoformat()
        return failure(exc.category, exc.message, **extra)
    payload = response.body if response.body is not None else response.text[:_MAX_TEXT]
    text = client.redact(json.dumps({"status": response.status, "body": payload}))
    return ToolResult(success=200 <= response.status < 300, text=text[: _MAX_TEXT * 2])


def parse_arguments(
    arguments: Any, methods: tuple[str, ...] = METHODS
) -> tuple[str, str, dict[str, Any] | None, Any] | ToolResult:
    """``(method, path, query, body)`` or the failed result saying what is wrong; ``methods``
    are the ones allowed (the GitHub tool adds ``PATCH``)."""
    if not isinstance(arguments, dict):
        return failure("invalid_input", "arguments must be an object with method and path")
    method = arguments.get("method")
    if not isinstance(method, str) or method.strip().upper() not in methods:
        return failure("invalid_input", f"method must be one of {', '.join(methods)}")
    path = arguments.get("path")
    if (
        not isinstance(path, str)
        or not path.startswith("/")
        or "://" in path
        or re.search(r"[\s\x00]", path)
        or re.search(r"/(\.|%2e){1,2}(/|$)", path, re.IGNORECASE)  # a dot segment
    ):
        return failure("invalid_input", "path must be a relative REST path starting with /")
    query = arguments.get("query", arguments.get("params"))
    if query is not None and not isinstance(query, dict):
        return failure("invalid_input", "query must be an object")
    return method.strip().upper(), path, query, arguments.get("body")


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it (case-insensitive, trailing ``/`` ignored)."""
    low, base = path.rstrip("/").lower(), prefix.rstrip("/").lower()
    return low == base or low.startswith(base + "/")


def deletes_itself(method: str, path: str, *own: str) -> str | None:
    """The refusal of a ``DELETE`` of the session's own issue itself (its comments, labels
    and links may go; the issue may not), or None."""
    if method == "DELETE" and any(path.rstrip("/").lower() == p.lower() for p in own):
        return "deleting your own issue is not allowed"
    return None


def failure(code: str, message: str, **extra: Any) -> ToolResult:
    return ToolResult(
        success=False,
        text=json.dumps({"error": {"code": code, "message": message, **extra}}, default=str),
    )
