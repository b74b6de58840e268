"""Requests an agent makes of the operator, and the operator's answers.

Covers codex server requests (command / file-change / permissions approvals,
``item/tool/requestUserInput``, MCP elicitation), OpenHands confirmations and OpenCode
permissions (docs/protocols.md "Cross-backend map").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from symphony_tui.domain.kinds import ApprovalDecision, ApprovalKind


class QuestionOption(BaseModel):
    """One choice of a :class:`Question`. ``id``: what an answer names to pick it when the
    label is not enough (an ACP ``optionId``; labels may repeat); ``decision``: the decision
    picking it stands for (an ACP option's kind), recorded as the approval's decision."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    label: str
    description: str | None = None
    id: str | None = None
    decision: ApprovalDecision | None = None


class Question(BaseModel):
    """One question of a user-input request. ``options`` empty means free text;
    ``free_text`` False means the answer must name one of the options (:meth:`choice`)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    header: str = ""
    question: str = ""
    options: tuple[QuestionOption, ...] = ()
    free_text: bool = True

    def choice(self, value: str) -> QuestionOption | str:
        """The option ``value`` names (its ``id``, or its label when no other option has
        that label), or one line saying why it names none."""
        for option in self.options:
            if option.id is not None and option.id == value:
                return option
        named = [o for o in self.options if o.label == value]
        if len(named) == 1:
            return named[0]
        listed = ", ".join(
            f"{o.id} ({o.label})" if o.id is not None else o.label for o in self.options
        )
        shown = repr(value[:80])
        if named:
            return f"{shown} names {len(named)} options: answer with an id: {listed}"
        return f"{shown} is not one of the options: answer with one of {listed}"


class ApprovalRequest(BaseModel):
    """A pending request, as the operator sees it.

    ``id`` is unique within the process (assigned by the backend, e.g.
    ``"<issue_id>:<rpc id>"``). ``deadline_at`` is when it is declined unanswered
    (``agent.approval_timeout_ms``); ``None`` while not queued for an operator.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    issue_id: str
    issue_identifier: str = ""
    backend: str = ""
    kind: ApprovalKind
    summary: str = ""
    command: str | None = None
    cwd: str | None = None
    files: tuple[str, ...] = ()
    reason: str | None = None
    permissions: dict[str, Any] | None = None
    questions: tuple[Question, ...] = ()
    available: tuple[ApprovalDecision, ...] = (
        ApprovalDecision.ACCEPT,
        ApprovalDecision.ACCEPT_FOR_SESSION,
        ApprovalDecision.DECLINE,
        ApprovalDecision.CANCEL,
    )
    created_at: datetime | None = None
    deadline_at: datetime | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    #: The fleet console's name for the scheduler that asks (None: one scheduler).
    project: str | None = None


class ApprovalAnswer(BaseModel):
    """The answer to an :class:`ApprovalRequest`.

    ``message`` is a reason given with a denial. ``answers`` maps question id to the
    chosen labels or typed text (user-input requests). ``timed_out`` marks an automatic
    decline after ``agent.approval_timeout_ms``; ``by`` says who answered
    (``operator`` | ``auto`` | ``policy`` | ``timeout`` | ``shutdown``).

    Permissions requests only: ``permissions`` is the granted subset of the request's
    ``permissions`` (same shape; ``None`` grants everything asked), ``scope`` how long the
    grant lasts (``None``: ``session`` for ACCEPT_FOR_SESSION, else ``turn``).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    decision: ApprovalDecision
    message: str | None = None
    answers: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    timed_out: bool = False
    by: str = "operator"
    permissions: dict[str, Any] | None = None
    scope: Literal["turn", "session"] | None = None
