"""Notification decoding of a codex session (spec §10.4; docs/protocols.md "Notifications").

Maps each app-server notification of this session's thread to events (items, deltas,
plan, diff, tokens, rate limits, errors, warnings) and to the turn lifecycle
(``turn/started``, ``turn/completed``, idle ``thread/status/changed``,
``serverRequest/resolved``). Notifications of other threads (sub-agents) are ignored.
"""

from __future__ import annotations

from typing import Any

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.codex import events as ev
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.eager import SessionTasks
from symphony_tui.agents.codex.turns import END_STATUS, PendingRequests, TurnTracker
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import (
    AgentTrouble,
    Notice,
    RateLimitReport,
    TokenReport,
    TurnDiff,
)
from symphony_tui.text import cap

_WARNING_METHODS = ("warning", "configWarning", "deprecationNotice", "guardianWarning")


class Notifications:
    """Turns the server's notifications (``RpcConnection`` ``on_notification``,
    :meth:`handle`) into events through ``outlet`` and into transitions of ``turns``.

    ``serverRequest/resolved`` withdraws a request from ``pending``; an idle thread starts
    the ``thread/read`` fallback in ``tasks``; ``file_paths`` gets the paths of each
    file-change item as it starts (its approval request names only the item).
    """

    def __init__(
        self,
        turns: TurnTracker,
        outlet: EventOutlet,
        pending: PendingRequests,
        tasks: SessionTasks,
        file_paths: dict[str, tuple[str, ...]],
    ) -> None:
        self._turns = turns
        self._out = outlet
        self._pending = pending
        self._tasks = tasks
        self._file_paths = file_paths
        #: Token totals seen before the thread id was known (see :meth:`_tokens`).
        self._early_tokens: dict[str, Any] | None = None

    def handle(self, method: str, p: dict[str, Any]) -> None:
        """One notification ``method`` with its ``params``."""
        thread_id = self._turns.thread_id
        tid = p.get("threadId")
        if tid is not None and thread_id is not None and tid != thread_id:
            return  # another thread (a sub-agent): not this session's story
        turn = self._turns.turn
        if method == "turn/started":
            t = p.get("turn") or {}
            if turn is not None and turn.turn_id is None and t.get("id"):
                self._turns.set_turn_id(turn, str(t["id"]))
        elif method == "item/started":
            item = p.get("item") or {}
            if item.get("type") == "fileChange":
                paths = tuple(str(c.get("path")) for c in item.get("changes") or [])
                self._file_paths[str(item.get("id"))] = paths
            if turn is not None and item.get("id") and item.get("type") != "userMessage":
                turn.open_items[str(item["id"])] = item
            self._out.emit_opt(ev.item_event(item, "started"))
        elif method == "item/completed":
            item = p.get("item") or {}
            if turn is not None:
                turn.open_items.pop(str(item.get("id")), None)
            self._out.emit_opt(ev.item_event(item, "completed"))
        elif method == "item/agentMessage/delta":
            self._out.stream(
                EventKind.MESSAGE_DELTA, cap(p.get("delta")), _opt_str(p.get("itemId"))
            )
        elif method in ("item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
            # A MESSAGE_DELTA flagged ``reasoning``: keeps a long think from looking
            # stalled and lets the console show it; the completed item is REASONING.
            self._out.stream(
                EventKind.MESSAGE_DELTA,
                cap(p.get("delta")),
                _opt_str(p.get("itemId")),
                reasoning=True,
                summary=method.endswith("summaryTextDelta"),
            )
        elif method == "item/commandExecution/outputDelta":
            self._out.stream(
                EventKind.COMMAND_OUTPUT, cap(p.get("delta")), _opt_str(p.get("itemId"))
            )
        elif method == "turn/plan/updated":
            self._out.emit(ev.plan_event(p))
        elif method == "turn/diff/updated":
            diff = cap(p.get("diff"))
            self._out.emit(
                AgentEvent(
                    kind=EventKind.NOTIFICATION, message="diff updated", payload=TurnDiff(diff=diff)
                )
            )
        elif method == "thread/tokenUsage/updated":
            self._tokens(p)
        elif method == "account/rateLimits/updated":
            limits = ev.rate_limits(p.get("rateLimits") if isinstance(p, dict) else None)
            self._out.emit(
                AgentEvent(
                    kind=EventKind.RATE_LIMITS,
                    message="rate limits updated",
                    payload=RateLimitReport(rate_limits=limits),
                )
            )
        elif method == "error":
            retry = bool(p.get("willRetry"))
            self._out.emit(
                AgentEvent(
                    kind=EventKind.ERROR,
                    message=ev.error_text(p.get("error")),
                    payload=AgentTrouble(will_retry=retry, turn_id=_opt_str(p.get("turnId"))),
                )
            )
        elif method in _WARNING_METHODS:
            text = p.get("message") or p.get("summary") or p.get("details") or method
            self._out.emit(
                AgentEvent(
                    kind=EventKind.WARNING,
                    message=cap(text, 2000),
                    payload=Notice(notice=method),
                )
            )
        elif method == "turn/completed":
            self._turns.completed(p)
        elif method == "thread/status/changed":
            status = p.get("status") or {}
            if status.get("type") == "idle" and turn is not None and not turn.done.done():
                self._tasks.spawn(self._turns.idle_fallback(turn))
        elif method == "serverRequest/resolved":
            self._pending.settle(p.get("requestId"))  # e.g. the turn was interrupted

    def malformed(self, reason: str) -> None:
        """A line that is not a JSON-RPC message (``RpcConnection`` ``on_malformed``)."""
        self._out.emit(AgentEvent(kind=EventKind.MALFORMED, message=cap(reason, 500)))

    def thread_opened(self) -> None:
        """The thread id is known: the token totals reported before it go out now."""
        early, self._early_tokens = self._early_tokens, None
        if early is not None and early.get("threadId") in (None, self._turns.thread_id):
            self._tokens(early)

    def replay(self, found: dict[str, Any]) -> None:
        """What a re-attached session missed of its turn in flight (``found``, as
        ``thread/turns/list`` lists it; ``TurnTracker.adopt``): its items as
        ``item/completed`` (one still running as ``item/started``), then its end when it
        ended meanwhile, with its persisted status."""
        turn = self._turns.turn
        if turn is None:
            return
        thread_id = self._turns.thread_id
        items = [i for i in found.get("items") or [] if isinstance(i, dict)]
        for item in items:
            if item.get("type") != "userMessage" and not turn.done.done():
                # one still running (a command waiting for its approval) is open, not done
                running = item.get("status") in ("inProgress", "pending")
                self.handle(
                    "item/started" if running else "item/completed",
                    {"threadId": thread_id, "turnId": turn.turn_id, "item": item},
                )
        ended = END_STATUS.get(str(found.get("status")))
        if ended is not None and not turn.done.done():
            error = None
            if ended is not TurnStatus.COMPLETED:
                error = ev.error_text(found.get("error")) if found.get("error") else ended.value
            self._turns.end(turn, ended, error)

    def _tokens(self, p: dict[str, Any]) -> None:
        """Absolute thread totals -> TOKEN_USAGE. Totals reported before this session's
        first turn are the restored totals of a resumed thread (``attached``: a baseline,
        not new usage). codex sends them before its ``thread/resume`` answer, so they are
        held until the thread is known and emitted after SESSION_STARTED."""
        if self._turns.thread_id is None:
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
            attached=self._turns.turn is None,
        )
        self._out.emit(
            AgentEvent(
                kind=EventKind.TOKEN_USAGE,
                message=f"tokens: {total.total_tokens} total ({last.total_tokens} last)",
                payload=report,
            )
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
