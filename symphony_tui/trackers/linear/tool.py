"""The ``linear_graphql`` client-side tool for agent sessions (spec §10.5).

Input: ``{"query": "<one GraphQL operation>", "variables": {...}}`` (``variables`` optional,
a JSON object) or a raw query string. The call goes through the session's
:class:`LinearTracker`, so it uses the configured endpoint and key (the agent never sees the
key) and honours the same rate-limit pause.

Results (``ToolResult.text`` is JSON):

* transport success, no top-level ``errors`` -> ``success=True``, the response body;
* top-level ``errors`` -> ``success=False``, the response body kept for debugging;
* bad input, missing auth, rate limit, transport failure, non-JSON answer -> ``success=False``
  with ``{"error": {"code": ..., "message": ...}}`` (plus ``retry_at`` / ``status``).
"""

from __future__ import annotations

import json
from typing import Any

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.trackers.base import TrackerError
from symphony_tui.trackers.linear.tracker import LinearTracker

LINEAR_GRAPHQL_TOOL = ToolSpec(
    name="linear_graphql",
    description=(
        "Run one GraphQL query or mutation against Linear with Symphony's configured "
        "credentials. Input: query (a single operation) and optional variables (an object). "
        "Returns Linear's JSON response."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "One GraphQL query or mutation document.",
            },
            "variables": {
                "type": "object",
                "description": "GraphQL variables for the operation.",
                "additionalProperties": True,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


async def call_linear_graphql(tracker: LinearTracker, arguments: Any) -> ToolResult:
    """Execute one ``linear_graphql`` call; never raises for bad input or a failed request."""
    parsed = _parse_arguments(arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    query, variables = parsed
    try:
        response = await tracker.graphql(query, variables)
    except TrackerError as exc:
        extra: dict[str, Any] = {}
        if exc.retry_at is not None:
            extra["retry_at"] = exc.retry_at.isoformat()
        return _failure(exc.category, exc.message, **extra)
    if not isinstance(response.body, dict):
        return _failure(
            "linear_unknown_payload",
            "Linear answered with something other than a JSON object",
            status=response.status,
            body=response.text[:2000],
        )
    text = tracker.redact(json.dumps(response.body, ensure_ascii=False))
    if response.body.get("errors"):
        return ToolResult(success=False, text=text)
    if response.status != 200:
        return _failure(
            "linear_api_status",
            f"HTTP {response.status} from Linear",
            status=response.status,
            body=response.body,
        )
    return ToolResult(success=True, text=text)


def count_operations(document: str) -> int:
    """Number of operation definitions in a GraphQL document (queries, mutations,
    subscriptions and ``{...}`` shorthand queries). Skips strings, block strings and comments;
    needs no GraphQL library. Raises ``ValueError`` on unbalanced brackets or a bad string."""
    ops = 0
    depth = 0
    header = False  # inside "query Name(...) @dir" or "fragment X on T", before its "{"
    i = 0
    n = len(document)
    while i < n:
        ch = document[i]
        if ch == "#":
            end = document.find("\n", i)
            i = n if end < 0 else end + 1
        elif document.startswith('"""', i):
            end = _block_string_end(document, i + 3)
            if end < 0:
                raise ValueError("unterminated block string")
            i = end + 3
        elif ch == '"':
            i = _string_end(document, i + 1) + 1
        elif ch in "{(":
            if depth == 0 and ch == "{":
                if header:
                    header = False
                else:
                    ops += 1  # "{ ... }" alone is a query
            depth += 1
            i += 1
        elif ch in "})":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced brackets")
            i += 1
        elif depth == 0 and (ch.isalpha() or ch == "_"):
            j = i
            while j < n and (document[j].isalnum() or document[j] == "_"):
                j += 1
            word = document[i:j]
            if not header and word in ("query", "mutation", "subscription", "fragment"):
                ops += word != "fragment"
                header = True
            i = j
        else:
            i += 1
    if depth != 0:
        raise ValueError("unbalanced brackets")
    return ops


def _parse_arguments(arguments: Any) -> tuple[str, dict[str, Any]] | ToolResult:
    if isinstance(arguments, str):
        query, variables = arguments, None
    elif isinstance(arguments, dict):
        query, variables = arguments.get("query"), arguments.get("variables")
    else:
        return _failure("invalid_input", "arguments must be an object with a query string")
    if not isinstance(query, str) or not query.strip():
        return _failure("invalid_input", "query must be a non-empty string")
    if variables is None:
        variables = {}
    if not isinstance(variables, dict):
        return _failure("invalid_input", "variables must be a JSON object")
    try:
        ops = count_operations(query)
    except ValueError as exc:
        return _failure("invalid_input", f"query is not a GraphQL document: {exc}")
    if ops != 1:
        return _failure("invalid_input", f"query must contain exactly one operation (found {ops})")
    return query, variables


def _failure(code: str, message: str, **extra: Any) -> ToolResult:
    return ToolResult(
        success=False,
        text=json.dumps({"error": {"code": code, "message": message, **extra}}, default=str),
    )


def _string_end(text: str, i: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        if text[i] == "\n":
            break
        i += 1
    raise ValueError("unterminated string")


def _block_string_end(text: str, i: int) -> int:
    while True:
        end = text.find('"""', i)
        if end < 0:
            return -1
        if text[end - 1] == "\\":
            i = end + 3
            continue
        return end
