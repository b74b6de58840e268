"""The scheduler's client-side tools on an OpenHands 1.58.2 conversation.

A conversation's ``client_tools`` (``POST /api/conversations``) are called by the agent like
any tool, but the server cannot take their result back (read in the 1.58.2 sources):

* ``openhands/sdk/tool/client_tool.py`` ``ClientToolExecutor.__call__`` answers every call
  at once, inside the agent's step, with the fixed observation "Tool call dispatched to
  client."; the agent's next model request carries that text as the tool's result.
* The client can add events to a conversation only as a user message
  (``openhands/agent_server/event_router.py`` ``send_message`` and the event socket's
  incoming frames in ``sockets.py`` ``events_socket``, both ending in
  ``openhands/sdk/conversation/impl/local_conversation.py`` ``LocalConversation.send_message``,
  which asserts ``role == "user"``), or through ``respond_to_confirmation``, whose only
  free text is a rejection reason the agent reads as "Action rejected: ...".
  ``PostToolUse`` hooks (``openhands/sdk/hooks/conversation_hooks.py``) see an observation
  but cannot change it.

So the backend tells the agent so in each tool's description (:func:`client_tool_specs`)
and hands the results over with the session's next user message (:func:`with_results`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.text import one_line

ACK = "Tool call dispatched to client."
DESCRIPTION_NOTE = (
    f" (Runs outside OpenHands after your call: the reply '{ACK}' only acknowledges the "
    "call and is not its result. The result is given to you at the start of the next "
    "user message.)"
)
RESULTS_HEADER = "Results of your earlier client tool calls (they ran after you called them):"
MAX_RESULT = 4000  # characters of one tool result handed to the agent


def client_tool_specs(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """``client_tools`` entries (1.58.2 ``ClientToolSpec``: ``name``, ``description``,
    ``parameters``) for the tools with an object input schema, the server's only kind."""
    return [
        {"name": t.name, "description": t.description + DESCRIPTION_NOTE, "parameters": schema}
        for t in tools
        if isinstance(schema := t.input_schema, dict) and schema.get("type") == "object"
    ]


def result_line(name: str, arguments: dict[str, Any], result: ToolResult) -> str:
    """One line for the agent: ``- <tool> <json arguments>: ok|failed: <result text>``."""
    outcome = "ok" if result.success else "failed"
    args = json.dumps(arguments, sort_keys=True)
    return f"- {name} {args}: {outcome}: {one_line(result.text, MAX_RESULT)}"


def with_results(prompt: str, lines: list[str]) -> str:
    """``prompt`` preceded by the results not yet handed to the agent (unchanged if none)."""
    if not lines:
        return prompt
    return "\n".join([RESULTS_HEADER, *lines, "", prompt])
