"""Typed payloads of :class:`~symphony_tui.domain.events.AgentEvent` (spec §10.4, §13).

One frozen model per shape, told apart by its ``type`` tag (a pydantic discriminated
union, :data:`Payload`). Backends build the agent-side ones from their wire messages
(codex, OpenHands, OpenCode); the scheduler builds the approval and scheduler-side ones.
Consumers match them by type (``isinstance`` or ``match``), never by dictionary keys.

Shared vocabulary:

* ``item_id``: the backend's id of the item an event belongs to, the same at its start and
  its end (codex item id, OpenHands action event id, OpenCode part id);
* ``wire_id``: the id of the wire message itself where it differs (OpenHands event id);
* ``item_type``: the backend's own name for the item (codex ``commandExecution``,
  OpenHands ``ActionEvent``...), where it names one;
* ``status``: the item's state as the backend names it (``inProgress``, ``completed``,
  ``failed``, ``declined``, ``interrupted``...);
* plan steps and turn ends use backend-neutral values (:data:`PlanStatus`,
  :data:`TurnOutcome`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from symphony_tui.domain.tokens import RateLimits, TokenUsage

_FROZEN = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class _Base(BaseModel):
    model_config = _FROZEN


# ---------------------------------------------------------------- session and turn


class SessionStarted(_Base):
    """A backend session began or was re-attached (``SESSION_STARTED``).

    ``thread_id``: the conversation the scheduler resumes (codex thread, OpenHands
    conversation, OpenCode session); ``session_id`` where the backend names one (the HTTP
    backends: the same id). ``state`` is the server's state on attach (OpenHands
    ``execution_status``, OpenCode session status); ``pending_approvals`` the confirmations
    or permission/question requests already waiting then; ``interrupted_messages`` the
    OpenCode answers left unfinished before the attach.
    """

    type: Literal["session_started"] = "session_started"
    thread_id: str | None = None
    #: The model the session runs, as the backend names it (codex: ``thread/start``'s
    #: ``model``); None when the backend does not say. Prices the run (config/pricing.py).
    model: str | None = None
    session_id: str | None = None
    resumed: bool = False
    pid: int | None = None
    server_url: str | None = None
    state: str | None = None
    directory: str | None = None
    pending_approvals: int | None = None
    interrupted_messages: int | None = None


class TurnStarted(_Base):
    """A turn began (``TURN_STARTED``). ``adopted``: the turn took over a run the server
    was already doing (a re-attach) instead of sending the prompt."""

    type: Literal["turn_started"] = "turn_started"
    turn_id: str | None = None
    thread_id: str | None = None
    continuation: bool = False
    adopted: bool = False


#: How a turn ended, the same words for every backend:
#: ``completed``; ``cancelled`` (interrupted or cancelled by the operator, or stopped on the
#: server); ``rejected_by_operator`` (the operator declined an approval, which stopped the
#: turn: reported like a stop, not a crash); ``declined`` (an approval was declined by a
#: policy or a timeout); ``failed`` (anything else).
TurnOutcome = Literal["completed", "cancelled", "rejected_by_operator", "declined", "failed"]

#: :class:`~symphony_tui.agents.base.TurnStatus` values.
TurnEndStatus = Literal["completed", "failed", "interrupted", "input_required"]


class TurnEnded(_Base):
    """A turn ended (``TURN_COMPLETED`` / ``TURN_CANCELLED`` / ``TURN_FAILED``; see
    :attr:`kind_name`). ``status`` and ``reason`` are the backend's ``TurnResult``;
    ``rejection`` is the decline message when an approval decision stopped the turn."""

    type: Literal["turn_ended"] = "turn_ended"
    status: TurnEndStatus
    outcome: TurnOutcome
    reason: str | None = None
    turn_id: str | None = None
    rejection: str | None = None

    @classmethod
    def of(
        cls,
        status: TurnEndStatus,
        reason: str | None,
        *,
        turn_id: str | None = None,
        rejection: str | None = None,
        rejected_by_operator: bool = False,
    ) -> TurnEnded:
        """The payload for a turn that ended with ``status``: the outcome follows from the
        status and, for a failed turn, from whether an approval decision stopped it."""
        outcome: TurnOutcome
        if status == "completed":
            outcome = "completed"
        elif status == "interrupted":
            outcome = "cancelled"
        elif rejection is not None:
            outcome = "rejected_by_operator" if rejected_by_operator else "declined"
        else:
            outcome = "failed"
        return cls(
            status=status, outcome=outcome, reason=reason, turn_id=turn_id, rejection=rejection
        )

    @property
    def kind_name(self) -> str:
        """The event kind value this end is reported as."""
        if self.outcome == "completed":
            return "turn_completed"
        if self.outcome in ("cancelled", "rejected_by_operator"):
            return "turn_cancelled"
        return "turn_failed"


# ---------------------------------------------------------------- items


class _Item(_Base):
    item_id: str | None = None
    wire_id: str | None = None
    item_type: str | None = None
    status: str | None = None
    #: True for an end the scheduler made up for an item the server left open.
    synthetic: bool = False


class ItemNote(_Item):
    """Agent text and other items (``MESSAGE``, ``REASONING``, ``MESSAGE_DELTA``,
    ``COMMAND_OUTPUT``, an item ``NOTIFICATION``). The text is the event's ``message``.
    ``reasoning``: a delta of the model's reasoning (``summary``: of its summary)."""

    type: Literal["item"] = "item"
    reasoning: bool = False
    summary: bool = False


class CommandStarted(_Item):
    """A shell command began (``COMMAND_STARTED``); ``tool`` is the backend's tool name."""

    type: Literal["command_started"] = "command_started"
    command: str = ""
    cwd: str | None = None
    tool: str | None = None


class CommandEnded(_Item):
    """A shell command ended (``COMMAND_COMPLETED``). ``exit_code`` is ``None`` when the
    command did not run to an exit (declined, interrupted); ``output`` is the end of its
    output (errors come last), ``error`` the backend's one-line failure."""

    type: Literal["command_ended"] = "command_ended"
    command: str = ""
    exit_code: int | None = None
    output: str = ""
    duration_ms: int | None = None
    error: str | None = None
    tool: str | None = None


class FileEdit(_Base):
    """One file of a change: its path, the kind of edit (``add``, ``update``, the tool),
    and the unified diff when the backend sent one."""

    path: str
    kind: str | None = None
    diff: str | None = None


class FileChange(_Item):
    """Files edited by the agent (``FILE_CHANGE``), at the start (``inProgress``) and the
    end of the edit."""

    type: Literal["file_change"] = "file_change"
    changes: tuple[FileEdit, ...] = ()
    error: str | None = None
    tool: str | None = None

    @property
    def paths(self) -> list[str]:
        """Each path once, in order."""
        return list(dict.fromkeys(c.path for c in self.changes if c.path))


class ToolCall(_Item):
    """A tool call (``TOOL_CALL``): ``arguments`` as the agent sent them (capped JSON),
    then ``success`` / ``result`` / ``error`` once it ended."""

    type: Literal["tool_call"] = "tool_call"
    tool: str = ""
    arguments: JsonValue = None
    success: bool | None = None
    result: str | None = None
    error: str | None = None


#: A plan step's state, backend-neutral.
PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanStep(_Base):
    step: str
    status: PlanStatus = "pending"


def plan_status(raw: Any) -> PlanStatus:
    """A backend's step status (codex ``pending`` / ``inProgress`` / ``completed``) in the
    neutral words; unknown values are ``pending``."""
    word = str(raw or "").replace("_", "").replace("-", "").lower()
    if word == "completed":
        return "completed"
    if word == "inprogress":
        return "in_progress"
    return "pending"


class Plan(_Base):
    """The agent's plan (``PLAN``): steps in order and an optional explanation. A plan
    written as prose has no steps; its text is the event's ``message``."""

    type: Literal["plan"] = "plan"
    steps: tuple[PlanStep, ...] = ()
    explanation: str | None = None
    item_id: str | None = None
    item_type: str | None = None

    @property
    def progress(self) -> tuple[int, str | None]:
        """How many steps are done, and the step in progress (or the next pending one)."""
        done = sum(1 for s in self.steps if s.status == "completed")
        current = next(
            (s.step for s in self.steps if s.status == "in_progress"),
            next((s.step for s in self.steps if s.status != "completed"), None),
        )
        return done, current


# ---------------------------------------------------------------- approvals


class ApprovalAsked(_Base):
    """An approval is waiting (``APPROVAL_REQUESTED``); ``approval_kind`` is an
    :class:`~symphony_tui.domain.kinds.ApprovalKind` value."""

    type: Literal["approval_asked"] = "approval_asked"
    approval_id: str
    approval_kind: str


class ApprovalAnswered(_Base):
    """An approval was settled (``APPROVAL_RESOLVED``): the decision (an
    ``ApprovalDecision`` value), who made it (``operator``, ``policy``, ``timeout``...)."""

    type: Literal["approval_answered"] = "approval_answered"
    approval_id: str
    decision: str
    by: str = "operator"
    timed_out: bool = False


# ---------------------------------------------------------------- accounting


class TokenReport(_Base):
    """``TOKEN_USAGE``: the **absolute** totals of the backend session (codex thread,
    OpenHands conversation, OpenCode session); the scheduler counts only their growth
    (spec §13.5). ``attached``: totals found on re-attach, before new work (a baseline).
    codex also reports its ``last`` turn and the model's context window."""

    type: Literal["token_usage"] = "token_usage"
    usage: TokenUsage
    attached: bool = False
    last: TokenUsage | None = None
    model_context_window: int | None = None
    turn_id: str | None = None


class RateLimitReport(_Base):
    """``RATE_LIMITS``: the backend's latest rate-limit snapshot."""

    type: Literal["rate_limits"] = "rate_limits"
    rate_limits: RateLimits


# ---------------------------------------------------------------- diagnostics


class AgentTrouble(_Base):
    """``ERROR`` from a backend. ``will_retry``: the backend retries the model call by
    itself (not progress; the stall timeout applies); ``attempt`` its retry count where
    known; ``sub_session``: it happened in a sub-agent's session."""

    type: Literal["agent_trouble"] = "agent_trouble"
    will_retry: bool = False
    attempt: int | None = None
    turn_id: str | None = None
    sub_session: bool = False
    wire_id: str | None = None


class Notice(_Base):
    """``WARNING`` / ``MALFORMED`` diagnostics. ``notice``: a short category (a stream's
    ``reconnecting`` / ``reconnected`` / ``malformed``, a codex warning method,
    ``resume_failed`` for ``thread_id``, ``tool_failed`` for a client ``tool``,
    ``answer_failed`` for an approval ``request_id``, ``rejected`` for the action
    ``item_id``); ``malformed_total`` the stream's count of bad frames so far."""

    type: Literal["notice"] = "notice"
    notice: str | None = None
    malformed_total: int | None = None
    thread_id: str | None = None
    tool: str | None = None
    request_id: str | None = None
    wire_id: str | None = None
    item_id: str | None = None


class LinkChanged(_Base):
    """The connection to a detached agent changed state (``NOTIFICATION`` when
    ``connected``, ``WARNING`` otherwise; docs/worker-hosts.md "A link that reconnects"):
    ``mode`` ``local``, ``ssh`` or ``exec-server`` (agents/codex/exec_server.py), ``state`` ``connected`` / ``reconnecting`` / ``lost``,
    ``since`` (ISO 8601 UTC) when it stopped being connected, ``host`` the worker host
    (None: this machine), ``reason`` why it dropped."""

    type: Literal["link"] = "link"
    mode: str
    state: str
    since: str | None = None
    host: str | None = None
    reason: str | None = None


class ServerStatus(_Base):
    """The server's state of the session changed (``NOTIFICATION``; OpenHands
    ``execution_status``: ``running``, ``waiting_for_confirmation``, ``finished``...)."""

    type: Literal["server_status"] = "server_status"
    status: str


class TurnDiff(_Base):
    """The turn's aggregated diff so far (``NOTIFICATION``; codex ``turn/diff/updated``)."""

    type: Literal["turn_diff"] = "turn_diff"
    diff: str


class NoteDelivered(_Base):
    """An operator's message was delivered to the agent (``NOTIFICATION``). ``steered``:
    the operator sent it on their own (the ``steer`` command), not with an approval answer;
    ``queued``: it went with a new turn's prompt because no turn was running."""

    type: Literal["note_delivered"] = "note_delivered"
    turn_id: str | None = None
    steered: bool = False
    queued: bool = False


# ---------------------------------------------------------------- scheduler side


class HookResult(_Base):
    """A workspace hook ran (``HOOK``): ``output`` is the end of what it printed;
    ``cut_short`` says why it was ended before it finished (``"scheduler shutdown"``, a
    stopped run), else None."""

    type: Literal["hook_result"] = "hook_result"
    hook: str
    ok: bool
    exit_code: int | None = None
    timed_out: bool = False
    duration_ms: int | None = None
    output: str = ""
    cut_short: str | None = None


class Dispatched(_Base):
    """An issue was dispatched (``DISPATCH``); ``attempt`` is ``None`` on the first run."""

    type: Literal["dispatched"] = "dispatched"
    attempt: int | None = None


class RunEnded(_Base):
    """A run attempt ended (``RUN_ENDED``): ``outcome`` a ``RunOutcome`` value, ``status``
    the run's final ``RunStatus`` value, ``error`` the one-line reason. What it used, for
    ``symphony-tui stats``: ``seconds`` of running time, its ``model``, ``tokens`` (null:
    not reported), ``spend`` (``priced``, ``unknown model``, ``not reported``) and
    ``spend_usd`` (null unless priced); all null in events written before they existed."""

    type: Literal["run_ended"] = "run_ended"
    outcome: str
    status: str
    error: str | None = None
    seconds: float | None = None
    model: str | None = None
    tokens: TokenUsage | None = None
    spend: str | None = None
    spend_usd: float | None = None


class RetryScheduled(_Base):
    """A retry entry was scheduled (``RETRY_SCHEDULED``), due in ``delay_ms``."""

    type: Literal["retry_scheduled"] = "retry_scheduled"
    attempt: int
    delay_ms: int


class OperatorAction(_Base):
    """An operator command was applied or refused (``OPERATOR``): the command's type."""

    type: Literal["operator_action"] = "operator_action"
    command: str


Payload = Annotated[
    SessionStarted
    | TurnStarted
    | TurnEnded
    | ItemNote
    | CommandStarted
    | CommandEnded
    | FileChange
    | ToolCall
    | Plan
    | ApprovalAsked
    | ApprovalAnswered
    | TokenReport
    | RateLimitReport
    | AgentTrouble
    | Notice
    | LinkChanged
    | ServerStatus
    | TurnDiff
    | NoteDelivered
    | HookResult
    | Dispatched
    | RunEnded
    | RetryScheduled
    | OperatorAction,
    Field(discriminator="type"),
]
