"""Turn a worker's events into transcript blocks (pure; no Textual).

Source: the kinds in ``symphony_tui.domain.events`` and their payload types in
``symphony_tui.domain.payloads``. Streaming deltas (``message_delta``, ``command_output``)
are not shown line by line: the completed item carries the text, and command output is
kept per item so a completed command can show its tail.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import clean, inert, one_line
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import (
    CommandEnded,
    CommandStarted,
    FileChange,
    HookResult,
    NoteDelivered,
    Plan,
)

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones

OUTPUT_TAIL_LINES = 8
DIFF_LINES = 40  # per file change; the rest is counted, the workspace has it all
_OUTPUT_KEEP = 64 * 1024  # chars of streamed output kept per command item
#: Command items whose streamed output is kept at once (the newest): a command that never
#: completes (an interrupted turn) must not keep its output for the screen's lifetime, so
#: the kept output is bounded by bytes, ``_OUTPUT_ITEMS * _OUTPUT_KEEP`` characters.
_OUTPUT_ITEMS = 16

HIDDEN = frozenset({EventKind.MESSAGE_DELTA, EventKind.TOKEN_USAGE, EventKind.RATE_LIMITS})


PLAN_GLYPHS = {"completed": "✓", "inprogress": "▸", "in_progress": "▸", "pending": "○"}


def plan_steps(event: AgentEvent) -> list[tuple[str, str]]:
    """``(status, step)`` pairs of a PLAN event's steps (status ``pending`` /
    ``in_progress`` / ``completed``); ``[]`` for a plan without steps or another event."""
    plan = event.payload
    if not isinstance(plan, Plan):
        return []
    return [(s.status, s.step) for s in plan.steps if s.step]


def plan_progress(steps: list[tuple[str, str]]) -> tuple[int, str | None]:
    """How many steps are done, and the step in progress (or the next pending one)."""
    done = sum(1 for status, _ in steps if status.lower() == "completed")
    current = next(
        (step for status, step in steps if status.lower() in ("inprogress", "in_progress")),
        next((step for status, step in steps if status.lower() != "completed"), None),
    )
    return done, current


def diff_text(diff: str, tones: Tones, limit: int = DIFF_LINES) -> Text:
    """A unified diff, inert, coloured by line type (``+`` / ``-`` / ``@@``); at most
    ``limit`` lines, then a count of the rest."""
    lines = clean(diff, multiline=True).rstrip("\n").split("\n")
    text = Text(end="")
    for i, line in enumerate(lines[:limit]):
        if i:
            text.append("\n")
        if line.startswith(("+++", "---")):
            style = tones.bold
        elif line.startswith("+"):
            style = tones.success
        elif line.startswith("-"):
            style = tones.error
        elif line.startswith("@@"):
            style = tones.primary
        else:
            style = tones.muted
        text.append(line, style=style)
    if len(lines) > limit:
        text.append(f"\n… {len(lines) - limit} more diff lines", style=tones.muted)
    return text


#: The line an agent adapter puts first when it kept only the end of a command's output
#: (``symphony_tui.agents.codex.events.cap_tail``: ``[... N characters cut]``).
_CUT_MARKER = re.compile(r"\A\[\.\.\. (\d+) characters cut\]\n")


def tail(text: str, lines: int = OUTPUT_TAIL_LINES, cut: int = 0) -> str:
    """The last ``lines`` lines of ``text``, after a note of what is not shown: the number
    of earlier lines kept but not shown, and the characters cut before them (``cut``, plus
    those of a leading ``[... N characters cut]`` marker, which is not counted as a line).
    Never a count of lines that were cut: only their characters are known."""
    marker = _CUT_MARKER.match(text)
    if marker is not None:
        cut += int(marker.group(1))
        text = text[marker.end() :]
    body = clean(text, multiline=True).rstrip("\n")
    parts = body.split("\n")
    shown = parts[-lines:]
    hidden = len(parts) - len(shown)
    note = []
    if hidden:
        note.append(f"… {hidden:,} more lines")
    if cut:
        note.append(
            f"{cut:,} characters cut before them" if hidden else f"… {cut:,} earlier characters cut"
        )
    if note:
        shown.insert(0, ", ".join(note))
    return "\n".join(shown)


class Transcript:
    """Stateful formatter: feed events in ``seq`` order, get ``Text`` blocks back."""

    def __init__(self, tones: Tones) -> None:
        self.tones = tones
        #: item id -> (the end of its streamed output, characters cut before that end)
        self._output: dict[str, tuple[str, int]] = {}

    def block(self, event: AgentEvent) -> Table | None:
        """The block for ``event`` as a two-column grid (time, body) so wrapped and
        multi-line bodies stay indented; ``None`` when folded into a later block."""
        body = self.body(event)
        if body is None:
            return None
        grid = Table.grid(padding=(0, 1), expand=True)
        grid.add_column(width=8, no_wrap=True)
        grid.add_column(ratio=1)
        grid.add_row(Text(fmt.clock_time(event.at), style=self.tones.muted), body)
        return grid

    def body(self, event: AgentEvent) -> Text | None:
        """The block for ``event``, or ``None`` when it is folded into a later one."""
        t = self.tones
        kind = event.kind
        payload = event.payload
        if kind in HIDDEN:
            return None
        if kind == EventKind.COMMAND_OUTPUT:
            item = str(getattr(payload, "item_id", None) or "")
            chunk = event.message
            kept, cut = self._output.pop(item, ("", 0))
            kept += clean(chunk, multiline=True)
            if len(kept) > _OUTPUT_KEEP:
                end = kept[-_OUTPUT_KEEP:]
                newline = end.find("\n")
                if 0 <= newline < len(end) - 1:
                    end = end[newline + 1 :]  # start on a whole line
                cut += len(kept) - len(end)
                kept = end
            self._output[item] = (kept, cut)  # the newest item last
            while len(self._output) > _OUTPUT_ITEMS:
                del self._output[next(iter(self._output))]
            return None
        head = Text(end="")
        if kind == EventKind.MESSAGE:
            head.append("agent\n", style=t.primary + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind == EventKind.REASONING:
            head.append("thinking ", style=t.muted)
            head.append_text(inert(event.message, t.muted, multiline=True))
        elif kind == EventKind.COMMAND_STARTED:
            command = payload.command if isinstance(payload, CommandStarted) else ""
            head.append("$ ", style=t.accent + t.bold)
            head.append_text(inert(command or event.message, t.bold, limit=500))
        elif kind == EventKind.COMMAND_COMPLETED:
            ended = payload if isinstance(payload, CommandEnded) else CommandEnded()
            code = ended.exit_code
            ok = code == 0
            head.append("✓ " if ok else "✗ ", style=t.success if ok else t.error)
            head.append_text(inert(ended.command or event.message, limit=200))
            head.append(f"  exit {code if code is not None else '?'}",
                        style=t.success if ok else t.error)  # fmt: skip
            streamed, streamed_cut = self._output.pop(str(ended.item_id or ""), ("", 0))
            output, cut = (ended.output, 0) if ended.output else (streamed, streamed_cut)
            if output:
                head.append("\n")
                head.append_text(inert(tail(output, cut=cut), t.muted, multiline=True))
        elif kind == EventKind.FILE_CHANGE:
            self._file_change(head, event)
        elif kind == EventKind.PLAN:
            head.append("plan", style=t.primary + t.bold)
            steps = plan_steps(event)
            if not steps:
                head.append("\n")
                head.append_text(inert(event.message, multiline=True))
            else:
                lines = clean(event.message, multiline=True).split("\n")
                if len(lines) > len(steps) and lines[0].strip():  # codex's explanation
                    head.append(" ")
                    head.append_text(inert(lines[0], t.muted, limit=300))
                done, _ = plan_progress(steps)
                head.append(f"  {done}/{len(steps)} done", style=t.muted)
                for status, step in steps:
                    key = status.lower()
                    glyph = PLAN_GLYPHS.get(key, "○")
                    tone = t.success if key == "completed" else (t.bold if glyph == "▸" else "")
                    head.append(f"\n{glyph} ", style=tone)
                    head.append_text(inert(step, tone, limit=300))
        elif kind == EventKind.HOOK:
            hook = payload if isinstance(payload, HookResult) else None
            ok = hook.ok if hook is not None else None
            head.append("⚙ ", style=t.muted if ok is not False else t.error)
            # a hook result reads "<hook>: ok in N ms" (workspace notes carry no result)
            if hook is not None and not event.message.startswith("hook "):
                head.append("hook ", style=t.muted)
            head.append_text(inert(event.message, "" if ok is not False else t.error, limit=300))
            if hook is not None and not hook.ok and hook.output.strip():
                head.append("\n")
                head.append_text(inert(tail(hook.output), t.muted, multiline=True))
        elif kind in (EventKind.ERROR, EventKind.TURN_FAILED, EventKind.MALFORMED):
            head.append(f"{kind.value} ", style=t.error + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind == EventKind.WARNING:
            head.append("warning ", style=t.warning + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif isinstance(payload, NoteDelivered) and payload.steered:
            # the operator's own words, as a turn of the conversation (like "agent")
            head.append("operator", style=t.accent + t.bold)
            head.append(" → agent" + (" (with the next turn)" if payload.queued else ""),
                        style=t.muted)  # fmt: skip
            head.append("\n")
            said = event.message.removeprefix("sent to the agent: ")
            head.append_text(inert(said, multiline=True, limit=4000))
        elif isinstance(payload, NoteDelivered):
            head.append("→ to the agent ", style=t.accent + t.bold)
            head.append_text(inert(event.message.removeprefix("sent to the agent: "), limit=600))
        elif kind == EventKind.APPROVAL_REQUESTED:
            head.append("⚑ approval asked ", style=t.warning + t.bold)
            head.append_text(inert(event.message, limit=300))
        else:
            head.append(f"{kind.value} ", style=t.muted)
            head.append_text(inert(event.message, limit=300))
        return head

    def _file_change(self, head: Text, event: AgentEvent) -> None:
        """``± path (kind)`` per file; the diff once the change completed (codex sends the
        item at start too, with the same diff: shown once, at the end)."""
        t = self.tones
        change_event = event.payload if isinstance(event.payload, FileChange) else FileChange()
        status = change_event.status or ""
        # an edit named without its path is not shown as a file
        changes = [c for c in change_event.changes if c.path]
        names = change_event.paths
        if not any(c.diff is not None or c.kind for c in changes):
            head.append("± ", style=t.warning + t.bold)
            head.append_text(inert(", ".join(names) if names else event.message, limit=300))
            return
        final = status.lower() not in ("inprogress", "in_progress", "started")
        for i, change in enumerate(changes):
            if i:
                head.append("\n")
            head.append("± ", style=t.warning + t.bold)
            head.append_text(inert(change.path or "?", t.bold, limit=300))
            state = change.kind or ""
            if status and status.lower() != "completed":
                state = f"{state} · {status}" if state else status
            if state:
                head.append(f"  {one_line(state, 40)}", style=t.muted)
            diff = change.diff
            if final and diff and diff.strip():
                head.append("\n")
                head.append_text(diff_text(diff, t))


def describe_ids(values: dict[str, str | None]) -> Text:
    """``name value`` pairs on one line, values inert, unknowns shown as ``-``."""
    text = Text(end="")
    for i, (name, value) in enumerate(values.items()):
        if i:
            text.append("  ")
        text.append(f"{name} ", style="dim")
        text.append(one_line(value or "-", 80))
    return text
