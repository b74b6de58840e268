"""OpenCode permissions and questions as :class:`~symphony_tui.domain.ApprovalRequest` values.

Wire (docs/protocols.md "OpenCode server", ``GET /doc`` of 1.18.33):

* ``permission.asked {id, sessionID, permission, patterns, metadata, always, tool?}``;
  answered by ``POST /permission/{id}/reply {reply: once|always|reject, message?}``.
  ``bash`` carries ``metadata.command``; ``edit`` / ``write`` / ``apply_patch`` carry the file
  (``metadata.filepath``) and the patterns. ``always`` is server-wide and kept in memory
  only. A ``reject`` without a message stops the turn; with a message the model reads it
  (as the tool's error) and goes on.
* ``question.asked {id, sessionID, questions: [{question, header, options: [{label,
  description}], multiple?, custom?}], tool?}``; answered by ``POST /question/{id}/reply
  {answers: [[label, ...] per question]}`` or ``POST /question/{id}/reject``.

Request ids are ``<issue id>:<per_... | que_...>``. Each pending request is one task in
:class:`PendingRequests`, which cancels it when the server says it was answered elsewhere
or when the session drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost
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
COMMAND_PERMISSIONS = ("bash",)
FILE_PERMISSIONS = ("edit", "write", "apply_patch", "multiedit", "patch")


def permission_request(perm: Wire, host: SessionHost, session_id: str) -> ApprovalRequest:
    """The approval the operator sees for one ``permission.asked``."""
    issue = host.issue
    name = str(perm.get("permission") or "permission")
    patterns = tuple(str(p) for p in perm.get("patterns") or [] if isinstance(p, str | int))
    meta = perm.get("metadata") if isinstance(perm.get("metadata"), dict) else {}
    command = None
    files: tuple[str, ...] = ()
    if name in COMMAND_PERMISSIONS:
        kind = ApprovalKind.COMMAND
        command = str(meta.get("command") or " ".join(patterns))
        what = command
    elif name in FILE_PERMISSIONS:
        kind = ApprovalKind.FILE_CHANGE
        path = meta.get("filepath") or meta.get("filePath")
        files = (str(path),) if isinstance(path, str) else patterns
        what = ", ".join(files)
    else:
        kind = ApprovalKind.CONFIRMATION
        what = ", ".join(patterns)
    return ApprovalRequest(
        id=f"{issue.id}:{perm['id']}",
        issue_id=issue.id,
        issue_identifier=issue.identifier,
        backend="opencode",
        kind=kind,
        summary=one_line(f"{name}: {what}" if what else name, 500),
        command=command,
        cwd=str(host.workspace),
        files=files,
        created_at=datetime.now(UTC),
        details={
            "session_id": session_id,
            "permission_id": perm["id"],
            "permission": name,
            "patterns": list(patterns),
            "always": [str(a) for a in perm.get("always") or []],
            "tool": perm.get("tool"),
            "diff": one_line(meta.get("diff"), 4000) if meta.get("diff") else None,
        },
    )


def permission_reply(answer: ApprovalAnswer) -> tuple[str, str | None]:
    """``(reply, message)`` for ``POST /permission/{id}/reply``.

    accept -> ``once``; accept for session -> ``always``; decline and cancel -> ``reject``.
    A decline's message goes to the model (which then continues); a timed-out or a
    cancelled request is rejected without one, so the turn stops.
    """
    if answer.decision == ApprovalDecision.ACCEPT:
        return "once", None
    if answer.decision == ApprovalDecision.ACCEPT_FOR_SESSION:
        return "always", None
    if answer.decision == ApprovalDecision.CANCEL or answer.timed_out:
        return "reject", None
    return "reject", (answer.message or None)


def question_request(question: Wire, host: SessionHost, session_id: str) -> ApprovalRequest:
    """The user-input approval for one ``question.asked``; question ids are ``"0"``, ``"1"``..."""
    issue = host.issue
    items = [q for q in question.get("questions") or [] if isinstance(q, dict)]
    questions = tuple(
        Question(
            id=str(i),
            header=str(q.get("header") or ""),
            question=str(q.get("question") or ""),
            options=tuple(
                QuestionOption(label=str(o.get("label") or ""), description=o.get("description"))
                for o in q.get("options") or []
                if isinstance(o, dict)
            ),
        )
        for i, q in enumerate(items)
    )
    summary = questions[0].question if questions else "the agent asks for input"
    return ApprovalRequest(
        id=f"{issue.id}:{question['id']}",
        issue_id=issue.id,
        issue_identifier=issue.identifier,
        backend="opencode",
        kind=ApprovalKind.USER_INPUT,
        summary=one_line(summary, 500),
        cwd=str(host.workspace),
        questions=questions,
        available=(ApprovalDecision.ACCEPT, ApprovalDecision.DECLINE),
        created_at=datetime.now(UTC),
        details={"session_id": session_id, "question_id": question["id"]},
    )


def question_answers(question: Wire, answer: ApprovalAnswer) -> list[list[str]] | None:
    """The ``answers`` body (labels per question, in order), or ``None`` to reject."""
    if answer.decision not in (ApprovalDecision.ACCEPT, ApprovalDecision.ACCEPT_FOR_SESSION):
        return None
    count = len([q for q in question.get("questions") or [] if isinstance(q, dict)])
    return [list(answer.answers.get(str(i), ())) for i in range(count)]


class PendingRequests:
    """One task per pending permission / question id; ids finished once are not asked
    again. ``on_error(id, error)`` hears about a flow that failed (e.g. the reply was
    refused because the request was gone)."""

    def __init__(self, on_error: Callable[[str, Exception], None]) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._done: set[str] = set()
        self._answering: set[str] = set()
        self._on_error = on_error

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._tasks

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._tasks)

    def start(self, request_id: str, flow: Coroutine[Any, Any, None]) -> None:
        """Run ``flow`` for ``request_id`` unless it is running or finished already."""
        if request_id in self._tasks or request_id in self._done:
            flow.close()
            return
        task = asyncio.create_task(self._run(request_id, flow), name=f"opencode-{request_id}")
        self._tasks[request_id] = task

    def answering(self, request_id: str) -> None:
        """The flow got its decision and is replying: the server's ``replied`` event that
        follows is its own, not a reason to cancel it."""
        self._answering.add(request_id)

    def resolved(self, request_id: str) -> None:
        """The server says ``request_id`` is answered: stop asking (no-op when ours)."""
        self._done.add(request_id)
        if request_id in self._answering:
            return
        task = self._tasks.pop(request_id, None)
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    async def cancel_except(self, keep: set[str]) -> None:
        for rid in [r for r in self._tasks if r not in keep]:
            await self._cancel(rid)

    async def cancel_all(self) -> None:
        for rid in list(self._tasks):
            await self._cancel(rid)

    async def _cancel(self, request_id: str) -> None:
        self._done.add(request_id)
        task = self._tasks.pop(request_id, None)
        if task is None or task is asyncio.current_task():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _run(self, request_id: str, flow: Coroutine[Any, Any, None]) -> None:
        try:
            await flow
        except asyncio.CancelledError:
            raise
        except (AgentError, Exception) as e:  # a host or server failure: report, go on
            self._on_error(request_id, e)
        finally:
            self._done.add(request_id)
            if self._tasks.get(request_id) is asyncio.current_task():
                del self._tasks[request_id]
