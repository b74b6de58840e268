"""OpenCode message parts -> normalized :class:`~symphony_tui.domain.AgentEvent` values, once.

Source: docs/protocols.md "OpenCode server" and frames recorded from 1.18.33
(``tests/agents/opencode/frames``). A part (``prt_...``) is sent again on every change
(``message.part.updated``), and after a reconnect the whole history comes back from
``GET /session/{id}/message``. :class:`PartFolder` remembers, per part id, which phases it
has reported, so a part is reported the same way however often and by which path it
arrives:

* ``text`` (assistant messages): ``MESSAGE_DELTA`` per ``message.part.delta`` while live,
  ``MESSAGE`` once ``time.end`` is set;
* ``reasoning``: ``REASONING`` once ``time.end`` is set;
* ``tool``: ``state.status`` pending -> running -> completed | error. ``bash`` gives
  ``COMMAND_STARTED`` (running), ``COMMAND_OUTPUT`` (growth of ``state.metadata.output``),
  ``COMMAND_COMPLETED`` (``exit_code`` from ``metadata.exit``); ``edit`` / ``write`` /
  ``apply_patch`` give ``FILE_CHANGE`` (in progress, then completed with the diff); other
  tools ``TOOL_CALL``. An end seen without its start (a reconcile) reports both;
* ``step-finish``: ``tokens`` + ``cost`` of one model call; their sum over the session's
  parts is the session's absolute usage (:meth:`PartFolder.usage`).

Every event's payload carries the part id as ``item_id``.
"""

from __future__ import annotations

import json
from typing import Any

from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import (
    CommandEnded,
    CommandStarted,
    FileChange,
    FileEdit,
    ItemNote,
    Payload,
    ToolCall,
)
from symphony_tui.domain.tokens import reported_count
from symphony_tui.text import cap, one_line

COMMAND_TOOLS = ("bash",)
FILE_TOOLS = ("edit", "write", "apply_patch", "multiedit", "patch")

Wire = dict[str, Any]


def step_usage(part: Wire) -> TokenUsage:
    """One ``step-finish`` part's ``tokens`` / ``cost`` as a :class:`TokenUsage`.

    OpenCode splits the prompt into ``input`` (uncached), ``cache.read`` and ``cache.write``
    and the answer into ``output`` and ``reasoning`` (measured: a fake-model answer of
    prompt 120 / cached 20 / completion 12 arrives as input 100, cache.read 20, output 12).
    The domain counts cached input inside input and reasoning inside output, so
    input = input + cache.read + cache.write and output = output + reasoning. ``total``
    (optional in the ``StepFinishPart`` schema) is input + output; a count the part omits
    is derived from the others where it can be (:meth:`TokenUsage.derived`).
    """
    tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    read = _int(cache.get("read"))
    uncached = reported_count(tokens.get("input"))
    inp = None if uncached is None else uncached + read + _int(cache.get("write"))
    reasoning = _int(tokens.get("reasoning"))
    answer = reported_count(tokens.get("output"))
    out = None if answer is None else answer + reasoning
    cost = part.get("cost")
    usd = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0
    return TokenUsage.derived(
        input_tokens=inp,
        cached_input_tokens=read,
        output_tokens=out,
        reasoning_tokens=reasoning,
        total_tokens=reported_count(tokens.get("total")),
        cost_usd=usd if usd > 0 else None,
    )


def tool_command(part: Wire) -> str:
    """A one-line description of a tool part: the command for ``bash``, the file for file
    tools, else ``<tool> <title or input>``."""
    tool = str(part.get("tool") or "tool")
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    inp = state.get("input") if isinstance(state.get("input"), dict) else {}
    if tool in COMMAND_TOOLS and isinstance(inp.get("command"), str):
        return inp["command"]
    files = tool_files(part)
    if tool in FILE_TOOLS and files:
        return f"{tool} {', '.join(files)}"
    title = state.get("title")
    if isinstance(title, str) and title:
        return f"{tool} {title}"
    return f"{tool} {json.dumps(inp, sort_keys=True)[:200]}" if inp else tool


def tool_files(part: Wire) -> list[str]:
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    inp = state.get("input") if isinstance(state.get("input"), dict) else {}
    meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
    files = [inp[k] for k in ("filePath", "path") if isinstance(inp.get(k), str)]
    for f in meta.get("files") or []:
        path = f.get("filePath") if isinstance(f, dict) else f
        if isinstance(path, str):
            files.append(path)
    return list(dict.fromkeys(files))


class PartFolder:
    """What one session's parts have reported so far (see the module doc).

    :meth:`part` takes a part (live ``message.part.updated`` or from the message list) and
    returns the events it newly implies; :meth:`delta` takes a ``message.part.delta``.
    ``roles`` maps message id -> role (user text parts are the prompt, not agent output).
    Events are stamped with ``session_id`` (the OpenCode session the parts belong to).
    """

    def __init__(self, *, session_id: str | None = None) -> None:
        self.session_id = session_id
        self.roles: dict[str, str] = {}
        self._phases: dict[str, set[str]] = {}
        self._types: dict[str, str] = {}
        self._output: dict[str, int] = {}  # bash part -> output characters reported
        self._steps: dict[str, TokenUsage] = {}

    def usage(self) -> TokenUsage:
        """Absolute usage: the sum over the ``step-finish`` parts seen (each counted once)."""
        total = TokenUsage()
        for u in self._steps.values():
            total = total + u
        return total

    def seen(self, part_id: str, phase: str) -> bool:
        return phase in self._phases.get(part_id, set())

    def message(self, info: Wire) -> None:
        if isinstance(info.get("id"), str) and isinstance(info.get("role"), str):
            self.roles[info["id"]] = info["role"]

    def delta(self, props: Wire) -> AgentEvent | None:
        """``message.part.delta {messageID, partID, field, delta}`` of a text part ->
        ``MESSAGE_DELTA`` (reasoning deltas are folded into the final ``REASONING``)."""
        pid, delta = props.get("partID"), props.get("delta")
        if not isinstance(pid, str) or not isinstance(delta, str) or props.get("field") != "text":
            return None
        if self._types.get(pid) != "text" or self.seen(pid, "end"):
            return None
        if self.roles.get(str(props.get("messageID"))) == "user":
            return None
        return self._event(
            kind=EventKind.MESSAGE_DELTA, message=delta, payload=ItemNote(item_id=pid)
        )

    def part(self, part: Wire) -> list[AgentEvent]:
        """The events ``part`` newly implies (empty when nothing changed for a reader)."""
        pid, typ = part.get("id"), part.get("type")
        if not isinstance(pid, str) or not isinstance(typ, str):
            return []
        self._types[pid] = typ
        if typ == "step-finish":
            # Usage is read as a whole through usage(); the session reports its changes.
            self._steps[pid] = step_usage(part)
            return []
        if typ in ("text", "reasoning"):
            if self.roles.get(str(part.get("messageID"))) == "user" or part.get("synthetic"):
                return []
            time = part.get("time") if isinstance(part.get("time"), dict) else {}
            if time.get("end") is None or not self._mark(pid, "end"):
                return []
            kind = EventKind.MESSAGE if typ == "text" else EventKind.REASONING
            note = ItemNote(item_id=pid, item_type=typ)
            return [self._event(kind=kind, message=cap(part.get("text")), payload=note)]
        if typ == "tool":
            return self._tool(pid, part)
        return []

    # ------------------------------------------------------------ tools

    def _tool(self, pid: str, part: Wire) -> list[AgentEvent]:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        status = state.get("status")
        if status not in ("running", "completed", "error"):
            return []
        tool = str(part.get("tool") or "")
        command = tool_command(part)
        out: list[AgentEvent] = []
        if self._mark(pid, "start"):
            out.append(self._started(pid, tool, command, part))
        meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        text = state.get("output") if status == "completed" else meta.get("output")
        if tool in COMMAND_TOOLS and isinstance(text, str) and not self.seen(pid, "end"):
            done = self._output.get(pid, 0)
            if len(text) > done:
                self._output[pid] = len(text)
                piece = text[done:]
                out.append(
                    self._event(
                        kind=EventKind.COMMAND_OUTPUT,
                        message=cap(piece),
                        payload=ItemNote(item_id=pid, item_type="tool"),
                    )
                )
        if status in ("completed", "error") and self._mark(pid, "end"):
            out.append(self._ended(pid, tool, command, part, state, meta))
        return out

    def _started(self, pid: str, tool: str, command: str, part: Wire) -> AgentEvent:
        item = {"item_id": pid, "item_type": "tool", "status": "in_progress", "tool": tool}
        if tool in COMMAND_TOOLS:
            started = CommandStarted(**item, command=command)
            return self._event(kind=EventKind.COMMAND_STARTED, message=command, payload=started)
        if tool in FILE_TOOLS:
            files = tool_files(part)
            change = FileChange(**item, changes=tuple(FileEdit(path=f) for f in files))
            return self._event(
                kind=EventKind.FILE_CHANGE,
                message=f"editing {', '.join(files) or tool}",
                payload=change,
            )
        call = ToolCall(**item)
        return self._event(kind=EventKind.TOOL_CALL, message=f"{command} started", payload=call)

    def _ended(
        self, pid: str, tool: str, command: str, part: Wire, state: Wire, meta: Wire
    ) -> AgentEvent:
        ok = state.get("status") == "completed"
        error = None if ok else one_line(state.get("error") or "tool failed", 500)
        item = {
            "item_id": pid,
            "item_type": "tool",
            "status": "completed" if ok else "failed",
            "tool": tool,
            "error": error,
        }
        if tool in COMMAND_TOOLS:
            code = meta.get("exit")
            exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            output = state.get("output") if ok else meta.get("output")
            ended = CommandEnded(
                **item,
                command=command,
                exit_code=exit_code,
                output=cap(output if isinstance(output, str) else ""),
            )
            tail = f"exit {exit_code}" if exit_code is not None else (error or "failed")
            return self._event(
                kind=EventKind.COMMAND_COMPLETED, message=f"{command} ({tail})", payload=ended
            )
        if tool in FILE_TOOLS:
            files = tool_files(part)
            diff = meta.get("diff") if isinstance(meta.get("diff"), str) else ""
            edits = [FileEdit(path=f, kind=tool, diff=cap(diff, 16 * 1024)) for f in files[:1]]
            edits += [FileEdit(path=f, kind=tool) for f in files[1:]]
            change = FileChange(**item, changes=tuple(edits))
            verb = "edit completed:" if ok else f"edit failed ({error}):"
            return self._event(
                kind=EventKind.FILE_CHANGE, message=f"{verb} {', '.join(files)}", payload=change
            )
        call = ToolCall(**item, success=ok, result=cap(state.get("output"), 8192) if ok else None)
        return self._event(
            kind=EventKind.TOOL_CALL,
            message=f"{command} {'completed' if ok else f'failed: {error}'}",
            payload=call,
        )

    def _event(self, *, kind: EventKind, message: str, payload: Payload) -> AgentEvent:
        return AgentEvent(kind=kind, message=message, session_id=self.session_id, payload=payload)

    def _mark(self, part_id: str, phase: str) -> bool:
        """Record ``phase`` for ``part_id``; True when it is new."""
        phases = self._phases.setdefault(part_id, set())
        if phase in phases:
            return False
        phases.add(phase)
        return True


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
