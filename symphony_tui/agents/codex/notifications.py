"""Notification dispatch of a codex session (spec §10.4; docs/protocols.md "Notifications").

Maps each app-server notification of this session's thread to events (items, deltas,
plan, diff, tokens, rate limits, errors, warnings) and to the turn lifecycle
(``turn/started``, ``turn/completed``, idle ``thread/status/changed``,
``serverRequest/resolved``). Notifications of other threads (sub-agents) are ignored.
"""

from __future__ import annotations

from typing import Any

from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.turns import TurnLifecycle
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import (
    AgentTrouble,
    Notice,
    RateLimitReport,
    TokenReport,
    TurnDiff,
)

_WARNING_METHODS = ("warning", "configWarning", "deprecationNotice", "guardianWarning")


class NotificationDispatch(TurnLifecycle):
    """Turns the server's notifications into events and turn transitions."""

    def _on_notification(self, method: str, p: dict[str, Any]) -> None:
        tid = p.get("threadId")
        if tid is not None and self._thread_id is not None and tid != self._thread_id:
            return  # another thread (a sub-agent): not this session's story
        turn = self._turn
        if method == "turn/started":
            t = p.get("turn") or {}
            if turn is not None and turn.turn_id is None and t.get("id"):
                self._set_turn_id(turn, str(t["id"]))
        elif method == "item/started":
            item = p.get("item") or {}
            if item.get("type") == "fileChange":
                paths = tuple(str(c.get("path")) for c in item.get("changes") or [])
                self._file_items[str(item.get("id"))] = paths
            if turn is not None and item.get("id") and item.get("type") != "userMessage":
                turn.open_items[str(item["id"])] = item
            self._emit_opt(ev.item_event(item, "started"))
        elif method == "item/completed":
            item = p.get("item") or {}
            if turn is not None:
                turn.open_items.pop(str(item.get("id")), None)
            self._emit_opt(ev.item_event(item, "completed"))
        elif method == "item/agentMessage/delta":
            self._stream(EventKind.MESSAGE_DELTA, ev.cap(p.get("delta")), _opt_str(p.get("itemId")))
        elif method in ("item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
            # A MESSAGE_DELTA flagged ``reasoning``: keeps a long think from looking
            # stalled and lets the console show it; the completed item is REASONING.
            self._stream(
                EventKind.MESSAGE_DELTA,
                ev.cap(p.get("delta")),
                _opt_str(p.get("itemId")),
                reasoning=True,
                summary=method.endswith("summaryTextDelta"),
            )
        elif method == "item/commandExecution/outputDelta":
            self._stream(
                EventKind.COMMAND_OUTPUT, ev.cap(p.get("delta")), _opt_str(p.get("itemId"))
            )
        elif method == "turn/plan/updated":
            self._emit(ev.plan_event(p))
        elif method == "turn/diff/updated":
            diff = ev.cap(p.get("diff"))
            self._emit(
                AgentEvent(
                    kind=EventKind.NOTIFICATION, message="diff updated", payload=TurnDiff(diff=diff)
                )
            )
        elif method == "thread/tokenUsage/updated":
            self._on_tokens(p)
        elif method == "account/rateLimits/updated":
            limits = ev.rate_limits(p.get("rateLimits") if isinstance(p, dict) else None)
            self._emit(
                AgentEvent(
                    kind=EventKind.RATE_LIMITS,
                    message="rate limits updated",
                    payload=RateLimitReport(rate_limits=limits),
                )
            )
        elif method == "error":
            retry = bool(p.get("willRetry"))
            self._emit(
                AgentEvent(
                    kind=EventKind.ERROR,
                    message=ev.error_text(p.get("error")),
                    payload=AgentTrouble(will_retry=retry, turn_id=_opt_str(p.get("turnId"))),
                )
            )
        elif method in _WARNING_METHODS:
            text = p.get("message") or p.get("summary") or p.get("details") or method
            self._emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=ev.cap(text, 2000),
                    payload=Notice(notice=method),
                )
            )
        elif method == "turn/completed":
            self._on_turn_completed(p)
        elif method == "thread/status/changed":
            status = p.get("status") or {}
            if status.get("type") == "idle" and turn is not None and not turn.done.done():
                self._spawn(self._idle_fallback(turn))
        elif method == "serverRequest/resolved":
            task = self._serving.pop(p.get("requestId"), None)
            if task is not None:
                task.cancel()  # codex settled it (e.g. the turn was interrupted)

    def _emit_opt(self, event: AgentEvent | None) -> None:
        if event is not None:
            self._emit(event)

    def _on_tokens(self, p: dict[str, Any]) -> None:
        """Absolute thread totals -> TOKEN_USAGE. Totals reported before this session's
        first turn are the restored totals of a resumed thread (``attached``: a baseline,
        not new usage). codex sends them before its ``thread/resume`` answer, so they are
        held until the thread is known and emitted after SESSION_STARTED."""
        if self._thread_id is None:
            self._early_tokens = p
            return
        usage = p.get("tokenUsage") or {}
        total = ev.token_usage(usage.get("total"))
        last = ev.token_usage(usage.get("last"))
        window = usage.get("modelContextWindow")
        report = TokenReport(
            usage=total,
            last=last,
            model_context_window=window if isinstance(window, int) else None,
            turn_id=_opt_str(p.get("turnId")),
            attached=self._turn is None,
        )
        self._emit(
            AgentEvent(
                kind=EventKind.TOKEN_USAGE,
                message=f"tokens: {total.total_tokens} total ({last.total_tokens} last)",
                payload=report,
            )
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
