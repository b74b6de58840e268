"""A reusable :class:`~symphony_tui.agents.base.SessionHost` for backend tests.

It records every event, approval request, tool call and recorded session fact, answers
approvals per a policy, implements the shared ``symphony_set_issue_state`` tool on an
in-memory issue, and lets a test await an event instead of sleeping.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import FlowControl, ToolResult, ToolSpec
from symphony_tui.domain import (
    AgentEvent,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalRequest,
    EventKind,
    Issue,
)
from symphony_tui.domain.payloads import ApprovalAnswered, ApprovalAsked

SET_STATE_TOOL = ToolSpec(
    name="symphony_set_issue_state",
    description="Move this session's issue to the given tracker state (e.g. Done).",
    input_schema={
        "type": "object",
        "properties": {"state": {"type": "string"}},
        "required": ["state"],
    },
)

ApprovalPolicy = (
    ApprovalDecision
    | ApprovalAnswer
    | Callable[[ApprovalRequest], ApprovalAnswer | Awaitable[ApprovalAnswer]]
)


def make_issue(identifier: str = "TEST-1", state: str = "In Progress") -> Issue:
    """A minimal issue for tests."""
    return Issue(
        id=identifier.lower(), identifier=identifier, title=f"{identifier} title", state=state
    )


class RecordingSessionHost:
    """Session host for tests.

    ``approve``: a decision (answered at once), a full answer, or a (sync or async)
    function of the request; the default accepts. ``tools``: advertised tools (default:
    the tracker-state tool). ``resume``: what a previous session recorded.

    Attributes: ``events``, ``approvals`` (requests seen), ``answers`` (what was answered),
    ``tool_calls`` ([(name, arguments)]), ``recorded`` (merged ``record_session`` fields),
    ``state_changes`` (states set through the tool).
    """

    def __init__(
        self,
        workspace: Path,
        *,
        issue: Issue | None = None,
        approve: ApprovalPolicy = ApprovalDecision.ACCEPT,
        tools: tuple[ToolSpec, ...] = (SET_STATE_TOOL,),
        resume: dict[str, Any] | None = None,
        attempt: int | None = None,
    ) -> None:
        self._workspace = Path(workspace)
        self._issue = issue or make_issue()
        self._approve = approve
        self._tools = tools
        self._resume = dict(resume or {})
        self._attempt = attempt
        self.events: list[AgentEvent] = []
        self.approvals: list[ApprovalRequest] = []
        self.answers: list[ApprovalAnswer] = []
        self.tool_calls: list[tuple[str, Any]] = []
        self.recorded: dict[str, Any] = {}
        self.state_changes: list[str] = []
        self._waiters: list[tuple[Callable[[AgentEvent], bool], asyncio.Future[AgentEvent]]] = []

    # -- SessionHost
    @property
    def issue(self) -> Issue:
        return self._issue

    @property
    def workspace(self) -> Path:
        return self._workspace

    @property
    def attempt(self) -> int | None:
        return self._attempt

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self._tools

    #: No back-pressure (a test's host is never behind).
    flow = FlowControl()
    #: The session runs on this machine.
    worker_host: str | None = None

    @property
    def resume(self) -> dict[str, Any]:
        return self._resume

    def emit(self, event: AgentEvent) -> None:
        event = event.model_copy(
            update={
                "issue_id": event.issue_id or self._issue.id,
                "issue_identifier": event.issue_identifier or self._issue.identifier,
                "seq": len(self.events) + 1,
            }
        )
        self.events.append(event)
        for pred, fut in list(self._waiters):
            if not fut.done() and pred(event):
                fut.set_result(event)
                self._waiters.remove((pred, fut))

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.approvals.append(request)
        self.emit(
            AgentEvent(
                kind=EventKind.APPROVAL_REQUESTED,
                message=request.summary,
                payload=ApprovalAsked(approval_id=request.id, approval_kind=request.kind.value),
            )
        )
        policy = self._approve
        if isinstance(policy, ApprovalDecision):
            answer = ApprovalAnswer(decision=policy, by="policy")
        elif isinstance(policy, ApprovalAnswer):
            answer = policy
        else:
            got = policy(request)
            answer = await got if inspect.isawaitable(got) else got
        self.answers.append(answer)
        self.emit(
            AgentEvent(
                kind=EventKind.APPROVAL_RESOLVED,
                message=f"{request.id} {answer.decision.value}",
                payload=ApprovalAnswered(
                    approval_id=request.id, decision=answer.decision.value, by=answer.by
                ),
            )
        )
        return answer

    async def call_tool(self, name: str, arguments: Any) -> ToolResult:
        self.tool_calls.append((name, arguments))
        if name != SET_STATE_TOOL.name or name not in {t.name for t in self._tools}:
            return ToolResult(success=False, text=f"unknown tool: {name}")
        state = arguments.get("state") if isinstance(arguments, dict) else None
        if not isinstance(state, str) or not state.strip():
            return ToolResult(success=False, text="`state` must be a non-empty string")
        self.state_changes.append(state)
        self._issue = self._issue.model_copy(update={"state": state})
        return ToolResult(success=True, text=f"{self._issue.identifier} moved to {state}")

    def record_session(self, **fields: Any) -> None:
        self.recorded.update(fields)

    async def record_session_durably(self, **fields: Any) -> None:
        self.record_session(**fields)

    # -- test helpers
    def kinds(self) -> list[EventKind]:
        return [e.kind for e in self.events]

    def of_kind(self, kind: EventKind) -> list[AgentEvent]:
        return [e for e in self.events if e.kind == kind]

    async def wait_for(
        self, pred: Callable[[AgentEvent], bool] | EventKind, timeout: float = 30.0
    ) -> AgentEvent:
        """The first event (already seen or future) matching ``pred`` (or of that kind)."""
        check = (lambda e: e.kind == pred) if isinstance(pred, EventKind) else pred
        for e in self.events:
            if check(e):
                return e
        fut: asyncio.Future[AgentEvent] = asyncio.get_running_loop().create_future()
        self._waiters.append((check, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            if (check, fut) in self._waiters:
                self._waiters.remove((check, fut))
