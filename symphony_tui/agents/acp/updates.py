"""ACP ``session/update`` notifications -> normalized :class:`~symphony_tui.domain.AgentEvent`
values (docs/protocols.md "Agent Client Protocol";
https://agentclientprotocol.com/protocol/prompt-turn).

:class:`UpdateFolder` keeps what one session's updates have said so far:

* ``agent_message_chunk``: ``MESSAGE_DELTA`` per text chunk, and the joined text as one
  ``MESSAGE`` when the message ends (another kind of update, another ``messageId``, or the
  turn's end: :meth:`UpdateFolder.flush`);
* ``agent_thought_chunk``: joined into one ``REASONING`` the same way (no delta events);
* ``tool_call`` / ``tool_call_update``: fields merged per ``toolCallId``; the start is
  reported once the call runs (``in_progress``) or ends, the end once on ``completed`` /
  ``failed``. ``execute`` calls are commands (``COMMAND_STARTED`` / ``COMMAND_COMPLETED``,
  the command from ``rawInput.command`` else the title, the exit code from ``rawOutput``
  where the agent puts one), ``edit`` / ``delete`` / ``move`` calls file changes
  (``FILE_CHANGE``, the paths from ``locations`` and the ``diff`` contents, each diff
  rendered as a unified diff), others ``TOOL_CALL``;
  A ``terminal`` content item contributes its terminal's output (``terminal_text``);
* ``plan``: ``PLAN`` with the entries as steps; ``available_commands_update`` and
  ``current_mode_update``: a ``NOTIFICATION``; ``user_message_chunk`` (a ``session/load``
  replay of the prompt) and kinds this client does not know: nothing.

Every event's payload carries the message or tool call id as ``item_id``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import (
    CommandEnded,
    CommandStarted,
    FileChange,
    FileEdit,
    ItemNote,
    Notice,
    Payload,
    Plan,
    PlanStatus,
    PlanStep,
    ToolCall,
)
from symphony_tui.text import cap, one_line

Wire = dict[str, Any]

FILE_KINDS = ("edit", "delete", "move")
#: Characters of one rendered diff kept in an event.
DIFF_LIMIT = 16 * 1024
#: Characters of a tool call's output kept in an event.
OUTPUT_LIMIT = 8192
_PLAN_STATUS: dict[str, PlanStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}


def _dict(value: Any) -> Wire:
    return value if isinstance(value, dict) else {}


def unified_diff(path: str, old: Any, new: Any, workspace: PurePath | None = None) -> str:
    """A ``diff`` content item (``oldText`` None for a new file) as a unified diff; its
    headers name ``path`` relative to ``workspace`` when it lies inside it."""
    before = old.splitlines(keepends=True) if isinstance(old, str) else []
    after = new.splitlines(keepends=True) if isinstance(new, str) else []
    shown = path
    if workspace is not None and PurePath(path).is_relative_to(workspace):
        shown = PurePath(path).relative_to(workspace).as_posix()
    lines = difflib.unified_diff(
        before, after, fromfile="/dev/null" if old is None else f"a/{shown}", tofile=f"b/{shown}"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def content_text(content: Any, terminal_text: Callable[[str], str | None] | None = None) -> str:
    """The text of a tool call's ``content`` items of type ``content`` (text blocks), and
    of its ``terminal`` items where ``terminal_text`` knows the terminal's output."""
    parts = []
    for item in content if isinstance(content, list) else []:
        item = _dict(item)
        block = _dict(item.get("content"))
        if item.get("type") == "content" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif item.get("type") == "terminal" and terminal_text is not None:
            text = terminal_text(str(item.get("terminalId")))
            if text:
                parts.append(text)
    return "\n".join(parts)


def _exit_code(raw: Wire) -> int | None:
    meta = _dict(raw.get("metadata"))
    for value in (raw.get("exit_code"), raw.get("exitCode"), raw.get("exit"), meta.get("exit")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class _Call:
    """What the updates of one tool call have said (later fields win)."""

    def __init__(self, call_id: str) -> None:
        self.id = call_id
        self.fields: Wire = {}
        self.started = False
        self.ended = False

    def merge(self, update: Wire) -> None:
        for key, value in update.items():
            if key not in ("sessionUpdate", "toolCallId") and value is not None:
                self.fields[key] = value

    @property
    def kind(self) -> str:
        return str(self.fields.get("kind") or "other")

    @property
    def title(self) -> str:
        return one_line(self.fields.get("title") or self.kind, 500)

    @property
    def command(self) -> str:
        cmd = _dict(self.fields.get("rawInput")).get("command")
        if isinstance(cmd, list):
            return " ".join(str(c) for c in cmd)
        return cmd if isinstance(cmd, str) and cmd else self.title

    def edits(self, *, with_diffs: bool, workspace: PurePath | None = None) -> tuple[FileEdit, ...]:
        out: dict[str, FileEdit] = {}
        for item in self.fields.get("content") or []:
            item = _dict(item)
            if item.get("type") == "diff" and isinstance(item.get("path"), str):
                path = item["path"]
                diff = unified_diff(path, item.get("oldText"), item.get("newText"), workspace)
                out[path] = FileEdit(
                    path=path, kind=self.kind, diff=cap(diff, DIFF_LIMIT) if with_diffs else None
                )
        for loc in self.fields.get("locations") or []:
            path = _dict(loc).get("path")
            if isinstance(path, str) and path not in out:
                out[path] = FileEdit(path=path, kind=self.kind)
        return tuple(out.values())


class UpdateFolder:
    """The events one session's ``session/update`` notifications imply (see the module
    doc). ``session_id`` stamps every event; diffs name paths inside ``workspace``
    relative to it."""

    def __init__(
        self,
        session_id: str | None = None,
        terminal_text: Callable[[str], str | None] | None = None,
        workspace: PurePath | None = None,
    ) -> None:
        self.session_id = session_id
        self._terminal_text = terminal_text
        self._workspace = workspace
        self._calls: dict[str, _Call] = {}
        self._text: list[str] = []  # the agent message being streamed
        self._text_id: str | None = None
        self._thought: list[str] = []
        self._thought_id: str | None = None
        self._n = 0  # messages and thoughts seen, for ids where the agent gives none

    def update(self, update: Wire) -> list[AgentEvent]:
        """The events ``update`` (``params.update`` of one notification) newly implies."""
        kind = update.get("sessionUpdate")
        out: list[AgentEvent] = []
        if kind != "agent_message_chunk":
            out += self._end_message()
        if kind != "agent_thought_chunk":
            out += self._end_thought()
        if kind == "agent_message_chunk":
            out += self._message_chunk(update)
        elif kind == "agent_thought_chunk":
            self._thought_chunk(update)
        elif kind in ("tool_call", "tool_call_update"):
            out += self._tool(update)
        elif kind == "plan":
            out.append(self._plan(update))
        elif kind == "available_commands_update":
            names = [
                str(_dict(c).get("name"))
                for c in update.get("availableCommands") or []
                if _dict(c).get("name")
            ]
            out.append(
                self._event(
                    EventKind.NOTIFICATION,
                    one_line("available commands: " + ", ".join(f"/{n}" for n in names), 500),
                    Notice(notice="available_commands"),
                )
            )
        elif kind == "current_mode_update":
            mode = one_line(update.get("currentModeId"), 100)
            out.append(self._event(EventKind.NOTIFICATION, f"mode: {mode}", Notice(notice="mode")))
        return out

    def flush(self, *, open_calls_as: str | None = None) -> list[AgentEvent]:
        """The turn ended: the message and thought being streamed, whole; with
        ``open_calls_as`` (``failed``...), an end for every tool call that started and did
        not end (``synthetic``)."""
        out = self._end_message() + self._end_thought()
        if open_calls_as is not None:
            for call in self._calls.values():
                if call.started and not call.ended:
                    out.append(self._ended(call, ok=False, synthetic=open_calls_as))
        self._calls.clear()
        return out

    # ------------------------------------------------------------ messages

    def _message_chunk(self, update: Wire) -> list[AgentEvent]:
        text = _dict(update.get("content")).get("text")
        if not isinstance(text, str) or not text:
            return []
        mid = update.get("messageId")
        out: list[AgentEvent] = []
        if self._text and isinstance(mid, str) and mid != self._text_id:
            out += self._end_message()
        if not self._text:
            self._n += 1
            self._text_id = mid if isinstance(mid, str) and mid else f"message-{self._n}"
        self._text.append(text)
        out.append(
            self._event(
                EventKind.MESSAGE_DELTA,
                text,
                ItemNote(item_id=self._text_id, item_type="agent_message"),
            )
        )
        return out

    def _end_message(self) -> list[AgentEvent]:
        if not self._text:
            return []
        text, self._text = "".join(self._text), []
        note = ItemNote(item_id=self._text_id, item_type="agent_message", status="completed")
        return [self._event(EventKind.MESSAGE, cap(text), note)]

    def _thought_chunk(self, update: Wire) -> None:
        text = _dict(update.get("content")).get("text")
        if isinstance(text, str) and text:
            if not self._thought:
                self._n += 1
                mid = update.get("messageId")
                self._thought_id = mid if isinstance(mid, str) and mid else f"thought-{self._n}"
            self._thought.append(text)

    def _end_thought(self) -> list[AgentEvent]:
        if not self._thought:
            return []
        text, self._thought = "".join(self._thought), []
        note = ItemNote(item_id=self._thought_id, item_type="agent_thought", reasoning=True)
        return [self._event(EventKind.REASONING, cap(text), note)]

    # ------------------------------------------------------------ tools and plans

    def _tool(self, update: Wire) -> list[AgentEvent]:
        cid = update.get("toolCallId")
        if not isinstance(cid, str) or not cid:
            return []
        call = self._calls.get(cid)
        if call is None:
            call = self._calls[cid] = _Call(cid)
        call.merge(update)
        status = call.fields.get("status")
        out: list[AgentEvent] = []
        if status in ("in_progress", "completed", "failed") and not call.started:
            call.started = True
            out.append(self._started(call))
        if status in ("completed", "failed") and not call.ended:
            out.append(self._ended(call, ok=status == "completed"))
        return out

    def _started(self, call: _Call) -> AgentEvent:
        item = {"item_id": call.id, "item_type": call.kind, "status": "in_progress"}
        if call.kind == "execute":
            started = CommandStarted(**item, command=call.command, tool=call.title)
            return self._event(EventKind.COMMAND_STARTED, call.command, started)
        if call.kind in FILE_KINDS:
            edits = call.edits(with_diffs=False)
            change = FileChange(**item, changes=edits, tool=call.title)
            what = ", ".join(e.path for e in edits) or call.title
            return self._event(EventKind.FILE_CHANGE, f"editing {what}", change)
        tool = ToolCall(**item, tool=call.title, arguments=_json(call.fields.get("rawInput")))
        return self._event(EventKind.TOOL_CALL, f"{call.title} started", tool)

    def _ended(self, call: _Call, *, ok: bool, synthetic: str | None = None) -> AgentEvent:
        call.ended = True
        status = "completed" if ok else (synthetic or "failed")
        raw = _dict(call.fields.get("rawOutput"))
        output = content_text(call.fields.get("content"), self._terminal_text)
        if not output and isinstance(raw.get("output"), str):
            output = raw["output"]
        error = None if ok else one_line(output or f"tool call {status}", 500)
        item = {
            "item_id": call.id,
            "item_type": call.kind,
            "status": status,
            "synthetic": synthetic is not None,
        }
        if call.kind == "execute":
            code = _exit_code(raw)
            ended = CommandEnded(
                **item,
                command=call.command,
                exit_code=code,
                output=cap(output, OUTPUT_LIMIT),
                error=error,
                tool=call.title,
            )
            tail = f"exit {code}" if code is not None else status
            return self._event(EventKind.COMMAND_COMPLETED, f"{call.command} ({tail})", ended)
        if call.kind in FILE_KINDS:
            edits = call.edits(with_diffs=True, workspace=self._workspace)
            change = FileChange(**item, changes=edits, error=error, tool=call.title)
            what = ", ".join(e.path for e in edits) or call.title
            verb = "edit completed:" if ok else f"edit {status}:"
            return self._event(EventKind.FILE_CHANGE, f"{verb} {what}", change)
        tool = ToolCall(
            **item,
            tool=call.title,
            arguments=_json(call.fields.get("rawInput")),
            success=ok,
            result=cap(output, OUTPUT_LIMIT) if ok else None,
            error=error,
        )
        verb = "completed" if ok else status
        return self._event(EventKind.TOOL_CALL, f"{call.title} {verb}", tool)

    def _plan(self, update: Wire) -> AgentEvent:
        steps = tuple(
            PlanStep(
                step=one_line(_dict(e).get("content"), 500),
                status=_PLAN_STATUS.get(str(_dict(e).get("status")), "pending"),
            )
            for e in update.get("entries") or []
            if isinstance(e, dict)
        )
        done = sum(s.status == "completed" for s in steps)
        return self._event(EventKind.PLAN, f"plan: {done}/{len(steps)} done", Plan(steps=steps))

    def _event(self, kind: EventKind, message: str, payload: Payload) -> AgentEvent:
        return AgentEvent(kind=kind, message=message, session_id=self.session_id, payload=payload)


def _json(value: Any) -> Any:
    """``value`` as plain JSON (what a payload's ``arguments`` holds); None when it is not."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None
