"""Reading format-1 events (JSONL lines and API answers written before ``v`` existed).

A format-1 event had no ``v`` and a free ``data`` object whose keys were conventions per
kind (codex ``{turn_id, status, error}`` turn ends, OpenHands / OpenCode ``{outcome,
reason}``, ``{"usage": {...}}`` token reports...). :func:`upgrade_v1` reads that object
into the typed payload of the event's kind. A ``data`` object that does not fit its kind
loses only the payload: the event itself (kind, message, ids, time, seq) still loads.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from symphony_tui.domain import payloads as p

_ITEM_KINDS = ("message", "reasoning", "message_delta", "command_output")
_TURN_ENDS = {"turn_completed": "completed", "turn_cancelled": "interrupted"}
_OUTCOMES = {"finished": "completed", "completed": "completed"}

_Model = TypeVar("_Model", bound=BaseModel)


def upgrade_v1(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` (a format-1 mapping) with ``data`` replaced by a ``payload``."""
    out = {k: v for k, v in event.items() if k != "data"}
    data = event.get("data")
    if isinstance(data, dict) and data:
        try:
            out["payload"] = _payload(str(event.get("kind")), data)
        except (ValidationError, TypeError, ValueError):
            out["payload"] = None
    return out


def _build(cls: type[_Model], data: dict[str, Any], **renames: str) -> _Model:
    fields = {k: v for k, v in data.items() if k in cls.model_fields and v is not None}
    for new, old in renames.items():
        if data.get(old) is not None:
            fields[new] = data[old]
    fields.pop("type", None)
    return cls.model_validate(fields)


def _payload(kind: str, d: dict[str, Any]) -> BaseModel | None:
    ids = {"item_id": d.get("item_id") or d.get("part_id"), "wire_id": d.get("event_id")}
    item = {k: str(v) for k, v in ids.items() if v is not None}
    if kind == "session_started":
        return _build(
            p.SessionStarted,
            {**d, "state": d.get("execution_status") or d.get("status")},
            pending_approvals="pending_confirmations"
            if "pending_confirmations" in d
            else "pending_requests",
        )
    if kind == "turn_started":
        return _build(p.TurnStarted, d)
    if kind in ("turn_completed", "turn_failed", "turn_cancelled"):
        return _turn_end(kind, d)
    if kind in _ITEM_KINDS or (kind == "notification" and "item_id" in d):
        return _build(p.ItemNote, {**d, **item})
    if kind == "command_started":
        return _build(p.CommandStarted, {**d, **item})
    if kind == "command_completed":
        output = d.get("output") or d.get("aggregated_output") or ""
        return _build(p.CommandEnded, {**d, **item, "output": output})
    if kind == "file_change":
        return _file_change(d, item)
    if kind == "tool_call":
        return _build(p.ToolCall, {**d, **item})
    if kind == "plan":
        steps = [
            p.PlanStep(step=str(s["step"]), status=p.plan_status(s.get("status")))
            for s in d.get("plan") or []
            if isinstance(s, dict) and s.get("step")
        ]
        return p.Plan(steps=tuple(steps))
    if kind == "approval_requested":
        return _build(p.ApprovalAsked, d, approval_kind="kind")
    if kind == "approval_resolved":
        return _build(p.ApprovalAnswered, d)
    if kind == "token_usage":
        return _build(p.TokenReport, d) if isinstance(d.get("usage"), dict) else None
    if kind == "rate_limits":
        return _build(p.RateLimitReport, d) if isinstance(d.get("rate_limits"), dict) else None
    if kind == "error":
        return _build(p.AgentTrouble, {**d, "wire_id": item.get("wire_id")})
    if kind == "notification" and d.get("operator_note"):
        return _build(p.NoteDelivered, d)
    if kind == "notification" and isinstance(d.get("status"), str):
        return _build(p.ServerStatus, d)
    if kind == "notification" and isinstance(d.get("diff"), str):
        return _build(p.TurnDiff, d)
    if kind in ("warning", "malformed", "notification"):
        return _build(p.Notice, {**d, "wire_id": item.get("wire_id")}, notice="method")
    if kind == "hook":
        return _build(p.HookResult, d) if d.get("hook") else None
    if kind == "dispatch":
        return _build(p.Dispatched, d)
    if kind == "run_ended":
        return _build(p.RunEnded, d)
    if kind == "retry_scheduled":
        return _build(p.RetryScheduled, d)
    if kind == "operator":
        return _build(p.OperatorAction, d) if d.get("command") else None
    return None


def _turn_end(kind: str, d: dict[str, Any]) -> p.TurnEnded:
    status = d.get("status")
    if status not in ("completed", "failed", "interrupted", "input_required"):
        status = _TURN_ENDS.get(kind, "failed")
    outcome = d.get("outcome")
    if outcome in _OUTCOMES:
        outcome = _OUTCOMES[outcome]
    elif outcome == "rejected_by_operator":
        status = "failed"
    elif outcome not in ("cancelled", "declined"):
        outcome = {"completed": "completed", "interrupted": "cancelled"}.get(status, "failed")
    return p.TurnEnded(
        status=status,
        outcome=outcome,
        reason=d.get("error"),
        turn_id=d.get("turn_id"),
        rejection=d.get("reason"),
    )


def _file_change(d: dict[str, Any], item: dict[str, str]) -> p.FileChange:
    edits = [
        p.FileEdit(path=str(c["path"]), kind=c.get("kind"), diff=c.get("diff"))
        for c in d.get("changes") or []
        if isinstance(c, dict) and c.get("path")
    ]
    named = {e.path for e in edits}
    for f in d.get("files") or d.get("paths") or []:
        if isinstance(f, str) and f and f not in named:
            edits.append(p.FileEdit(path=f))
            named.add(f)
    return _build(p.FileChange, {**d, **item, "changes": tuple(edits)})
