"""ACP ``session/request_permission`` as an :class:`~symphony_tui.domain.ApprovalRequest`,
and the operator's answer as the request's outcome
(https://agentclientprotocol.com/protocol/tool-calls#requesting-permission).

The agent names its own options (``{optionId, name, kind}``, kinds ``allow_once``,
``allow_always``, ``reject_once``, ``reject_always``). The approval offers them as they
are, as the choices of one question (id :data:`OPTION_QUESTION`, labels the option
names), so the console, the API's ``answer`` command and the fleet pick exactly one of
them (by the option's id; a name only when no other option has it; never free text),
and the decision recorded is the chosen option's kind's (allow -> accept, always allow
-> accept for the session, reject -> decline);
the plain decisions map onto them too (:func:`outcome`):

* accept -> ``allow_once`` (else ``allow_always``); accept for the session ->
  ``allow_always`` (else ``allow_once``);
* decline -> ``reject_once`` (else ``reject_always``); a decline the agent offers no
  reject option for, and cancel, -> the ``cancelled`` outcome.

``agent.approvals`` applies through the host as for every backend: ``auto`` accepts
(``allow_once``), ``deny`` declines. The request's kind follows the tool call's kind:
``execute`` a command, ``edit`` / ``delete`` / ``move`` a file change, others a
confirmation.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from symphony_tui.agents.acp.updates import FILE_KINDS
from symphony_tui.agents.base import SessionHost
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    Question,
    QuestionOption,
)
from symphony_tui.text import one_line

Wire = dict[str, Any]
#: The id of the question whose choices are the agent's options.
OPTION_QUESTION = "option"
CANCELLED: Wire = {"outcome": {"outcome": "cancelled"}}

_DECISION_OF_KIND = {
    "allow_once": ApprovalDecision.ACCEPT,
    "allow_always": ApprovalDecision.ACCEPT_FOR_SESSION,
    "reject_once": ApprovalDecision.DECLINE,
    "reject_always": ApprovalDecision.DECLINE,
}
_PREFERRED = {
    ApprovalDecision.ACCEPT: ("allow_once", "allow_always"),
    ApprovalDecision.ACCEPT_FOR_SESSION: ("allow_always", "allow_once"),
    ApprovalDecision.DECLINE: ("reject_once", "reject_always"),
}


def options_of(params: Wire) -> list[Wire]:
    """The request's usable options (an ``optionId`` string each)."""
    return [
        o
        for o in params.get("options") or []
        if isinstance(o, dict) and isinstance(o.get("optionId"), str) and o["optionId"]
    ]


def permission_request(
    request_id: str, params: Wire, host: SessionHost, session_id: str | None
) -> ApprovalRequest:
    """The approval the operator sees for one ``session/request_permission``."""
    issue = host.issue
    call: Wire = params["toolCall"] if isinstance(params.get("toolCall"), dict) else {}
    raw: Wire = call["rawInput"] if isinstance(call.get("rawInput"), dict) else {}
    tool_kind = str(call.get("kind") or "other")
    title = one_line(call.get("title") or tool_kind, 500)
    options = options_of(params)
    command = None
    files: tuple[str, ...] = ()
    if tool_kind == "execute":
        kind = ApprovalKind.COMMAND
        cmd = raw.get("command")
        command = " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd or title)
        summary = f"run: {command}"
    elif tool_kind in FILE_KINDS:
        kind = ApprovalKind.FILE_CHANGE
        paths = [
            loc["path"]
            for loc in call.get("locations") or []
            if isinstance(loc, dict) and isinstance(loc.get("path"), str)
        ]
        paths += [
            c["path"]
            for c in call.get("content") or []
            if isinstance(c, dict) and c.get("type") == "diff" and isinstance(c.get("path"), str)
        ]
        files = tuple(dict.fromkeys(paths))
        summary = f"{tool_kind}: {', '.join(files) or title}"
    else:
        kind = ApprovalKind.CONFIRMATION
        summary = title
    decisions = [
        _DECISION_OF_KIND[o["kind"]] for o in options if o.get("kind") in _DECISION_OF_KIND
    ]
    question = Question(
        id=OPTION_QUESTION,
        header="permission",
        question=one_line(f"{title}: choose one of the agent's options", 500),
        options=tuple(
            QuestionOption(
                label=_label(o),
                description=str(o.get("kind") or "") or None,
                id=o["optionId"],
                decision=_DECISION_OF_KIND.get(str(o.get("kind"))),
            )
            for o in options
        ),
        free_text=False,
    )
    return ApprovalRequest(
        id=request_id,
        issue_id=issue.id,
        issue_identifier=issue.identifier,
        backend="acp",
        kind=kind,
        summary=one_line(summary, 500),
        command=command,
        cwd=str(host.workspace),
        files=files,
        questions=(question,) if options else (),
        available=tuple(dict.fromkeys([*decisions, ApprovalDecision.CANCEL])),
        created_at=datetime.now(UTC),
        details={
            "session_id": session_id,
            "tool_call_id": call.get("toolCallId"),
            "tool_kind": tool_kind,
            "options": [
                {"optionId": o["optionId"], "name": o.get("name"), "kind": o.get("kind")}
                for o in options
            ],
        },
    )


def _label(option: Wire) -> str:
    return one_line(option.get("name") or option["optionId"], 100)


def outcome(answer: ApprovalAnswer, options: list[Wire]) -> Wire:
    """The ``RequestPermissionResponse`` for ``answer`` (see the module doc). An option
    chosen by id, or by name when no other option has it (``answers["option"]``), wins
    over the decision; a choice naming no option is never taken for an allow: it
    rejects (``reject_once``, else ``reject_always``, else ``cancelled``)."""
    picked = answer.answers.get(OPTION_QUESTION) or ()
    for choice in picked[:1]:
        by_id = [o for o in options if o["optionId"] == choice]
        by_name = [o for o in options if _label(o) == choice]
        if by_id or len(by_name) == 1:
            return _selected((by_id or by_name)[0])
        return _pick(ApprovalDecision.DECLINE, options)
    return _pick(answer.decision, options)


def _pick(decision: ApprovalDecision, options: list[Wire]) -> Wire:
    if decision == ApprovalDecision.CANCEL:
        return CANCELLED
    for wanted in _PREFERRED[decision]:
        for o in options:
            if o.get("kind") == wanted:
                return _selected(o)
    return CANCELLED


def _selected(option: Wire) -> Wire:
    return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
