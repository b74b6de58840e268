"""One issue's OpenHands conversation, driven turn by turn (docs/protocols.md "OpenHands
agent-server").

A turn is a user message sent with ``run: true``; it ends on the conversation's
``execution_status`` (see :func:`outcome`). A turn is *armed* once the server reports
``running`` or ``waiting_for_confirmation`` after the message, so the previous turn's
``finished`` (or the ``idle`` the server emits when a finished conversation gets a new
message) never ends the new one. If the conversation is already running or waiting for a
confirmation when a turn starts (a re-attach after a console restart), the turn adopts that
run instead of sending a message: a user message would implicitly approve pending actions.

Confirmations: on ``waiting_for_confirmation`` each pending ``ActionEvent`` (one without an
observation, rejection or error) becomes an :class:`ApprovalRequest` of kind
``CONFIRMATION`` with the stable id ``<issue_id>:<action event id>``, asked one at a time
through :meth:`SessionHost.request_approval`. The server answers all pending actions at
once, so the first decline rejects the batch. An operator rejection leaves the conversation
``idle``: the turn ends FAILED with ``rejected by operator: <reason>`` and is reported as
``TURN_CANCELLED`` with ``outcome: rejected_by_operator`` (the operator's decision, not a
crash); the scheduler's failure backoff then decides when the agent gets another go.

Client-side tools (``SessionHost.tools``, registered as the conversation's ``client_tools``):
the server only acknowledges a call to the agent ("Tool call dispatched to client.") and
emits the ``ActionEvent``; the scheduler runs it through :meth:`SessionHost.call_tool` once
its ``ClientToolObservation`` arrives live (so a rejected call never runs, and history
replayed on attach is not run again). Their confirmations are accepted without asking the
operator, as codex runs dynamic tools without an approval; a batch that also holds other
actions is asked about those. A turn returns only after its tool calls have finished, so the
scheduler's tracker refresh sees their effect. The server has no way to hand a result back
into the run (see :mod:`.client_tools`): the results go to the agent at the start of the
session's next message, and a failed call is also reported as a ``WARNING``.

Failures: a run that ends ``error`` or ``stuck`` fails the turn with the run's cause as the
one-line reason (the ``code: detail`` of its ``ConversationErrorEvent``, e.g. the model's
HTTP 500 or the iteration limit; see :mod:`.failure`). The cause trails the status on the
wire, so the turn waits for it, or for the run's closing snapshot, at most
``cause_grace_s``; without a cause the reason names the status.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost, ToolResult, TurnResult, TurnStatus
from symphony_tui.agents.http_session import HttpServerSession
from symphony_tui.agents.openhands.client import OpenHandsClient
from symphony_tui.agents.openhands.client_tools import result_line, with_results
from symphony_tui.agents.openhands.failure import FAILED_STATUSES, MAX_REASON, FailureWatch
from symphony_tui.agents.openhands.reconcile import WireEvent, order_key
from symphony_tui.agents.openhands.stream import EventStream, WsAuth
from symphony_tui.agents.openhands.translate import action_command, state_update, translate
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.domain import (
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    EventKind,
)
from symphony_tui.domain.payloads import Notice, ServerStatus
from symphony_tui.text import one_line

WAITING = "waiting_for_confirmation"
ACTIVE = ("running", WAITING)
RERUN_GRACE_S = 10.0  # how long a steered turn waits for the server's rerun (see steer)
CAUSE_GRACE_S = 10.0  # how long a failed run's cause may trail its status (see .failure)
_RESOLVING = ("ObservationEvent", "UserRejectObservation")


class OpenHandsSession(HttpServerSession):
    """A live session on one conversation. Built by ``OpenHandsBackend.start_session``."""

    sent_message = "message sent"
    adopted_message = "adopted the conversation's current run"

    def __init__(
        self,
        host: SessionHost,
        client: OpenHandsClient,
        conversation_id: str,
        *,
        ws_auth: WsAuth,
        stream_options: StreamOptions | None = None,
        pid: int | None = None,
        request_timeout_s: float = 30.0,
        cause_grace_s: float = CAUSE_GRACE_S,
    ) -> None:
        super().__init__(
            host, client, conversation_id, pid=pid, request_timeout_s=request_timeout_s
        )
        self.client: OpenHandsClient = client
        self._cause_grace_s = cause_grace_s
        self.stream = EventStream(
            client,
            conversation_id,
            ws_auth=ws_auth,
            on_event=self._on_event,
            on_notice=self._on_notice,
            on_failed=self._on_failed,
            options=stream_options,
        )
        self.status: str | None = None
        self.policy: str | None = None
        self.failure = FailureWatch()
        self._statuses: list[str] = []
        self._status_marks: list[int] = []  # failure.snapshots when each status arrived
        self._follow_from = 0  # the first status the current turn reads
        self._actions: dict[str, WireEvent] = {}
        self._answered: set[str] = set()
        self._approval_task: asyncio.Task[None] | None = None
        self._rejection: str | None = None
        self._rejected_by = "operator"  # who declined: operator | timeout | policy | auto
        self._cancelled = False
        self._client_tools = {t.name for t in host.tools}
        self._tool_actions: dict[str, WireEvent] = {}
        self._tool_tasks: set[asyncio.Task[None]] = set()
        self._tool_results: list[str] = []  # not yet handed to the agent
        # Steering: a message was sent mid-run (the server then reruns once the run ends)
        # and the end that comes before that rerun's ``running`` does not end the turn.
        self._steered = False
        self._rerun_grace_s = RERUN_GRACE_S

    # ------------------------------------------------------------ AgentSession

    @property
    def conversation_id(self) -> str:
        return self._server_session_id

    @property
    def pending_actions(self) -> list[WireEvent]:
        """Action events still waiting for a decision, oldest first."""
        return sorted(
            (a for i, a in self._actions.items() if i not in self._answered), key=order_key
        )

    async def attach(self) -> None:
        """Connect the event stream and fold in the history. Raises :class:`AgentError`."""
        await self.stream.attach()

    # ------------------------------------------------------------ turn steps

    def _start_turn(self) -> bool:
        self._cancelled = False
        self._rejection, self._rejected_by = None, "operator"
        self.failure.reset()
        adopt = self.status in ACTIVE
        # Adopting starts from the current status, so a pending confirmation is asked again.
        self._follow_from = max(len(self._statuses) - 1, 0) if adopt else len(self._statuses)
        return adopt

    async def steer(self, text: str) -> bool:
        """A user message with ``run: true`` while the conversation runs: the server adds
        it to the conversation at once (the model's next call reads it) and, as the run
        already goes on, runs again once it ends, so the model answers it even when the
        message came during its last step. Not while a confirmation waits (a message
        would not be read before the decision): False then, and between turns."""
        if not self._turn_lock.locked() or self.status != "running" or self._closed:
            return False
        self._raise_if_failed()
        self._steered = True
        try:
            await self.client.send_message(self.conversation_id, text, run=True)
        except AgentError:
            self._steered = False
            raise
        return True

    async def _send_prompt(self, prompt: str) -> None:
        results = list(self._tool_results)
        text = with_results(prompt, results)
        await self.client.send_message(self.conversation_id, text, run=True)
        del self._tool_results[: len(results)]

    async def _follow_turn(self, adopted: bool) -> TurnResult:
        try:
            result = await self._follow(self._follow_from, armed=adopted)
        finally:
            await self._stop_approvals()
        await self._finish_tool_calls()
        return result

    def _end_of_turn(self) -> tuple[str | None, bool]:
        # An operator's rejection that left the conversation idle is the operator's call.
        return self._rejection, self.status == "idle" and self._by_operator()

    async def _stop_run(self) -> None:
        """``/interrupt`` does not touch a run that waits for a confirmation (measured on
        1.58.2), so pending actions are rejected instead."""
        if self.status == WAITING:
            await self._stop_approvals()
            await self.client.respond_to_confirmation(
                self.conversation_id, accept=False, reason="interrupted by the operator"
            )
        else:
            await self.client.interrupt(self.conversation_id)

    async def _release(self) -> None:
        await self._stop_approvals()
        for task in list(self._tool_tasks):
            task.cancel()

    def _malformed_total(self) -> int:
        return self.stream.log.malformed

    # ------------------------------------------------------------ turn loop

    async def _follow(self, idx: int, *, armed: bool) -> TurnResult:
        self._steered = False
        held: str | None = None  # an end held back while a steered rerun is awaited
        while True:
            self._raise_if_failed()
            while idx < len(self._statuses):
                status = self._statuses[idx]
                idx += 1
                if status in ACTIVE:
                    armed = True
                    if status == "running":
                        held = None
                if not armed:
                    continue
                if status in ("finished", "idle") and self._steered and not self._stopped():
                    self._steered, held = False, status
                    continue
                if held is not None and status in ("finished", "idle"):
                    continue  # the trail of the steered run's end, before the rerun
                if status != WAITING:
                    await self._stop_approvals()
                if status in FAILED_STATUSES:
                    await self._await_cause(self._status_marks[idx - 1])
                result = self._outcome(status)
                if result is not None:
                    return result
            if self._cancelled and self.status != WAITING:
                return TurnResult(TurnStatus.INTERRUPTED, self.conversation_id, "cancelled")
            if armed and self.status == WAITING:
                self._maybe_ask()
            self._wake.clear()
            if held is None:
                await self._wake.wait()
                continue
            try:
                async with asyncio.timeout(self._rerun_grace_s):
                    await self._wake.wait()
            except TimeoutError:
                result = self._outcome(held)  # the rerun never came: the held end stands
                if result is not None:
                    return result

    def _stopped(self) -> bool:
        """The turn is being stopped (interrupt, cancel, a rejection): ends are final."""
        return self._interrupted or self._cancelled or self._rejection is not None

    async def _await_cause(self, mark: int) -> None:
        """Wait (at most ``cause_grace_s``) until the failed run's cause has arrived or
        the run's closing snapshot says none is coming (see :mod:`.failure`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._cause_grace_s):
                while not self.failure.settled(mark):
                    self._raise_if_failed()
                    self._wake.clear()
                    await self._wake.wait()

    def _outcome(self, status: str) -> TurnResult | None:
        """How ``status`` ends an armed turn, or ``None`` while it goes on.

        finished -> completed; error / stuck -> failed with the run's cause as the reason
        (:meth:`FailureWatch.reason`); paused -> interrupted; idle after
        an operator rejection -> failed with the rejection as the reason (the operator's
        decision); idle after an interrupt or a cancel -> interrupted.
        """
        cid = self.conversation_id
        if status == "finished":
            return TurnResult(TurnStatus.COMPLETED, cid)
        if status in FAILED_STATUSES:
            return TurnResult(TurnStatus.FAILED, cid, self.failure.reason(status))
        if status == "paused":
            why = "interrupted by the operator" if self._interrupted else "conversation paused"
            return TurnResult(TurnStatus.INTERRUPTED, cid, why)
        if status == "idle":
            if self._interrupted or self._cancelled:
                return TurnResult(TurnStatus.INTERRUPTED, cid, "interrupted by the operator")
            if self._rejection is not None:
                who = "operator" if self._by_operator() else self._rejected_by
                why = f"rejected by {who}: {self._rejection}"
                return TurnResult(TurnStatus.FAILED, cid, why)
            return TurnResult(TurnStatus.FAILED, cid, "conversation went idle without finishing")
        return None

    # ------------------------------------------------------------ approvals

    def _maybe_ask(self) -> None:
        if self._approval_task is not None and not self._approval_task.done():
            return
        self._approval_task = None
        if self.pending_actions:
            self._approval_task = asyncio.create_task(self._ask(), name="openhands-approval")
            self._approval_task.add_done_callback(lambda _t: self._wake.set())

    async def _ask(self) -> None:
        try:
            await self._ask_each(self.pending_actions)
        except asyncio.CancelledError:
            raise
        except AgentError as e:
            self._failed = e
        except Exception as e:  # a host failure must end the turn, not re-ask forever
            self._failed = AgentError("protocol_error", f"approval request failed: {e!r}")

    async def _ask_each(self, pending: list[WireEvent]) -> None:
        ids = [a["id"] for a in pending]
        # The scheduler's own tools run without an operator decision (see module doc).
        for action in [a for a in pending if a.get("tool_name") not in self._client_tools]:
            answer = await self.host.request_approval(self._request(action))
            decision = answer.decision
            if decision == ApprovalDecision.ACCEPT:
                continue
            if decision == ApprovalDecision.ACCEPT_FOR_SESSION:
                await self.client.set_confirmation_policy(self.conversation_id, "NeverConfirm")
                self.host.record_session(confirmation_policy="NeverConfirm")
                break
            self._answered.update(ids)
            if decision == ApprovalDecision.CANCEL:
                self._cancelled = True
                reason = answer.message or "cancelled by the operator"
            elif answer.timed_out:
                reason = answer.message or "approval timed out"
                self._rejection, self._rejected_by = reason, "timeout"
            else:
                reason = answer.message or f"rejected by the {answer.by}"
                self._rejection, self._rejected_by = reason, answer.by
            await self.client.respond_to_confirmation(
                self.conversation_id, accept=False, reason=reason
            )
            return
        # Every action was accepted, one by one or for the rest of the session.
        self._answered.update(ids)
        await self.client.respond_to_confirmation(self.conversation_id, accept=True)

    # ------------------------------------------------------------ client tools

    def _start_tool_call(self, observation: WireEvent) -> None:
        action = self._tool_actions.pop(str(observation.get("action_id")), None)
        name = str(observation.get("tool_name") or "")
        raw = action.get("action") if action is not None else None
        args = {k: v for k, v in raw.items() if k != "kind"} if isinstance(raw, dict) else {}
        task = asyncio.create_task(self._call_tool(name, args), name=f"openhands-tool-{name}")
        self._tool_tasks.add(task)
        task.add_done_callback(self._tool_tasks.discard)

    async def _call_tool(self, name: str, args: dict[str, Any]) -> None:
        try:
            result = await self.host.call_tool(name, args)
        except Exception as e:  # call_tool never raises by contract; keep the turn alive
            result = ToolResult(False, f"the scheduler failed to run it: {e!r}")
        self._tool_results.append(result_line(name, args, result))
        if not result.success:
            self._emit(
                EventKind.WARNING,
                f"{name} failed: {one_line(result.text, MAX_REASON)}",
                Notice(notice="tool_failed", tool=name),
            )

    async def _finish_tool_calls(self) -> None:
        """Wait (bounded) for client-tool calls started during the turn."""
        if not self._tool_tasks:
            return
        _done, late = await asyncio.wait(list(self._tool_tasks), timeout=self._request_timeout_s)
        for task in late:
            task.cancel()
            self._emit(EventKind.WARNING, f"client tool call {task.get_name()} timed out")

    def _request(self, action: WireEvent) -> ApprovalRequest:
        issue = self.host.issue
        command = action_command(action)
        thought = _thought(action)
        return ApprovalRequest(
            id=f"{issue.id}:{action['id']}",
            issue_id=issue.id,
            issue_identifier=issue.identifier,
            backend="openhands",
            kind=ApprovalKind.CONFIRMATION,
            summary=f"{action.get('tool_name') or 'action'}: {command}",
            command=command,
            cwd=str(self.host.workspace),
            reason=thought or None,
            created_at=datetime.now(UTC),
            details={
                "conversation_id": self.conversation_id,
                "action_id": action["id"],
                "tool": action.get("tool_name"),
                "tool_call_id": action.get("tool_call_id"),
                "security_risk": action.get("security_risk"),
            },
        )

    async def _stop_approvals(self) -> None:
        task, self._approval_task = self._approval_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------ stream callbacks

    def _on_event(self, event: WireEvent, replay: bool) -> None:
        kind = event.get("kind")
        if kind == "ActionEvent" and event.get("action") is not None:
            self._actions[event["id"]] = event
            if event.get("tool_name") in self._client_tools:
                self._tool_actions[event["id"]] = event
        elif kind in _RESOLVING:
            self._actions.pop(str(event.get("action_id")), None)
            if _is_client_tool_result(event, self._client_tools) and not replay:
                self._start_tool_call(event)
            else:
                self._tool_actions.pop(str(event.get("action_id")), None)
        if kind in _RESOLVING or kind == "AgentErrorEvent":
            call = event.get("tool_call_id")
            if call:
                for aid in [i for i, a in self._actions.items() if a.get("tool_call_id") == call]:
                    del self._actions[aid]
        mark = self.failure.snapshots
        self.failure.observe(event)
        status, usage, policy = state_update(event)
        if policy:
            self.policy = policy
        if usage is not None and usage != self.usage:
            self.usage = usage
            if not replay:
                self._emit_usage()
        if status and status != self.status:
            self.status = status
            self._statuses.append(status)
            self._status_marks.append(mark)
            if not replay:
                self._emit(
                    EventKind.NOTIFICATION,
                    f"execution_status: {status}",
                    ServerStatus(status=status),
                )
        if not replay:
            normalized = translate(event)
            if normalized is not None:
                self.host.emit(normalized)
        self._wake.set()

    def _by_operator(self) -> bool:
        return self._rejected_by == "operator"


def _is_client_tool_result(event: WireEvent, names: set[str]) -> bool:
    obs = event.get("observation")
    return (
        event.get("kind") == "ObservationEvent"
        and event.get("tool_name") in names
        and isinstance(obs, dict)
        and obs.get("kind") == "ClientToolObservation"
    )


def _thought(action: WireEvent) -> str:
    parts = action.get("thought")
    if isinstance(parts, list):
        text = " ".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))
        return " ".join(text.split())[:500]
    return ""
