"""Answers to the app-server's own requests (approvals, user input, elicitation, tool calls).

docs/protocols.md "Codex app-server" / Approvals. Every request gets an answer: a result for the
methods below, JSON-RPC ``-32601`` for anything else. Host failures never leave a request
hanging: an approval the host cannot answer is declined, a tool call that raises returns
``success=false``. Each request is served in its own task whose first step runs at once
(``eager.py``); an operator's note that came with a denial is delivered first
(``steering.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost
from symphony_tui.agents.codex.coalesce import EventOutlet
from symphony_tui.agents.codex.eager import SessionTasks
from symphony_tui.agents.codex.rpc import RequestId, RpcConnection
from symphony_tui.agents.codex.steering import OperatorNote, Steering
from symphony_tui.agents.codex.turns import PendingRequests
from symphony_tui.domain import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalKind,
    ApprovalRequest,
    Question,
    QuestionOption,
)

METHOD_NOT_FOUND = -32601

# our decision -> codex v2 ``CommandExecutionApprovalDecision`` / ``FileChangeApprovalDecision``
V2_DECISION = {
    ApprovalDecision.ACCEPT: "accept",
    ApprovalDecision.ACCEPT_FOR_SESSION: "acceptForSession",
    ApprovalDecision.DECLINE: "decline",
    ApprovalDecision.CANCEL: "cancel",
}
_FROM_V2 = {v: k for k, v in V2_DECISION.items()}
# legacy v1 ``ReviewDecision`` (execCommandApproval / applyPatchApproval)
V1_DECISION = {
    ApprovalDecision.ACCEPT: "approved",
    ApprovalDecision.ACCEPT_FOR_SESSION: "approved_for_session",
    ApprovalDecision.DECLINE: "denied",
    ApprovalDecision.CANCEL: "abort",
}
_ALL = tuple(ApprovalDecision)


# Approvals whose denial may come with a message for the model (questions and elicitations
# have their own answer channels).
_NOTED_KINDS = frozenset({ApprovalKind.COMMAND, ApprovalKind.FILE_CHANGE, ApprovalKind.PERMISSIONS})


class Unsupported(Exception):
    """The method is not one we answer; reply ``-32601``."""


def _available(raw: Any) -> tuple[ApprovalDecision, ...]:
    """``availableDecisions`` -> ours: the server's choices first, then the rest of the four.

    The list is only what "the client may present" (schema): for an escalated command 0.171
    sends ``["accept", {"acceptWithExecpolicyAmendment": ...}, "cancel"]``, yet it honours
    ``acceptForSession`` (not asked again in the session) and ``decline`` (the turn goes on)
    as the protocol defines them, so the operator is always offered all four. Object-shaped
    choices stay in the request's ``details``.
    """
    hinted = raw if isinstance(raw, list) else []
    first = [_FROM_V2[d] for d in hinted if isinstance(d, str) and d in _FROM_V2]
    return tuple(dict.fromkeys([*first, *_ALL]))


def granted_subset(wanted: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    """The part of ``chosen`` that was asked for: a ``GrantedPermissionProfile``.

    Only the request's top-level kinds (``network``, ``fileSystem``) can be granted; within
    ``fileSystem`` only the paths / entries the request named. Anything else is dropped, so
    an operator's answer can narrow a request but never widen it.
    """
    out: dict[str, Any] = {}
    for kind, value in chosen.items():
        asked = wanted.get(kind)
        if not isinstance(asked, dict) or not isinstance(value, dict):
            continue
        if kind == "fileSystem":
            fs: dict[str, Any] = {}
            for key in ("read", "write", "entries"):
                allowed = asked.get(key) or []
                picked = [x for x in value.get(key) or [] if x in allowed]
                if picked:
                    fs[key] = picked
            if fs:
                out[kind] = fs
        else:
            same = {k: v for k, v in value.items() if k in asked and asked[k] == v}
            if same:
                out[kind] = same
    return out


def _command_text(cmd: Any) -> str:
    if isinstance(cmd, list):
        return " ".join(str(c) for c in cmd)
    return "" if cmd is None else str(cmd)


class ServerRequests:
    """Serves codex server requests: turns each into :class:`SessionHost` calls, builds the
    result and answers it.

    What the session streamed before the request is handed over first (``outlet``); each
    request is served in a task of ``tasks`` and listed in ``pending`` until answered (a
    turn's end or ``serverRequest/resolved`` withdraws it); an operator's note goes to the
    model with ``steering`` before the answer. ``file_paths`` holds the paths of each
    file-change item seen in ``item/started`` (the approval request itself carries only
    the item id; ``notifications.py`` fills it).
    """

    def __init__(
        self,
        host: SessionHost,
        outlet: EventOutlet,
        steering: Steering,
        pending: PendingRequests,
        tasks: SessionTasks,
        file_paths: Mapping[str, tuple[str, ...]],
    ) -> None:
        self._host = host
        self._out = outlet
        self._steering = steering
        self._pending = pending
        self._tasks = tasks
        self._file_paths = file_paths
        self._notes: dict[Any, OperatorNote] = {}

    def take(self, rpc: RpcConnection, rid: RequestId, method: str, params: dict[str, Any]) -> None:
        """Serve request ``rid`` read from ``rpc`` (``RpcConnection`` ``on_request``)."""
        # What the agent streamed before asking goes first (held deltas included).
        self._out.flush()
        # Served in a task whose first step runs now: an approval or a question is with
        # the host (the operator sees it) before the reader goes on, not a turn later.
        task = self._tasks.spawn_now(self._serve(rpc, rid, method, params))
        if not task.done():
            self._pending.add(rid, task)

    async def _serve(
        self, rpc: RpcConnection, rid: RequestId, method: str, params: dict[str, Any]
    ) -> None:
        try:
            try:
                result = await self.handle(rid, method, params)
            except Unsupported:
                await rpc.respond_error(rid, METHOD_NOT_FOUND, f"method not supported: {method}")
                return
            except Exception as e:
                await rpc.respond_error(rid, -32603, f"client error: {e}")
                return
            note = self.take_note(rid)
            if note is not None:
                # Steer first, while the turn still waits on this request: the note is then
                # in the turn before the model's next step, whatever the server does next.
                await self._steering.deliver(rpc, note)
            await rpc.respond(rid, result)
        except AgentError:
            pass  # the process is gone; nothing left to answer
        finally:
            self._pending.finished(rid)
            self.take_note(rid)  # not delivered when cancelled: do not keep it

    def take_note(self, rid: Any) -> OperatorNote | None:
        """The operator's message that came with a denial of request ``rid`` (once), if any.

        Codex's approval responses carry only the decision, so the message goes to the
        model with ``turn/steer`` just before the request is answered (:meth:`_serve`).
        """
        return self._notes.pop(rid, None)

    def request_id(self, rid: Any) -> str:
        return f"{self._host.issue.id}:{rid}"

    def _base(self, rid: Any, kind: ApprovalKind, params: dict[str, Any]) -> dict[str, Any]:
        issue = self._host.issue
        return {
            "id": self.request_id(rid),
            "issue_id": issue.id,
            "issue_identifier": issue.identifier,
            "backend": "codex",
            "kind": kind,
            "reason": params.get("reason"),
            "details": {k: params.get(k) for k in ("threadId", "turnId", "itemId") if k in params},
        }

    async def _ask(self, rid: Any, request: ApprovalRequest) -> ApprovalAnswer:
        try:
            answer = await self._host.request_approval(request)
        except Exception as e:  # never leave codex waiting because the host failed
            return ApprovalAnswer(
                decision=ApprovalDecision.DECLINE, message=f"host error: {e}", by="policy"
            )
        message = (answer.message or "").strip()
        if (
            message
            and answer.by == "operator"
            and answer.decision == ApprovalDecision.DECLINE
            and request.kind in _NOTED_KINDS
        ):
            turn_id = request.details.get("turnId")
            self._notes[rid] = OperatorNote(
                turn_id=str(turn_id) if turn_id else None,
                text=f"The operator declined your request ({request.summary}). "
                f"Their message: {message[:2000]}",
            )
        return answer

    async def handle(self, rid: Any, method: str, params: dict[str, Any]) -> Any:
        """The result for one server request; raises :class:`Unsupported` for others."""
        if method == "item/commandExecution/requestApproval":
            return await self._command(rid, params)
        if method == "item/fileChange/requestApproval":
            return await self._file_change(rid, params)
        if method == "item/permissions/requestApproval":
            return await self._permissions(rid, params)
        if method == "item/tool/requestUserInput":
            return await self._user_input(rid, params)
        if method == "mcpServer/elicitation/request":
            return await self._elicitation(rid, params)
        if method == "item/tool/call":
            return await self._tool_call(params)
        if method in ("execCommandApproval", "applyPatchApproval"):
            return await self._legacy(rid, method, params)
        raise Unsupported(method)

    async def _command(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        command = _command_text(params.get("command"))
        base = self._base(rid, ApprovalKind.COMMAND, params)
        base["details"].update(
            commandActions=params.get("commandActions"),
            proposedExecpolicyAmendment=params.get("proposedExecpolicyAmendment"),
            additionalPermissions=params.get("additionalPermissions"),
            approvalId=params.get("approvalId"),
            availableDecisions=params.get("availableDecisions"),
        )
        req = ApprovalRequest(
            **base,
            summary=f"run: {command}"[:500],
            command=command,
            cwd=params.get("cwd"),
            available=_available(params.get("availableDecisions")),
        )
        answer = await self._ask(rid, req)
        return {"decision": V2_DECISION[answer.decision]}

    async def _file_change(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        files = self._file_paths.get(str(params.get("itemId") or ""), ())
        base = self._base(rid, ApprovalKind.FILE_CHANGE, params)
        base["details"]["grantRoot"] = params.get("grantRoot")
        req = ApprovalRequest(
            **base,
            summary=("edit: " + ", ".join(files))[:500] if files else "apply file changes",
            files=files,
        )
        answer = await self._ask(rid, req)
        return {"decision": V2_DECISION[answer.decision]}

    async def _permissions(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("permissions")
        wanted: dict[str, Any] = asked if isinstance(asked, dict) else {}
        req = ApprovalRequest(
            **self._base(rid, ApprovalKind.PERMISSIONS, params),
            summary=f"grant permissions: {json.dumps(wanted)[:400]}",
            cwd=params.get("cwd"),
            permissions=wanted,
        )
        answer = await self._ask(rid, req)
        if answer.decision not in (ApprovalDecision.ACCEPT, ApprovalDecision.ACCEPT_FOR_SESSION):
            return {"permissions": {}, "scope": "turn"}
        granted = (
            wanted if answer.permissions is None else granted_subset(wanted, answer.permissions)
        )
        scope = answer.scope or (
            "session" if answer.decision == ApprovalDecision.ACCEPT_FOR_SESSION else "turn"
        )
        return {"permissions": granted, "scope": scope}

    async def _user_input(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        questions = []
        for q in params.get("questions") or []:
            if not isinstance(q, dict) or not q.get("id"):
                continue
            opts = tuple(
                QuestionOption(label=str(o.get("label") or ""), description=o.get("description"))
                for o in q.get("options") or []
                if isinstance(o, dict)
            )
            questions.append(
                Question(
                    id=str(q["id"]),
                    header=str(q.get("header") or ""),
                    question=str(q.get("question") or ""),
                    options=opts,
                )
            )
        summary = questions[0].question if questions else "the agent asks for input"
        req = ApprovalRequest(
            **self._base(rid, ApprovalKind.USER_INPUT, params),
            summary=summary[:500],
            questions=tuple(questions),
            available=(ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE),
        )
        answer = await self._ask(rid, req)
        if answer.decision not in (ApprovalDecision.ACCEPT, ApprovalDecision.ACCEPT_FOR_SESSION):
            return {"answers": {}}
        return {"answers": {qid: {"answers": list(a)} for qid, a in answer.answers.items()}}

    async def _elicitation(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        msg = str(params.get("message") or params.get("description") or "")
        base = self._base(rid, ApprovalKind.ELICITATION, params)
        base["details"].update(
            serverName=params.get("serverName"),
            mode=params.get("mode"),
            url=params.get("url"),
            requestedSchema=params.get("requestedSchema"),
        )
        req = ApprovalRequest(
            **base,
            summary=f"{params.get('serverName') or 'MCP server'}: {msg}"[:500],
            available=(ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE, ApprovalDecision.CANCEL),
        )
        answer = await self._ask(rid, req)
        if answer.decision in (ApprovalDecision.ACCEPT, ApprovalDecision.ACCEPT_FOR_SESSION):
            content = {k: (v[0] if len(v) == 1 else list(v)) for k, v in answer.answers.items()}
            return {"action": "accept", "content": content}
        action = "cancel" if answer.decision == ApprovalDecision.CANCEL else "decline"
        return {"action": action, "content": None}

    async def _tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = str(params.get("tool") or "")
        try:
            result = await self._host.call_tool(name, params.get("arguments"))
            success, text = bool(result.success), str(result.text)
        except Exception as e:  # the model gets a failure, the turn goes on
            success, text = False, f"tool {name} failed: {e.__class__.__name__}: {e}"
        return {"contentItems": [{"type": "inputText", "text": text}], "success": success}

    async def _legacy(self, rid: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "execCommandApproval":
            command = _command_text(params.get("command"))
            req = ApprovalRequest(
                **self._base(rid, ApprovalKind.COMMAND, params),
                summary=f"run: {command}"[:500],
                command=command,
                cwd=params.get("cwd"),
            )
        else:
            changes = params.get("fileChanges")
            files = tuple(str(p) for p in changes) if isinstance(changes, dict) else ()
            req = ApprovalRequest(
                **self._base(rid, ApprovalKind.FILE_CHANGE, params),
                summary=("edit: " + ", ".join(files))[:500],
                files=files,
            )
        answer = await self._ask(rid, req)
        return {"decision": V1_DECISION[answer.decision]}
