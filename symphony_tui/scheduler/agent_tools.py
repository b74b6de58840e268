"""Client-side tools the scheduler offers agent sessions (spec §10.5; ``SessionHost.tools``
and ``SessionHost.call_tool`` in ``agents/base.py``).

``symphony_set_issue_state`` moves the session's own issue to another tracker state. With a
Linear tracker, ``linear_graphql`` is offered too; with a GitHub tracker, ``github_api``
(trackers/github/tool.py); a tracker with an ``agent_tool`` (Jira's ``jira_rest``, GitLab's
``gitlab_api``, Asana's ``asana_api``) offers it and runs it by ``call_agent_tool``. Results are JSON text in a
:class:`ToolResult`; a tool never raises into the session.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol, cast

from symphony_tui.agents.base import ToolResult, ToolSpec
from symphony_tui.domain import AgentEvent, EventKind, Issue
from symphony_tui.domain.payloads import ToolCall
from symphony_tui.scheduler.inbox import AgentTraffic, IssueMoved, MoveIntended
from symphony_tui.scheduler.mailbox import Mailbox
from symphony_tui.scheduler.run import Run
from symphony_tui.trackers.base import Tracker, TrackerError

if TYPE_CHECKING:
    from symphony_tui.trackers.github.tracker import GitHubTracker
    from symphony_tui.trackers.linear.tracker import LinearTracker

SET_STATE_TOOL = ToolSpec(
    name="symphony_set_issue_state",
    description=(
        "Move the issue you are working on to another tracker state (for example Done or "
        "Human Review). Call it when your work on the issue is finished."
    ),
    input_schema={
        "type": "object",
        "properties": {"state": {"type": "string", "description": "Target state name"}},
        "required": ["state"],
        "additionalProperties": False,
    },
)


class _NativeTool(Protocol):
    """A tracker with a provider-native agent tool (Jira, GitLab, Asana)."""

    agent_tool: ToolSpec

    async def call_agent_tool(self, issue: Issue, arguments: Any) -> ToolResult: ...


class AgentTools:
    """The tools for sessions against one tracker.

    Each call is said as a ``TOOL_CALL`` event, posted to ``mailbox``. Before moving its
    issue, the agent's intent is asked on the control lane (``MoveIntended``: recorded
    before the tracker write, restored after a failed one,
    ``SchedulerState.run_move_intended``); a move the tracker accepted is posted
    (``IssueMoved``, applied by ``SchedulerState.run_moved_by_agent``).
    """

    def __init__(self, tracker: Tracker, mailbox: Mailbox) -> None:
        self._tracker = tracker
        self._mailbox = mailbox

    def _emit(self, run: Run, event: AgentEvent) -> None:
        self._mailbox.post(AgentTraffic(run, event))

    async def _intend(self, run: Run, target: str | None) -> str | None:
        # On the control lane: recorded before the tracker write starts.
        return await self._mailbox.ask(MoveIntended(run, target), control=True)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What a new session advertises to its agent."""
        tools = [SET_STATE_TOOL]
        if self._tracker.kind == "linear":
            from symphony_tui.trackers.linear.tool import LINEAR_GRAPHQL_TOOL

            tools.append(LINEAR_GRAPHQL_TOOL)
        elif self._tracker.kind == "github":
            from symphony_tui.trackers.github.tool import GITHUB_API_TOOL

            tools.append(GITHUB_API_TOOL)
        elif isinstance(own := getattr(self._tracker, "agent_tool", None), ToolSpec):
            tools.append(own)
        return tuple(tools)

    async def call(self, run: Run, name: str, arguments: Any) -> ToolResult:
        """Run tool ``name`` for ``run``'s session. Never raises: bad arguments, tracker
        errors and unknown tools come back as a failed result with ``{"error": ...}``."""
        self._emit(
            run,
            AgentEvent(
                kind=EventKind.TOOL_CALL,
                message=f"{name} {_short_json(arguments)}",
                payload=ToolCall(tool=name, status="started"),
            ),
        )
        if name == SET_STATE_TOOL.name:
            return await self._set_state(run, arguments)
        if name == "linear_graphql" and self._tracker.kind == "linear":
            from symphony_tui.trackers.linear.tool import call_linear_graphql

            try:
                return await call_linear_graphql(cast("LinearTracker", self._tracker), arguments)
            except Exception as exc:
                return ToolResult(False, json.dumps({"error": f"linear_graphql failed: {exc}"}))
        if name == "github_api" and self._tracker.kind == "github":
            from symphony_tui.trackers.github.tool import call_github_api

            try:
                tracker = cast("GitHubTracker", self._tracker)
                return await call_github_api(tracker, run.issue, arguments)
            except Exception as exc:
                return ToolResult(False, json.dumps({"error": f"github_api failed: {exc}"}))
        own = getattr(self._tracker, "agent_tool", None)
        if isinstance(own, ToolSpec) and name == own.name:
            try:
                native = cast(_NativeTool, self._tracker)
                return await native.call_agent_tool(run.issue, arguments)
            except Exception as exc:
                return ToolResult(False, json.dumps({"error": f"{name} failed: {exc}"}))
        return ToolResult(False, json.dumps({"error": f"unsupported tool: {name}"}))

    async def _set_state(self, run: Run, arguments: Any) -> ToolResult:
        state = arguments.get("state") if isinstance(arguments, dict) else None
        if not isinstance(state, str) or not state.strip():
            return ToolResult(False, json.dumps({"error": "`state` must be a non-empty string"}))
        # Record the intent before the write: a reconcile that reads the new state while
        # the write is still being answered must not take it for someone else's move.
        previous_intent = await self._intend(run, state.strip())
        try:
            moved = await self._tracker.move_issue(run.issue.id, state.strip())
        except TrackerError as exc:
            await self._intend(run, previous_intent)
            return ToolResult(False, json.dumps({"error": str(exc)}))
        self._mailbox.post(IssueMoved(moved, run))
        return ToolResult(True, json.dumps({"issue": moved.identifier, "state": moved.state}))


def _short_json(value: Any, limit: int = 200) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
