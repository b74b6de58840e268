"""The scheduler's side of one agent session (``agents.base.SessionHost``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.domain import AgentEvent, ApprovalAnswer, ApprovalRequest, Issue
from symphony_tui.scheduler.run import Run

if TYPE_CHECKING:
    from symphony_tui.scheduler.orchestrator import Orchestrator


class RunHost:
    """Binds a backend session to its :class:`Run`; every call lands in the orchestrator."""

    def __init__(self, orchestrator: Orchestrator, run: Run, tools: tuple[ToolSpec, ...]) -> None:
        self._orch = orchestrator
        self._run = run
        self._tools = tools

    @property
    def issue(self) -> Issue:
        return self._run.issue

    @property
    def workspace(self) -> Path:
        assert self._run.workspace is not None
        return self._run.workspace

    @property
    def attempt(self) -> int | None:
        return self._run.attempt

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self._tools

    @property
    def resume(self) -> dict[str, Any]:
        return dict(self._run.resume)

    def emit(self, event: AgentEvent) -> None:
        self._orch._on_agent_event(self._run, event)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        return await self._orch._approvals.request(self._run, request)

    async def call_tool(self, name: str, arguments: Any) -> ToolResult:
        return await self._orch._call_tool(self._run, name, arguments)

    def record_session(self, **fields: Any) -> None:
        self._orch._record_session(self._run, fields)
