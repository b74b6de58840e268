"""The scheduler's side of one agent session (``agents.base.SessionHost``).

What a session reports (events, session facts) is posted to the scheduler's inbox and
applied by the scheduling loop in order; approval requests and tool calls are awaited.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from symphony_tui.agents.base import FlowControl, ToolResult, ToolSpec
from symphony_tui.domain import (
    AgentEvent,
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalRequest,
    Issue,
)
from symphony_tui.scheduler.agent_tools import AgentTools
from symphony_tui.scheduler.inbox import AgentTraffic, ApprovalAsked, SessionFacts
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.run import Run


class RunChannel:
    """Binds a backend session to its :class:`Run` (in ``workspace``, re-attaching with
    the session facts ``resume``): events and session facts are posted to the loop's
    ``mailbox`` (the inbox's main lane), approval requests are asked on its control lane,
    tool calls go to ``tool_calls``; ``tools`` is what the session advertises, ``flow``
    paces its reader against the inbox (``inbox.InboxFlow``)."""

    def __init__(
        self,
        run: Run,
        workspace: Path,
        resume: Mapping[str, Any],
        tools: tuple[ToolSpec, ...],
        mailbox: Mailbox,
        tool_calls: AgentTools,
        flow: FlowControl,
    ) -> None:
        self._run = run
        self._workspace = workspace
        self._resume = resume
        self._tools = tools
        self._mailbox = mailbox
        self._tool_calls = tool_calls
        self._flow = flow

    @property
    def issue(self) -> Issue:
        return self._run.issue

    @property
    def workspace(self) -> Path:
        return self._workspace

    @property
    def attempt(self) -> int | None:
        return self._run.attempt

    @property
    def worker_host(self) -> str | None:
        """The worker host the session runs on (None: this machine)."""
        return self._run.worker_host

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return self._tools

    @property
    def flow(self) -> FlowControl:
        return self._flow

    @property
    def resume(self) -> dict[str, Any]:
        return dict(self._resume)

    def emit(self, event: AgentEvent) -> None:
        self._mailbox.post(AgentTraffic(self._run, event))

    async def request_approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask ``request`` on the control lane and wait for the answer (the approval desk
        files it on the loop, ``ApprovalAsked``, after this session's queued events: they
        go ahead of every other session's traffic, ``Inbox.take_of``), so the approval is
        never applied before what the agent reported before asking. A scheduler that
        stopped meanwhile answers ``CANCEL``."""
        answer = await self._mailbox.ask(ApprovalAsked(self._run, request), control=True)
        if answer is None:
            return ApprovalAnswer(decision=ApprovalDecision.CANCEL, by="shutdown")
        return answer

    async def call_tool(self, name: str, arguments: Any) -> ToolResult:
        return await self._tool_calls.call(self._run, name, arguments)

    def record_session(self, **fields: Any) -> None:
        self._mailbox.post(SessionFacts(self._run, fields))

    async def record_session_durably(self, **fields: Any) -> None:
        """:meth:`record_session`, then wait until those facts, and every one this run
        posted before, are in the workspace manifest on disk (``Mailbox.barrier``)."""
        self.record_session(**fields)
        await self._mailbox.barrier()
