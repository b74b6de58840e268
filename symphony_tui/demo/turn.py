"""The deterministic script of one demo turn (notification order per docs/protocols.md
"Codex app-server").

A turn goes: ``thread/status/changed`` active -> ``turn/started`` -> the user message item ->
a reasoning item -> an agent message streamed in deltas -> ``account/rateLimits/updated`` ->
a ``commandExecution`` item that really runs ``ls -la`` in the workspace -> (``approval``) a
command that needs the operator's decision -> a ``fileChange`` item that really writes
``NOTES-<workspace>.md`` -> ``turn/diff/updated`` -> the ``symphony_set_issue_state`` dynamic
tool call (``item/tool/call``) -> a closing message -> ``turn/completed`` -> status idle.
``thread/tokenUsage/updated`` follows every simulated model response, with cumulative thread
totals.

Directives (see :mod:`symphony_tui.demo.directives`) change the script: ``fail-once`` fails
the first attempt in a workspace, ``two-turns`` finishes on the thread's second turn,
``slow`` paces everything :data:`SLOW_FACTOR` times slower, ``escape-sample`` puts ANSI escapes and Rich
markup into the agent's text.

An interrupt cancels the task running :meth:`TurnScript.run`; as real codex does, items that
were open get no ``item/completed`` and a pending approval's ``serverRequest/resolved`` comes
after ``turn/completed``.
"""

from __future__ import annotations

import asyncio
import difflib
import shlex
import time
from pathlib import Path
from typing import Any

from symphony_tui.demo.directives import Directives
from symphony_tui.demo.pacing import Pacer
from symphony_tui.demo.shell import run_command
from symphony_tui.demo.threads import STATE_DIR, DemoThread, TurnRecord, new_id
from symphony_tui.demo.transport import RequestFailed, Transport, now_ms

STATE_TOOL = "symphony_set_issue_state"
FINAL_STATE = "Done"
FAIL_MARKER = "failed-once"
ESCAPE_SAMPLE = "\x1b[31mred\x1b[0m and [bold]markup[/bold]"
_DELTA_PAUSES_MS = (60, 110, 80, 140, 50, 95)


class EndTurn(Exception):
    """Ends the turn early with a status (``failed`` / ``interrupted``) and an error text."""

    def __init__(self, status: str, error: str | None) -> None:
        super().__init__(error or status)
        self.status = status
        self.error = error


def _approval_needed(policy: Any, escalated: bool) -> bool:
    """Whether a command asks first, per ``approvalPolicy`` (docs/protocols.md "Enums")."""
    if policy == "never":
        return False
    if policy == "untrusted":
        return True
    if isinstance(policy, dict):
        granular = policy.get("granular") or {}
        return escalated and bool(granular.get("sandbox_approval", True))
    return escalated  # on-request: only when the model asks to escalate


def _decision_word(result: Any) -> str:
    """The decision of a ``requestApproval`` answer; anything unreadable counts as decline."""
    decision = result.get("decision") if isinstance(result, dict) else None
    if isinstance(decision, dict) and (
        "acceptWithExecpolicyAmendment" in decision or "applyNetworkPolicyAmendment" in decision
    ):
        return "accept"
    if decision in ("accept", "acceptForSession", "decline", "cancel"):
        return decision
    return "decline"


def _chunks(text: str, words_per_chunk: int = 3) -> list[str]:
    """Split text into deltas of a few words, keeping every character (spaces included)."""
    parts = text.split(" ")
    out = []
    for i in range(0, len(parts), words_per_chunk):
        piece = " ".join(parts[i : i + words_per_chunk])
        out.append(piece if i + words_per_chunk >= len(parts) else piece + " ")
    return [p for p in out if p]


def _words(text: str) -> int:
    """A rough token count for simulated usage (about 4 characters a token)."""
    return max(1, len(text) // 4)


#: How much longer ``slow`` makes every pause: a slow two-turn issue works for about a minute
#: and a half at the default speed, time enough to find it and try the interrupt key.
SLOW_FACTOR = 24.0


class TurnScript:
    """Runs one turn of ``thread`` for ``prompt`` (the ``turn/start`` input text)."""

    def __init__(
        self,
        transport: Transport,
        thread: DemoThread,
        turn: TurnRecord,
        prompt: str,
        directives: Directives,
        speed: float,
    ) -> None:
        self.t = transport
        self.thread = thread
        self.turn = turn
        self.prompt = prompt
        self.directives = directives
        self.pacer = Pacer(speed, SLOW_FACTOR if "slow" in directives else 1.0)
        self.cwd = thread.cwd
        self.name = thread.cwd.name or "workspace"
        self.pending_request: int | None = None
        self.turn_number = len(thread.turns)
        self.steered: list[str] = []  # `turn/steer` input received during this turn

    def steer(self, text: str) -> None:
        """Input added to the running turn (an operator's note with a denial)."""
        self.steered.append(text)

    # -- notification helpers -------------------------------------------------------------

    def _ids(self) -> dict[str, str]:
        return {"threadId": self.thread.id, "turnId": self.turn.id}

    def _status(self, kind: str, flags: list[str] | None = None) -> None:
        status: dict[str, Any] = {"type": kind}
        self.thread.active_flags = list(flags or [])
        if kind == "active":
            status["activeFlags"] = list(self.thread.active_flags)
        self.t.notify("thread/status/changed", {"threadId": self.thread.id, "status": status})

    def _started(self, item: dict[str, Any]) -> None:
        if "status" in item:  # a running item is listed (thread/turns/list) from its start
            self.turn.keep_item(item)
        self.t.notify("item/started", {"item": item, **self._ids(), "startedAtMs": now_ms()})

    def _completed(self, item: dict[str, Any]) -> None:
        self.turn.keep_item(item)
        self.t.notify("item/completed", {"item": item, **self._ids(), "completedAtMs": now_ms()})

    def _tokens(self, prompt_text: str, output_text: str, reasoning: int = 0) -> None:
        last = self.thread.account(_words(prompt_text), _words(output_text), reasoning)
        self.t.notify(
            "thread/tokenUsage/updated", {**self._ids(), "tokenUsage": self.thread.usage_wire(last)}
        )

    def _rate_limits(self) -> None:
        used = min(99, 3 + self.thread.total.input // 4000)
        now = int(time.time())
        self.t.notify(
            "account/rateLimits/updated",
            {
                "rateLimits": {
                    "limitId": "codex",
                    "limitName": None,
                    "primary": {
                        "usedPercent": used,
                        "windowDurationMins": 300,
                        "resetsAt": now + 3 * 3600,
                    },
                    "secondary": {
                        "usedPercent": max(1, used // 3),
                        "windowDurationMins": 10080,
                        "resetsAt": now + 5 * 86400,
                    },
                    "credits": {"hasCredits": True, "unlimited": False, "balance": "42.00"},
                    "planType": "pro",
                }
            },
        )

    # -- items -----------------------------------------------------------------------------

    async def _message(self, text: str) -> None:
        item = {"type": "agentMessage", "id": f"msg_{new_id()}", "text": "", "phase": None}
        self._started(item)
        for i, delta in enumerate(_chunks(text)):
            await self.pacer.pause(_DELTA_PAUSES_MS[i % len(_DELTA_PAUSES_MS)])
            self.t.notify(
                "item/agentMessage/delta", {**self._ids(), "itemId": item["id"], "delta": delta}
            )
        self._completed({**item, "text": text})
        self._tokens(self.prompt if self.thread.context == 0 else "", text)

    async def _reasoning(self, summary: str) -> None:
        item = {"type": "reasoning", "id": f"rs_{new_id()}", "summary": [], "content": []}
        self._started(item)
        for i, delta in enumerate(_chunks(summary, 4)):
            await self.pacer.pause(_DELTA_PAUSES_MS[i % len(_DELTA_PAUSES_MS)])
            self.t.notify(
                "item/reasoning/summaryTextDelta",
                {**self._ids(), "itemId": item["id"], "delta": delta, "summaryIndex": 0},
            )
        self._completed({**item, "summary": [summary]})
        self._tokens(self.prompt, summary, reasoning=48 + 16 * self.turn_number)

    async def _command(self, command: str, *, escalated: bool = False, reason: str = "") -> str:
        """Run one command item; returns its final status (``completed`` / ``failed`` /
        ``declined``). Raises :class:`EndTurn` on a ``cancel`` decision."""
        actions: list[dict[str, Any]]
        if command.startswith("ls"):
            actions = [{"type": "listFiles", "command": command, "path": None}]
        else:
            actions = [{"type": "unknown", "command": command}]
        item: dict[str, Any] = {
            "type": "commandExecution",
            "id": f"call_{new_id()}",
            "command": command,
            "cwd": str(self.cwd),
            "processId": None,
            "status": "inProgress",
            "commandActions": actions,
            "aggregatedOutput": None,
            "exitCode": None,
            "durationMs": None,
        }
        ask = _approval_needed(self.thread.approval_policy, escalated)
        if ask and command not in self.thread.approved_commands:
            self._status("active", ["waitingOnApproval"])
            self._started(item)
            decision = await self._ask_approval(item, reason or "Run this command?", actions)
            self._status("active")
            if decision == "acceptForSession":
                self.thread.approved_commands.add(command)
            if decision in ("decline", "cancel"):
                self._completed({**item, "status": "declined"})
                if decision == "cancel":
                    raise EndTurn("interrupted", None)
                return "declined"
        else:
            self._started(item)
        started = time.monotonic()

        def on_output(delta: str) -> None:
            self.t.notify(
                "item/commandExecution/outputDelta",
                {**self._ids(), "itemId": item["id"], "delta": delta},
            )

        code, output = await run_command(command, self.cwd, on_output)
        status = "completed" if code == 0 else "failed"
        self._completed(
            {
                **item,
                "status": status,
                "aggregatedOutput": output,
                "exitCode": code,
                "durationMs": int((time.monotonic() - started) * 1000),
            }
        )
        self._tokens(output, "")
        return status

    async def _ask_approval(
        self, item: dict[str, Any], reason: str, actions: list[dict[str, Any]]
    ) -> str:
        request_id, fut = self.t.request(
            "item/commandExecution/requestApproval",
            {
                **self._ids(),
                "itemId": item["id"],
                "startedAtMs": now_ms(),
                "reason": reason,
                "command": item["command"],
                "cwd": str(self.cwd),
                "commandActions": actions,
            },
        )
        self.pending_request = request_id
        try:
            result = await fut
        except RequestFailed as exc:
            result = None
            self.t.notify("warning", {"threadId": self.thread.id, "message": f"approval: {exc}"})
        self.pending_request = None
        self.t.notify(
            "serverRequest/resolved", {"threadId": self.thread.id, "requestId": request_id}
        )
        return _decision_word(result)

    async def _file_change(self, path: Path, content: str) -> None:
        rel = path.relative_to(self.cwd).as_posix()
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        diff = "".join(
            difflib.unified_diff(
                [] if old is None else old.splitlines(keepends=True),
                content.splitlines(keepends=True),
                fromfile="/dev/null" if old is None else f"a/{rel}",
                tofile=f"b/{rel}",
            )
        )
        kind = {"type": "add"} if old is None else {"type": "update", "move_path": None}
        change = {"path": str(path), "kind": kind, "diff": diff}
        item = {"type": "fileChange", "id": f"patch_{new_id()}", "changes": [change]}
        self._started({**item, "status": "inProgress"})
        await self.pacer.pause(150)
        try:
            path.write_text(content, encoding="utf-8")
            status = "completed"
        except OSError as exc:
            status = "failed"
            self.t.notify("warning", {"threadId": self.thread.id, "message": f"write: {exc}"})
        self._completed({**item, "status": status})
        self.t.notify("turn/diff/updated", {**self._ids(), "diff": diff})
        self._tokens("", content)

    async def _tool_call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        item: dict[str, Any] = {
            "type": "dynamicToolCall",
            "id": f"tool_{new_id()}",
            "tool": tool,
            "arguments": arguments,
            "status": "inProgress",
            "contentItems": None,
            "success": None,
            "durationMs": None,
        }
        self._started(item)
        started = time.monotonic()
        request_id, fut = self.t.request(
            "item/tool/call",
            {**self._ids(), "callId": item["id"], "tool": tool, "arguments": arguments},
        )
        self.pending_request = request_id
        try:
            result = await fut
        except RequestFailed as exc:
            result = {"contentItems": [{"type": "inputText", "text": str(exc)}], "success": False}
        self.pending_request = None
        self.t.notify(
            "serverRequest/resolved", {"threadId": self.thread.id, "requestId": request_id}
        )
        items = result.get("contentItems") if isinstance(result, dict) else None
        items = items if isinstance(items, list) else []
        success = bool(result.get("success")) if isinstance(result, dict) else False
        text = " ".join(
            str(c.get("text", "")) for c in items if isinstance(c, dict) and c.get("text")
        )
        self._completed(
            {
                **item,
                "status": "completed" if success else "failed",
                "contentItems": items,
                "success": success,
                "durationMs": int((time.monotonic() - started) * 1000),
            }
        )
        self._tokens(text, json_len_hint(arguments))
        return success, text

    # -- the script ------------------------------------------------------------------------

    async def run(self) -> tuple[str, str | None]:
        """Play the turn; returns ``(status, error)`` for ``turn/completed``."""
        try:
            await self._play()
        except EndTurn as end:
            return end.status, end.error
        return "completed", None

    async def _play(self) -> None:
        d = self.directives
        name = self.name
        continuation = self.turn_number > 1
        self._started(self._user_message())
        self._completed(self._user_message())
        await self._reasoning(
            f"Continuing the work on {name} where the last turn stopped."
            if continuation
            else f"Reading the issue for {name} and looking around the workspace first."
        )
        if unknown := [w for w in d.unknown]:
            self.t.notify(
                "warning",
                {"threadId": self.thread.id, "message": f"unknown demo directive(s): {unknown}"},
            )
        if "fail-once" in d:
            await self._maybe_fail()
        plan = (
            f"Picking {name} up again: I will refresh the notes and then finish."
            if continuation
            else f"Plan for {name}: list the workspace, write NOTES-{name}.md, then move "
            f"the issue to {FINAL_STATE}."
        )
        if "escape-sample" in d:
            plan += f" Sample of hostile text, shown as plain text: {ESCAPE_SAMPLE}."
        await self._message(plan)
        self._rate_limits()
        await self.pacer.pause(200)
        listing = "ls -la"
        if "escape-sample" in d:
            listing += " && printf 'colour check: \\033[31mred\\033[0m [bold]markup[/bold]\\n'"
        await self._command(listing)
        approved = None
        if "approval" in d:
            await self.pacer.pause(200)
            release = f"RELEASE-{name}.txt"
            approved = await self._command(
                f"printf 'release approved for %s\\n' {shlex.quote(name)} > "
                f"{shlex.quote(release)} && cat {shlex.quote(release)}",
                escalated=True,
                reason=f"Write {release} in the workspace (needs your approval).",
            )
            if approved == "declined":
                # a note with the denial arrives as `turn/steer`, before the decision
                heard = f' (your note: "{self.steered[-1][-200:]}")' if self.steered else ""
                await self._message(
                    f"Understood: the release step was declined{heard}, skipping it."
                )
        await self.pacer.pause(200)
        await self._file_change(self.cwd / f"NOTES-{name}.md", self._notes(approved))
        if "two-turns" in d and self.turn_number < 2:
            await self._message(
                "Half of the work is done. I will finish it in a continuation turn on this "
                "same thread."
            )
            return
        await self._finish()

    async def _finish(self) -> None:
        name = self.name
        if STATE_TOOL not in self.thread.tools:
            await self._message(
                f"Done with {name}, but the {STATE_TOOL} tool was not advertised, so "
                "moving the issue is left to the operator."
            )
            return
        await self.pacer.pause(200)
        ok, text = await self._tool_call(STATE_TOOL, {"state": FINAL_STATE})
        if ok:
            await self._message(f"Finished {name} and moved it to {FINAL_STATE}. ({text})")
        else:
            await self._message(
                f"Finished {name}, but moving it to {FINAL_STATE} failed: {text or 'no reason'}"
            )

    async def _maybe_fail(self) -> None:
        marker = self.cwd / STATE_DIR / FAIL_MARKER
        if marker.exists():
            await self._message("This step failed last time; trying again now.")
            return
        await self._message("Trying the flaky step first...")
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("the first attempt failed on purpose\n", encoding="utf-8")
        except OSError as exc:
            self.t.notify("warning", {"threadId": self.thread.id, "message": f"marker: {exc}"})
        message = "demo: simulated failure on the first attempt ([demo: fail-once])"
        self.t.notify(
            "error",
            {
                **self._ids(),
                "willRetry": False,
                "error": {"message": message, "codexErrorInfo": None, "additionalDetails": None},
            },
        )
        raise EndTurn("failed", message)

    def _user_message(self) -> dict[str, Any]:
        return {
            "type": "userMessage",
            "id": f"user_{self.turn.id}",
            "content": [{"type": "text", "text": self.prompt, "text_elements": []}],
        }

    def _notes(self, approval: str | None) -> str:
        lines = [
            f"# Notes for {self.name}",
            "",
            "Written by the Symphony demo agent (a simulated coding agent).",
            "",
            f"- thread: {self.thread.id}",
            f"- turns so far: {self.turn_number}",
            "- listed the workspace with `ls -la`",
        ]
        if approval is not None:
            lines.append(f"- release step: {approval}")
        if "two-turns" in self.directives:
            lines.append(
                "- second turn: finished the work" if self.turn_number >= 2 else "- first half"
            )
        return "\n".join(lines) + "\n"


def json_len_hint(arguments: dict[str, Any]) -> str:
    """Text standing in for the tool-call arguments the simulated model produced."""
    return str(arguments)


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel a turn task and wait until it has emitted its ``turn/completed``."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
