"""Operator commands: what the console, the CLI and the HTTP API send to the scheduler.

The scheduler is the only place that acts on them (docs/architecture.md "The path of one
operator command").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)


class _Cmd(BaseModel):
    """``project``: which scheduler of a fleet console the command is for, when it names
    no issue or approval (pause, drain, refresh...); a fleet console routes by it and strips
    it before sending. A scheduler ignores it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    project: str | None = None


class Refresh(_Cmd):
    """Poll and reconcile now (spec §13.7 ``POST /api/v1/refresh``)."""

    type: Literal["refresh"] = "refresh"


class Interrupt(_Cmd):
    """Interrupt the running turn of ``issue_id``; the run ends as cancelled."""

    type: Literal["interrupt"] = "interrupt"
    issue_id: str


class Stop(_Cmd):
    """End the worker of ``issue_id``, keep its workspace, release the claim."""

    type: Literal["stop"] = "stop"
    issue_id: str


class Approve(_Cmd):
    """Accept a pending approval (once, or for the rest of the session).

    ``permissions``: for a permissions request, the granted subset of what was asked
    (same shape as ``ApprovalRequest.permissions``); ``None`` grants all of it.
    """

    type: Literal["approve"] = "approve"
    approval_id: str
    for_session: bool = False
    permissions: dict[str, Any] | None = None


class Deny(_Cmd):
    """Decline a pending approval; ``cancel`` also ends the turn; ``message`` is a reason."""

    type: Literal["deny"] = "deny"
    approval_id: str
    message: str | None = None
    cancel: bool = False


class Answer(_Cmd):
    """Answer a user-input question: question id -> chosen labels or typed text."""

    type: Literal["answer"] = "answer"
    approval_id: str
    answers: dict[str, tuple[str, ...]]


class Rerun(_Cmd):
    """Clear any backoff for ``issue_id`` and dispatch it now if it is eligible."""

    type: Literal["rerun"] = "rerun"
    issue_id: str


class PauseDispatch(_Cmd):
    """Drain: let running work finish but start nothing new (``paused=False`` resumes)."""

    type: Literal["pause_dispatch"] = "pause_dispatch"
    paused: bool = True


class MoveIssue(_Cmd):
    """Move an issue to another tracker state (trackers that support writes)."""

    type: Literal["move_issue"] = "move_issue"
    issue_id: str
    state: str


class Steer(_Cmd):
    """Send the operator's ``text`` to the agent of ``issue_id`` in its running turn (codex
    ``turn/steer``; docs/protocols.md "Steering"). Between turns it goes with the next turn;
    a run that ends first reports it as not delivered."""

    type: Literal["steer"] = "steer"
    issue_id: str
    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8000)]


class ExtendBudget(_Cmd):
    """Raise the budgets of ``issue_id`` by ``tokens`` (``agent.max_tokens_per_issue`` /
    ``max_tokens_per_attempt``) and / or ``usd`` US dollars (``agent.max_spend_per_issue_usd``
    / ``max_spend_per_attempt_usd``) so its run, held by a budget, goes on; at least one is
    above zero. Stopping it instead is ``Interrupt``."""

    type: Literal["extend_budget"] = "extend_budget"
    issue_id: str
    tokens: int = Field(default=0, ge=0, le=1_000_000_000)
    usd: float = Field(default=0.0, ge=0, le=1_000_000, allow_inf_nan=False)

    @field_validator("tokens", "usd", mode="before")
    @classmethod
    def _amount(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON true would otherwise be 1 token or $1
            raise ValueError("must be a number, not true/false")
        return value

    @model_validator(mode="after")
    def _something(self) -> ExtendBudget:
        if self.tokens <= 0 and self.usd <= 0:
            raise ValueError("extend by tokens or usd above zero")
        return self


class RemoveWorkspace(_Cmd):
    """Delete the workspace folder of ``issue_identifier`` (``before_remove`` runs first;
    spec §9.4). The workspace key (the folder name, the identifier's sanitized form) works
    too. Refused while the issue runs or waits for a retry."""

    type: Literal["remove_workspace"] = "remove_workspace"
    issue_identifier: str


#: A worker host as ``worker.ssh_hosts`` writes it (``build-1``, ``ci@build-2:2222``).
HostName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]


class DrainHost(_Cmd):
    """Drain worker host ``host`` (``worker.ssh_hosts``): no new issue is placed
    there; its running attempts go on, and issues whose workspace is there (continuations,
    retries, reruns) still go back to it. ``UndrainHost`` ends it. Not kept across a
    restart."""

    type: Literal["drain_host"] = "drain_host"
    host: HostName


class UndrainHost(_Cmd):
    """End the drain of worker host ``host``: it takes new issues again."""

    type: Literal["undrain_host"] = "undrain_host"
    host: HostName


class ProbeHost(_Cmd):
    """Probe down worker host ``host`` now instead of at the end of its backoff; an answer
    marks it up. Refused for a host that is up or being probed."""

    type: Literal["probe_host"] = "probe_host"
    host: HostName


class StopScheduler(_Cmd):
    """Stop the scheduler, as ``symphony-tui stop`` does: every worker is stopped (its hooks
    get ``hooks.shutdown_grace_ms``), then the process ends. Refused by a scheduler whose
    process does not take it (docs/http-api.md)."""

    type: Literal["stop_scheduler"] = "stop_scheduler"


Command = Annotated[
    Refresh
    | Interrupt
    | Stop
    | Approve
    | Deny
    | Answer
    | Rerun
    | PauseDispatch
    | MoveIssue
    | Steer
    | ExtendBudget
    | RemoveWorkspace
    | DrainHost
    | UndrainHost
    | ProbeHost
    | StopScheduler,
    Field(discriminator="type"),
]
