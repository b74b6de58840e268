"""Codex v2 notifications and thread items -> normalized :class:`AgentEvent` values.

Pure functions (no I/O). Shapes follow the 0.171 schema (``codex app-server
generate-json-schema``) and docs/protocols.md "Codex app-server". Agent text stays raw (the
console sanitizes) but every text field is capped at :data:`symphony_tui.text.MAX_TEXT` characters.

Item events carry ``item_id`` and ``status`` in their payload so a consumer can pair a
start with its end; :func:`item_closed_event` synthesizes the end of an item the server never
closed (an interrupted turn).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from symphony_tui.domain import AgentEvent, EventKind, RateLimits, RateLimitWindow, TokenUsage
from symphony_tui.domain.payloads import (
    CommandEnded,
    CommandStarted,
    FileChange,
    FileEdit,
    ItemNote,
    Payload,
    Plan,
    PlanStep,
    ToolCall,
    plan_status,
)
from symphony_tui.domain.tokens import reported_count
from symphony_tui.text import cap, cap_tail


def token_usage(b: dict[str, Any] | None) -> TokenUsage:
    """A codex ``TokenUsageBreakdown`` (camelCase) -> :class:`TokenUsage`. A count the
    report omits (or sends as something other than an integer >= 0) is derived from the
    others where it can be (``totalTokens`` = input + output; :meth:`TokenUsage.derived`)."""
    b = b if isinstance(b, dict) else {}
    return TokenUsage.derived(
        input_tokens=reported_count(b.get("inputTokens")),
        cached_input_tokens=reported_count(b.get("cachedInputTokens")),
        output_tokens=reported_count(b.get("outputTokens")),
        reasoning_tokens=reported_count(b.get("reasoningOutputTokens")),
        total_tokens=reported_count(b.get("totalTokens")),
    )


def _window(w: Any) -> RateLimitWindow | None:
    if not isinstance(w, dict):
        return None
    resets = w.get("resetsAt")
    at = None
    if isinstance(resets, int | float) and not isinstance(resets, bool):
        # resetsAt is epoch seconds (milliseconds when implausibly large).
        at = datetime.fromtimestamp(resets / 1000 if resets > 1e11 else resets, tz=UTC)
    used = w.get("usedPercent")
    mins = w.get("windowDurationMins")
    return RateLimitWindow(
        used_percent=float(used) if isinstance(used, int | float) else None,
        window_minutes=int(mins) if isinstance(mins, int | float) else None,
        resets_at=at,
    )


def rate_limits(r: dict[str, Any] | None) -> RateLimits:
    """``account/rateLimits/updated`` ``rateLimits`` (v2 camelCase) -> :class:`RateLimits`."""
    r = r or {}
    raw_credits = r.get("credits")
    credits: dict[str, Any] = raw_credits if isinstance(raw_credits, dict) else {}
    balance = credits.get("balance")
    return RateLimits(
        source="codex",
        limit_id=r.get("limitId"),
        limit_name=r.get("limitName"),
        primary=_window(r.get("primary")),
        secondary=_window(r.get("secondary")),
        credits_balance=None if balance is None else str(balance),
        has_credits=credits.get("hasCredits"),
        unlimited=credits.get("unlimited"),
        plan_type=r.get("planType"),
        raw=r,
    )


def _changes(item: dict[str, Any]) -> tuple[FileEdit, ...]:
    out = []
    for c in item.get("changes") or []:
        if not isinstance(c, dict):
            continue
        kind = c.get("kind")
        kind = kind.get("type") if isinstance(kind, dict) else kind
        out.append(
            FileEdit(
                path=str(c.get("path") or ""),
                kind=kind if isinstance(kind, str) else None,
                diff=cap(c.get("diff"), 16 * 1024),
            )
        )
    return tuple(out)


def _small(value: Any, limit: int = 8192) -> Any:
    """``value`` itself when its JSON form is small, else a capped JSON string."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return cap(str(value), limit)
    return value if len(text) <= limit else cap(text, limit)


def _tool_text(item: dict[str, Any]) -> str:
    parts = []
    for c in item.get("contentItems") or []:
        if isinstance(c, dict) and c.get("text"):
            parts.append(str(c["text"]))
    return "\n".join(parts)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def item_event(item: dict[str, Any], phase: str) -> AgentEvent | None:
    """The event for ``item/started`` (``phase="started"``) or ``item/completed``.

    None for items with nothing to show (user messages, a message that only started).
    """
    typ = item.get("type")
    tname = _str(typ)
    iid = _str(item.get("id"))
    status = str(item.get("status") or ("inProgress" if phase == "started" else "completed"))
    if typ == "commandExecution":
        command = cap(item.get("command"), 8192)
        cwd = _str(item.get("cwd"))
        if phase == "started":
            started = CommandStarted(
                item_id=iid, item_type=tname, status=status, command=command, cwd=cwd
            )
            return AgentEvent(kind=EventKind.COMMAND_STARTED, message=command, payload=started)
        code = _opt_int(item.get("exitCode"))
        ended = CommandEnded(
            item_id=iid,
            item_type=tname,
            status=status,
            command=command,
            exit_code=code,
            duration_ms=_opt_int(item.get("durationMs")),
            output=cap_tail(item.get("aggregatedOutput") or ""),
        )
        tail = f"exit {code}" if code is not None else status
        return AgentEvent(
            kind=EventKind.COMMAND_COMPLETED, message=f"{command} ({tail})", payload=ended
        )
    if typ == "fileChange":
        change = FileChange(item_id=iid, item_type=tname, status=status, changes=_changes(item))
        verb = "editing" if phase == "started" else f"edit {status}:"
        paths = [c.path for c in change.changes]
        return AgentEvent(
            kind=EventKind.FILE_CHANGE, message=f"{verb} {', '.join(paths)}", payload=change
        )
    if typ in ("mcpToolCall", "dynamicToolCall"):
        tool = str(item.get("tool") or "")
        if item.get("server"):
            tool = f"{item['server']}.{tool}"
        call = ToolCall(
            item_id=iid,
            item_type=tname,
            status=status,
            tool=tool,
            arguments=_small(item.get("arguments")),
        )
        if phase == "completed":
            success = item.get("success")
            call = ToolCall(
                item_id=iid,
                item_type=tname,
                status=status,
                tool=tool,
                arguments=call.arguments,
                success=success if isinstance(success, bool) else None,
                result=cap(_tool_text(item), 8192),
                error=cap(item.get("error"), 2048) if item.get("error") else None,
            )
        return AgentEvent(kind=EventKind.TOOL_CALL, message=f"{tool} {status}", payload=call)
    if phase == "started":
        return None
    note = ItemNote(item_id=iid, item_type=tname, status=status)
    if typ == "agentMessage":
        return AgentEvent(kind=EventKind.MESSAGE, message=cap(item.get("text")), payload=note)
    if typ == "reasoning":
        parts = [str(s) for s in (item.get("summary") or item.get("content") or [])]
        return AgentEvent(kind=EventKind.REASONING, message=cap("\n".join(parts)), payload=note)
    if typ == "plan":
        return AgentEvent(
            kind=EventKind.PLAN,
            message=cap(item.get("text")),
            payload=Plan(item_id=iid, item_type=tname),
        )
    if typ in ("userMessage", "hookPrompt", "functionCallOutput"):
        return None
    return AgentEvent(kind=EventKind.NOTIFICATION, message=f"{typ} {status}", payload=note)


def item_closed_event(item: dict[str, Any], status: str) -> AgentEvent:
    """A synthetic end for an item the server left open (``status``: e.g. ``interrupted``)."""
    typ = tname = str(item.get("type") or "item")
    iid = _str(item.get("id"))
    label = item.get("command") or item.get("tool") or typ
    message = f"{cap(label, 200)} ({status})"
    payload: Payload
    if typ == "commandExecution":
        kind = EventKind.COMMAND_COMPLETED
        command = cap(item.get("command"), 8192)
        payload = CommandEnded(
            item_id=iid, item_type=tname, status=status, synthetic=True, command=command
        )
    elif typ == "fileChange":
        kind = EventKind.FILE_CHANGE
        payload = FileChange(item_id=iid, item_type=tname, status=status, synthetic=True)
    elif typ in ("mcpToolCall", "dynamicToolCall"):
        kind = EventKind.TOOL_CALL
        tool = str(item.get("tool") or "")
        payload = ToolCall(item_id=iid, item_type=tname, status=status, synthetic=True, tool=tool)
    elif typ == "plan":
        kind, payload = EventKind.PLAN, Plan(item_id=iid, item_type=tname)
    else:
        kind = {"agentMessage": EventKind.MESSAGE, "reasoning": EventKind.REASONING}.get(
            typ, EventKind.NOTIFICATION
        )
        payload = ItemNote(item_id=iid, item_type=tname, status=status, synthetic=True)
    return AgentEvent(kind=kind, message=message, payload=payload)


def plan_event(params: dict[str, Any]) -> AgentEvent:
    """``turn/plan/updated {explanation?, plan:[{step, status}]}`` -> PLAN (steps in the
    neutral words: ``pending`` / ``in_progress`` / ``completed``)."""
    raw = [s for s in params.get("plan") or [] if isinstance(s, dict)]
    steps = tuple(
        PlanStep(step=str(s.get("step") or ""), status=plan_status(s.get("status"))) for s in raw
    )
    explanation = str(params["explanation"]) if params.get("explanation") else None
    lines = [f"[{s.get('status')}] {s.get('step') or ''}" for s in raw]
    msg = "\n".join(([explanation] if explanation else []) + lines)
    plan = Plan(steps=steps, explanation=explanation)
    return AgentEvent(kind=EventKind.PLAN, message=cap(msg), payload=plan)


def error_text(err: Any) -> str:
    """One line from a codex ``TurnError`` / ``error`` payload."""
    if isinstance(err, dict):
        msg = str(err.get("message") or "")
        extra = err.get("additionalDetails")
        if extra:
            msg = f"{msg} ({extra})"
        return cap(msg.replace("\n", " "), 2000) or "unknown error"
    return cap(str(err), 2000) if err else "unknown error"
