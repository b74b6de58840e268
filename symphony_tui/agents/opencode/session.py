"""One issue's OpenCode session, driven turn by turn (docs/protocols.md "OpenCode server").

A turn is ``POST /session/{id}/prompt_async`` (204 at once); the turn's progress comes from
the instance's event stream (:mod:`.stream`), filtered to this session and the sessions it
spawned (``session.created`` with ``parentID``: a ``task`` sub-agent asks permissions too).

Turn end: the session goes idle (``session.status idle`` or ``session.idle``) after the turn
was *armed*: a user message that did not exist before the prompt, or ``busy``, was seen.
So the idle that trails the previous turn (the server repeats it; after an abort a second
one comes once the aborted message is closed) never ends the next one. When the session is
already busy as a turn starts (a re-attach while the server worked on), the turn adopts
that run instead of queueing a new prompt. On idle the turn waits at most ``settle_s`` for
the turn's assistant message to be closed (``time.completed``); one left open is an
interrupted message (a server restart leaves it so for ever).

Outcome: ``session.error`` (or the turn's last assistant message's ``error``)
``MessageAbortedError`` -> INTERRUPTED; any other error -> FAILED with ``<name>: <message>``
on one line; a permission rejected without a message (the turn stops on the server) ->
FAILED ``rejected by <who>: <reason>``, reported as ``TURN_CANCELLED`` with
``outcome: rejected_by_operator`` when the operator did it; else COMPLETED. ``session.status
retry`` (the model call failed and the server retries by itself) is reported as an
``ERROR`` with ``will_retry`` (the scheduler shows it and does not count it as progress).

Approvals (:mod:`.approvals`): ``permission.asked`` and ``question.asked`` are put to
:meth:`SessionHost.request_approval` as they arrive (live or found by a reconcile), one task
each. Interrupt: ``POST /session/{id}/abort``, then the permissions and questions still
pending are rejected (the server keeps them listed after an abort).

Stream drops: after each reconnect :meth:`reconcile` reads ``GET /session/{id}/message``,
``/session/status``, ``/permission`` and ``/question`` and reports what was missed; the
part folder (:mod:`.normalize`) makes sure nothing is reported twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.agents.base import AgentError, SessionHost, TurnResult, TurnStatus
from symphony_tui.agents.http_session import HttpServerSession
from symphony_tui.agents.opencode.approvals import (
    PendingRequests,
    permission_reply,
    permission_request,
    question_answers,
    question_request,
)
from symphony_tui.agents.opencode.client import OpenCodeClient
from symphony_tui.agents.opencode.normalize import PartFolder
from symphony_tui.agents.opencode.stream import EventStream
from symphony_tui.agents.reconnect import StreamOptions
from symphony_tui.domain import ApprovalDecision, EventKind, TokenUsage
from symphony_tui.domain.payloads import (
    AgentTrouble,
    NoteDelivered,
    Notice,
)
from symphony_tui.text import one_line

Wire = dict[str, Any]
ABORTED = "MessageAbortedError"
SETTLE_S = 3.0
MAX_REASON = 300


@dataclass
class _Turn:
    baseline: set[str]  # user message ids that existed before the prompt
    user_id: str | None = None
    busy: bool = False
    idle: bool = False
    error: Wire | None = None
    rejection: str | None = None  # a rejection that stopped the turn
    rejected_by: str = "operator"
    cancelled: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def armed(self) -> bool:
        return self.user_id is not None or self.busy


def error_reason(error: Any) -> str:
    """One line from an OpenCode error ``{name, data: {message}}``: ``name: message``."""
    if not isinstance(error, dict):
        return one_line(error or "unknown error", MAX_REASON)
    name = str(error.get("name") or "error")
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    msg = data.get("message")
    return one_line(f"{name}: {msg}" if msg else name, MAX_REASON)


def session_of(props: Wire) -> str | None:
    """The session an event belongs to (``properties.sessionID``, or the one of its info or
    part)."""
    for holder in (props, props.get("info"), props.get("part")):
        if isinstance(holder, dict) and isinstance(holder.get("sessionID"), str):
            return holder["sessionID"]
    return None


class OpenCodeSession(HttpServerSession):
    """A live session. Built by ``OpenCodeBackend.start_session``."""

    def __init__(
        self,
        host: SessionHost,
        client: OpenCodeClient,
        session_id: str,
        directory: str,
        *,
        model: tuple[str, str] | None,
        stream_options: StreamOptions | None = None,
        pid: int | None = None,
        request_timeout_s: float = 30.0,
        settle_s: float = SETTLE_S,
    ) -> None:
        super().__init__(host, client, session_id, pid=pid, request_timeout_s=request_timeout_s)
        self.client: OpenCodeClient = client
        self.directory = directory
        self._model = model
        self._settle_s = settle_s
        self.stream = EventStream(
            client,
            directory,
            on_event=self._on_event,
            on_reconnected=self.reconcile,
            on_notice=self._on_notice,
            on_failed=self._on_failed,
            options=stream_options,
        )
        self.folder = PartFolder(session_id=session_id)
        self.status = "idle"
        self.ids = {session_id}
        self.usage: TokenUsage = TokenUsage()
        self.messages: dict[str, Wire] = {}  # this session's message infos by id
        self.stale: set[str] = set()  # assistant messages left open before we attached
        self.pending = PendingRequests(self._on_request_error)
        self._turn: _Turn | None = None
        self._last_turn: _Turn | None = None

    # ------------------------------------------------------------ AgentSession

    async def attach(self) -> None:
        """Open the event stream, then fold the history in. Raises :class:`AgentError`."""
        await self.stream.attach()
        await self.reconcile(replay=True)
        if self.status == "idle":
            self.stale = {i for i, m in self.messages.items() if _open_assistant(m)}

    # ------------------------------------------------------------ turn steps

    def _start_turn(self) -> bool:
        users = {i for i, m in self.messages.items() if m.get("role") == "user"}
        turn = self._turn = self._last_turn = _Turn(baseline=users)
        adopt = self.status in ("busy", "retry")
        turn.busy = adopt
        return adopt

    async def steer(self, text: str) -> bool:
        """``prompt_async`` on the busy session: the server stores the user message at
        once and its running loop reads it before the model's next call (the loop goes on
        while the newest user message is unanswered). False when no turn is in flight or
        the session is idle (a prompt then would start a run this turn does not follow)."""
        if self._turn is None or self._closed or self.status not in ("busy", "retry"):
            return False
        self._raise_if_failed()
        await self.client.prompt_async(self.directory, self._server_session_id, text, self._model)
        return True

    async def _send_prompt(self, prompt: str) -> None:
        await self.client.prompt_async(self.directory, self._server_session_id, prompt, self._model)

    async def _follow_turn(self, adopted: bool) -> TurnResult:
        turn = self._turn
        assert turn is not None
        try:
            return await self._follow(turn)
        finally:
            self._turn = None

    def _end_of_turn(self) -> tuple[str | None, bool]:
        turn = self._last_turn
        if turn is None:
            return None, False
        return turn.rejection, turn.rejected_by == "operator"

    async def _stop_run(self) -> None:
        """``POST /session/{id}/abort``, then reject what is still pending."""
        await self.client.abort(self.directory, self._server_session_id)
        await self._drop_pending("interrupted by the operator")

    async def _release(self) -> None:
        await self.pending.cancel_all()

    def _malformed_total(self) -> int:
        return self.stream.malformed

    # ------------------------------------------------------------ reconcile

    async def reconcile(self, *, replay: bool = False) -> None:
        """Bring the view up to date through REST (after a reconnect, and on attach with
        ``replay=True``: history is folded in silently). Raises :class:`AgentError`."""
        d, sid = self.directory, self._server_session_id
        for item in await self.client.messages(d, sid):
            self._fold_message(item["info"], replay=replay)
            for part in item.get("parts") or []:
                if isinstance(part, dict):
                    self._fold_part(part, replay=replay)
        status = (await self.client.status(d)).get(sid)
        kind = status.get("type") if isinstance(status, dict) else None
        listed: set[str] = set()
        for perm in await self.client.permissions(d):
            if perm.get("sessionID") in self.ids and isinstance(perm.get("id"), str):
                listed.add(perm["id"])
                self._ask_permission(perm)
        for question in await self.client.questions(d):
            if question.get("sessionID") in self.ids and isinstance(question.get("id"), str):
                listed.add(question["id"])
                self._ask_question(question)
        # Asked before the drop, answered (or dropped) elsewhere while we were away.
        await self.pending.cancel_except(listed)
        self._set_status(kind if isinstance(kind, str) else "idle", status, reconciled=True)
        self._wake.set()

    # ------------------------------------------------------------ turn loop

    async def _follow(self, turn: _Turn) -> TurnResult:
        settle_until: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            self._raise_if_failed()
            if turn.idle and turn.armed:
                open_ids = self._open_turn_messages(turn)
                if not open_ids:
                    return self._outcome(turn)
                settle_until = settle_until or loop.time() + self._settle_s
                if loop.time() >= settle_until:
                    self.stale |= open_ids
                    return self._outcome(turn, left_open=True)
            self._wake.clear()
            timeout = None if settle_until is None else max(settle_until - loop.time(), 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _open_turn_messages(self, turn: _Turn) -> set[str]:
        return {
            i
            for i, m in self.messages.items()
            if _open_assistant(m) and i not in self.stale and m.get("parentID") not in turn.baseline
        }

    def _outcome(self, turn: _Turn, *, left_open: bool = False) -> TurnResult:
        sid = self._server_session_id
        if turn.cancelled or self._interrupted:
            return TurnResult(TurnStatus.INTERRUPTED, sid, "interrupted by the operator")
        error = turn.error or self._turn_message_error(turn)
        if isinstance(error, dict) and error.get("name") == ABORTED:
            return TurnResult(TurnStatus.INTERRUPTED, sid, "aborted on the server")
        if error is not None:
            return TurnResult(TurnStatus.FAILED, sid, error_reason(error))
        if turn.rejection is not None:
            reason = one_line(f"rejected by {turn.rejected_by}: {turn.rejection}", MAX_REASON)
            return TurnResult(TurnStatus.FAILED, sid, reason)
        if left_open:
            return TurnResult(TurnStatus.INTERRUPTED, sid, "the answer was left unfinished")
        return TurnResult(TurnStatus.COMPLETED, sid)

    def _turn_message_error(self, turn: _Turn) -> Any:
        for info in reversed(list(self.messages.values())):
            if info.get("role") != "assistant" or info.get("parentID") in turn.baseline:
                continue
            return info.get("error")
        return None

    # ------------------------------------------------------------ approvals

    def _ask_permission(self, perm: Wire) -> None:
        if self._closed:
            return
        self.pending.start(perm["id"], self._permission_flow(perm))

    def _ask_question(self, question: Wire) -> None:
        if self._closed:
            return
        self.pending.start(question["id"], self._question_flow(question))

    async def _permission_flow(self, perm: Wire) -> None:
        request = permission_request(perm, self.host, self._server_session_id)
        answer = await self.host.request_approval(request)
        self.pending.answering(perm["id"])
        reply, message = permission_reply(answer)
        turn = self._turn
        if answer.decision == ApprovalDecision.CANCEL:
            if turn is not None:
                turn.cancelled = True
            await self.client.abort(self.directory, self._server_session_id)
        elif reply == "reject" and message is None and turn is not None:
            turn.rejected_by = "timeout" if answer.timed_out else answer.by
            turn.rejection = answer.message or (
                "approval timed out" if answer.timed_out else f"rejected by the {answer.by}"
            )
        await self.client.reply_permission(self.directory, perm["id"], reply, message)
        if message:
            self._emit(
                EventKind.NOTIFICATION,
                f"sent to the agent: {one_line(message, 500)}",
                NoteDelivered(),
            )

    async def _question_flow(self, question: Wire) -> None:
        request = question_request(question, self.host, self._server_session_id)
        answer = await self.host.request_approval(request)
        self.pending.answering(question["id"])
        answers = question_answers(question, answer)
        if answers is None:
            await self.client.reject_question(self.directory, question["id"])
        else:
            await self.client.reply_question(self.directory, question["id"], answers)

    async def _drop_pending(self, why: str) -> None:
        """Reject what this session still has pending on the server (after an abort the
        server keeps them listed; measured on 1.18.33)."""
        await self.pending.cancel_all()
        d = self.directory
        for perm in await self.client.permissions(d):
            if perm.get("sessionID") in self.ids and isinstance(perm.get("id"), str):
                with contextlib.suppress(AgentError):
                    await self.client.reply_permission(d, perm["id"], "reject")
        for question in await self.client.questions(d):
            if question.get("sessionID") in self.ids and isinstance(question.get("id"), str):
                with contextlib.suppress(AgentError):
                    await self.client.reject_question(d, question["id"])
        self._emit(EventKind.NOTIFICATION, f"pending requests dropped ({why})")

    # ------------------------------------------------------------ stream callbacks

    def _on_event(self, event: Wire) -> None:
        kind, props = event["type"], event["properties"]
        if kind in ("session.created", "session.updated"):
            info = props.get("info") if isinstance(props.get("info"), dict) else {}
            if info.get("parentID") in self.ids and isinstance(info.get("id"), str):
                self.ids.add(info["id"])
        sid = session_of(props)
        if sid not in self.ids:
            return
        root = sid == self._server_session_id
        if kind == "message.updated" and isinstance(props.get("info"), dict):
            self._fold_message(props["info"])
        elif kind == "message.part.updated" and isinstance(props.get("part"), dict):
            self._fold_part(props["part"])
        elif kind == "message.part.delta":
            delta = self.folder.delta(props)
            if delta is not None:
                self.host.emit(delta)
        elif kind == "session.status" and root:
            status = props.get("status") if isinstance(props.get("status"), dict) else {}
            self._set_status(str(status.get("type") or ""), status)
        elif kind == "session.idle" and root:
            self._set_status("idle", None)
        elif kind == "session.error":
            self._session_error(props.get("error"), root)
        elif kind == "permission.asked" and isinstance(props.get("id"), str):
            self._ask_permission(props)
        elif kind == "question.asked" and isinstance(props.get("id"), str):
            self._ask_question(props)
        elif kind in ("permission.replied", "question.replied", "question.rejected"):
            self.pending.resolved(str(props.get("requestID")))
        self._wake.set()

    def _fold_message(self, info: Wire, *, replay: bool = False) -> None:
        self.folder.message(info)
        mid = info.get("id")
        if info.get("sessionID") != self._server_session_id or not isinstance(mid, str):
            return
        self.messages[mid] = info
        turn = self._turn
        if (
            turn is not None
            and turn.user_id is None
            and info.get("role") == "user"
            and mid not in turn.baseline
        ):
            turn.user_id = mid

    def _fold_part(self, part: Wire, *, replay: bool = False) -> None:
        if part.get("type") == "step-finish" and part.get("sessionID") != self._server_session_id:
            return  # a sub-agent's usage is its own session's
        events = self.folder.part(part)
        usage = self.folder.usage()
        if replay:
            self.usage = usage
            return
        for event in events:
            self.host.emit(event)
        if usage != self.usage:
            self.usage = usage
            self._emit_usage()

    def _set_status(self, kind: str, raw: Wire | None, *, reconciled: bool = False) -> None:
        if kind not in ("idle", "busy", "retry"):
            return
        changed = kind != self.status
        self.status = kind
        turn = self._turn
        if kind == "retry" and isinstance(raw, dict) and (changed or not reconciled):
            self._emit(
                EventKind.ERROR,
                f"model call failed, the server retries (attempt {raw.get('attempt')}): "
                f"{one_line(raw.get('message') or '', 300)}",
                AgentTrouble(will_retry=True, attempt=_opt_int(raw.get("attempt"))),
            )
        if turn is None:
            return
        if kind in ("busy", "retry"):
            turn.busy = True
        elif turn.armed:
            turn.idle = True

    def _session_error(self, error: Any, root: bool) -> None:
        aborted = isinstance(error, dict) and error.get("name") == ABORTED
        if root and self._turn is not None and self._turn.error is None:
            self._turn.error = error if isinstance(error, dict) else {"name": str(error)}
        if aborted:
            self._emit(EventKind.NOTIFICATION, "the session's run was aborted")
        else:
            self._emit(EventKind.ERROR, error_reason(error), AgentTrouble(sub_session=not root))

    def _on_request_error(self, request_id: str, error: Exception) -> None:
        self._emit(
            EventKind.WARNING,
            f"answering {request_id} failed: {one_line(str(error) or repr(error), 300)}",
            Notice(notice="answer_failed", request_id=request_id),
        )


def _open_assistant(info: Wire) -> bool:
    time = info.get("time") if isinstance(info.get("time"), dict) else {}
    return info.get("role") == "assistant" and time.get("completed") is None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
