"""OpenHands wire events -> normalized :class:`~symphony_tui.domain.AgentEvent` values.

Source: docs/protocols.md "OpenHands agent-server" and the server's ``/openapi.json`` (1.58.2).
Every produced event's payload carries ``wire_id`` (the OpenHands event id) and
``item_type`` (the event's ``kind``); item events carry ``item_id`` (the action's event id,
at its start and in its observation). Token totals come from ``stats.usage_to_metrics`` summed over usage ids
(the top-level ``metrics`` is null on this server and is ignored).
"""

from __future__ import annotations

from typing import Any

from symphony_tui.agents.openhands.reconcile import WireEvent
from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import (
    AgentTrouble,
    CommandEnded,
    CommandStarted,
    FileChange,
    FileEdit,
    ItemNote,
    Notice,
    ToolCall,
)

MAX_TEXT = 4000  # characters of agent text or command output kept per event
TERMINAL_TOOLS = ("terminal", "execute_bash", "bash")
FILE_TOOLS = ("file_editor", "str_replace_editor")


def usage_from_stats(stats: Any) -> TokenUsage | None:
    """Sum ``stats.usage_to_metrics.<usage_id>`` into absolute conversation totals.

    ``prompt_tokens`` -> input (cache reads are a subset), ``completion_tokens`` -> output,
    ``reasoning_tokens`` -> reasoning, ``accumulated_cost`` (USD) -> ``cost_usd``. The
    server's ``TokenUsage`` has no total: it is derived as input + output. A metrics entry
    without ``accumulated_token_usage`` counts the sum of its per-call ``token_usages``
    (the SDK's ``Metrics`` keeps both). Missing counts are 0, the SDK's defaults. ``None``
    when ``stats`` has no usable ``usage_to_metrics`` map.
    """
    if not isinstance(stats, dict) or not isinstance(stats.get("usage_to_metrics"), dict):
        return None
    inp = cached = out = reasoning = 0
    cost = 0.0
    for metrics in stats["usage_to_metrics"].values():
        if not isinstance(metrics, dict):
            continue
        acc = metrics.get("accumulated_token_usage")
        if isinstance(acc, dict):
            calls = [acc]
        else:
            listed = metrics.get("token_usages")
            calls = [u for u in listed if isinstance(u, dict)] if isinstance(listed, list) else []
        for call in calls:
            inp += _int(call.get("prompt_tokens"))
            cached += _int(call.get("cache_read_tokens"))
            out += _int(call.get("completion_tokens"))
            reasoning += _int(call.get("reasoning_tokens"))
        c = metrics.get("accumulated_cost")
        if isinstance(c, int | float) and not isinstance(c, bool) and c > 0:
            cost += float(c)
    return TokenUsage.derived(
        input_tokens=inp,
        cached_input_tokens=min(cached, inp),
        output_tokens=out,
        reasoning_tokens=min(reasoning, out),
        total_tokens=None,
        cost_usd=cost,
    )


def state_update(event: WireEvent) -> tuple[str | None, TokenUsage | None, str | None]:
    """From a ``ConversationStateUpdateEvent``: ``(execution_status, usage, policy kind)``.

    ``key == "full_state"`` carries the whole state in ``value``; other keys carry one field.
    """
    if event.get("kind") != "ConversationStateUpdateEvent":
        return None, None, None
    key, value = event.get("key"), event.get("value")
    if key == "full_state" and isinstance(value, dict):
        status = value.get("execution_status")
        policy = value.get("confirmation_policy")
        return (
            status if isinstance(status, str) else None,
            usage_from_stats(value.get("stats")),
            policy.get("kind") if isinstance(policy, dict) else None,
        )
    if key == "execution_status" and isinstance(value, str):
        return value, None, None
    if key == "stats":
        return None, usage_from_stats(value), None
    if key == "confirmation_policy" and isinstance(value, dict):
        kind = value.get("kind")
        return None, None, kind if isinstance(kind, str) else None
    return None, None, None


def action_command(event: WireEvent) -> str:
    """A one-line description of an ``ActionEvent``'s action (the command for ``terminal``)."""
    action = event.get("action") if isinstance(event.get("action"), dict) else {}
    tool = str(event.get("tool_name") or action.get("kind") or "action")
    if isinstance(action.get("command"), str) and tool in TERMINAL_TOOLS:
        return action["command"]
    if tool in FILE_TOOLS:
        return f"{action.get('command', 'edit')} {action.get('path', '')}".strip()
    summary = event.get("summary")
    if isinstance(summary, str) and summary:
        return summary
    return tool


def message_text(event: WireEvent) -> str:
    msg = event.get("llm_message")
    if not isinstance(msg, dict):
        return ""
    return _clip(_content_text(msg.get("content")))


def translate(event: WireEvent) -> AgentEvent | None:
    """The normalized event for one wire event, or ``None`` for bookkeeping-only kinds.

    ``ConversationStateUpdateEvent`` is handled by the session (status, tokens), not here.
    """
    kind = event.get("kind")
    wire = {"wire_id": _opt_str(event.get("id")), "item_type": _opt_str(kind)}
    if kind == "MessageEvent":
        if event.get("source") != "agent":
            return None
        return AgentEvent(
            kind=EventKind.MESSAGE, message=message_text(event), payload=ItemNote(**wire)
        )
    if kind == "ActionEvent":
        if event.get("action") is None:
            return None  # a tool call the SDK could not parse; an AgentErrorEvent follows
        tool = str(event.get("tool_name") or "")
        command = action_command(event)
        item = {**wire, "item_id": wire["wire_id"], "tool": tool}
        if tool in TERMINAL_TOOLS:
            started = CommandStarted(**item, command=command)
            return AgentEvent(kind=EventKind.COMMAND_STARTED, message=command, payload=started)
        action = event["action"] if isinstance(event["action"], dict) else {}
        if tool in FILE_TOOLS:
            path = action.get("path")
            edits = (FileEdit(path=path),) if isinstance(path, str) else ()
            change = FileChange(**item, changes=edits)
            return AgentEvent(kind=EventKind.FILE_CHANGE, message=command, payload=change)
        if tool == "finish":
            text = action.get("message") if isinstance(action.get("message"), str) else ""
            note = ItemNote(**{k: v for k, v in item.items() if k != "tool"})
            return AgentEvent(kind=EventKind.MESSAGE, message=_clip(text), payload=note)
        call = ToolCall(**item)
        return AgentEvent(kind=EventKind.TOOL_CALL, message=command, payload=call)
    if kind == "ObservationEvent":
        obs = event.get("observation") if isinstance(event.get("observation"), dict) else {}
        tool = str(event.get("tool_name") or "")
        text = _clip(_content_text(obs.get("content")))
        item = {**wire, "item_id": _opt_str(event.get("action_id")), "tool": tool}
        if tool in TERMINAL_TOOLS:
            code = obs.get("exit_code")
            ended = CommandEnded(
                **item,
                command=str(obs.get("command") or ""),
                exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
                output=text,
            )
            line = text or f"exit code {obs.get('exit_code')}"
            return AgentEvent(kind=EventKind.COMMAND_COMPLETED, message=line, payload=ended)
        call = ToolCall(**item, status="completed", result=text)
        return AgentEvent(kind=EventKind.TOOL_CALL, message=f"{tool} result: {text}", payload=call)
    if kind == "UserRejectObservation":
        reason = str(event.get("rejection_reason") or "")
        notice = Notice(
            notice="rejected", item_id=_opt_str(event.get("action_id")), wire_id=wire["wire_id"]
        )
        return AgentEvent(
            kind=EventKind.WARNING, message=f"action rejected: {reason}", payload=notice
        )
    if kind == "AgentErrorEvent":
        err = _clip(str(event.get("error") or "agent error"))
        return AgentEvent(
            kind=EventKind.ERROR, message=err, payload=AgentTrouble(wire_id=wire["wire_id"])
        )
    if kind == "ConversationErrorEvent":
        err = _clip(f"{event.get('code') or 'error'}: {event.get('detail') or ''}")
        return AgentEvent(
            kind=EventKind.ERROR, message=err, payload=AgentTrouble(wire_id=wire["wire_id"])
        )
    if kind in ("PauseEvent", "InterruptEvent"):
        word = "paused" if kind == "PauseEvent" else "interrupted"
        return AgentEvent(
            kind=EventKind.NOTIFICATION, message=f"conversation {word}", payload=ItemNote(**wire)
        )
    if kind == "StreamingDeltaEvent":
        delta = event.get("content") or event.get("delta") or ""
        return AgentEvent(
            kind=EventKind.MESSAGE_DELTA, message=str(delta), payload=ItemNote(**wire)
        )
    if kind in (
        "ConversationStateUpdateEvent",
        "SystemPromptEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
    ):
        return None
    return AgentEvent(kind=EventKind.NOTIFICATION, message=str(kind), payload=ItemNote(**wire))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text") or "") for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
