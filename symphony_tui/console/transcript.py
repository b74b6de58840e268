"""Turn a worker's events into transcript blocks (pure; no Textual).

Source: the backend event conventions in ``symphony_tui/agents/base.py`` and the kinds in
``symphony_tui.domain.events``. Streaming deltas (``message_delta``, ``command_output``)
are not shown line by line: the completed item carries the text, and command output is
kept per item so a completed command can show its tail.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import clean, inert, one_line
from symphony_tui.console.tones import Tones
from symphony_tui.domain import AgentEvent, EventKind

OUTPUT_TAIL_LINES = 8
_OUTPUT_KEEP = 64 * 1024  # chars of streamed output kept per command item

HIDDEN = frozenset({EventKind.MESSAGE_DELTA, EventKind.TOKEN_USAGE, EventKind.RATE_LIMITS})


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    body = clean(text, multiline=True).rstrip("\n")
    parts = body.split("\n")
    cut = parts[-lines:]
    if len(parts) > lines:
        cut.insert(0, f"… {len(parts) - lines} more lines")
    return "\n".join(cut)


class Transcript:
    """Stateful formatter: feed events in ``seq`` order, get ``Text`` blocks back."""

    def __init__(self, tones: Tones) -> None:
        self.tones = tones
        self._output: dict[str, str] = {}

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
        data = event.data or {}
        if kind in HIDDEN:
            return None
        if kind == EventKind.COMMAND_OUTPUT:
            item = str(data.get("item_id", ""))
            chunk = data.get("delta") or event.message
            kept = self._output.get(item, "") + clean(chunk, multiline=True)
            self._output[item] = kept[-_OUTPUT_KEEP:]
            return None
        head = Text(end="")
        if kind == EventKind.MESSAGE:
            head.append("agent\n", style=t.primary + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind == EventKind.REASONING:
            head.append("thinking ", style=t.muted)
            head.append_text(inert(event.message, t.muted, multiline=True))
        elif kind == EventKind.COMMAND_STARTED:
            head.append("$ ", style=t.accent + t.bold)
            head.append_text(inert(data.get("command") or event.message, t.bold, limit=500))
        elif kind == EventKind.COMMAND_COMPLETED:
            code = data.get("exit_code")
            ok = code == 0
            head.append("✓ " if ok else "✗ ", style=t.success if ok else t.error)
            head.append_text(inert(data.get("command") or event.message, limit=200))
            head.append(f"  exit {code if code is not None else '?'}",
                        style=t.success if ok else t.error)  # fmt: skip
            item = str(data.get("item_id", ""))
            output = data.get("output") or data.get("aggregated_output")
            streamed = self._output.pop(item, "")
            output = output if isinstance(output, str) and output else streamed
            if output:
                head.append("\n")
                head.append_text(inert(tail(output), t.muted, multiline=True))
        elif kind == EventKind.FILE_CHANGE:
            head.append("± ", style=t.warning + t.bold)
            files = data.get("files") or data.get("paths") or []
            changes = data.get("changes") or []
            names = [str(f) for f in files] + [
                str(c.get("path")) for c in changes if isinstance(c, dict) and c.get("path")
            ]
            head.append_text(inert(", ".join(names) if names else event.message, limit=300))
        elif kind == EventKind.PLAN:
            head.append("plan\n", style=t.primary + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind in (EventKind.ERROR, EventKind.TURN_FAILED, EventKind.MALFORMED):
            head.append(f"{kind.value} ", style=t.error + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind == EventKind.WARNING:
            head.append("warning ", style=t.warning + t.bold)
            head.append_text(inert(event.message, multiline=True))
        elif kind == EventKind.APPROVAL_REQUESTED:
            head.append("⚑ approval asked ", style=t.warning + t.bold)
            head.append_text(inert(event.message, limit=300))
        else:
            head.append(f"{kind.value} ", style=t.muted)
            head.append_text(inert(event.message, limit=300))
        return head


def describe_ids(values: dict[str, str | None]) -> Text:
    """``name value`` pairs on one line, values inert, unknowns shown as ``-``."""
    text = Text(end="")
    for i, (name, value) in enumerate(values.items()):
        if i:
            text.append("  ")
        text.append(f"{name} ", style="dim")
        text.append(one_line(value or "-", 80))
    return text
