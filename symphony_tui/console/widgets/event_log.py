"""Pane 3: the live event log.

Bounded (``max_lines``); the full history lives in the core's ring buffer and JSONL file
(STYLE.md practice 5). The log pulls ``events_since(last_seq)`` at the screen's refresh
rate, so a flood of agent events costs one write batch per tick, not one per event.

Filter: words typed after ``/``. A word equal to a known issue identifier narrows the
query in the core (``events_since(..., issue_id=)``); the other words must all occur in
the line (case-insensitive).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import RichLog

from symphony_tui.console import fmt
from symphony_tui.console.tones import Tones
from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.scheduler.port import SchedulerPort

MAX_LINES = 1000
BATCH = 2000


@dataclass(frozen=True)
class LogFilter:
    """``issue_id`` narrows in the core; ``words`` (lowercase) match locally."""

    text: str = ""
    issue_id: str | None = None
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, snapshot: Snapshot) -> LogFilter:
        by_ident = {i.identifier.lower(): i.issue_id for i in snapshot.issues}
        by_ident.update({r.issue_identifier.lower(): r.issue_id for r in snapshot.running})
        issue_id = None
        words: list[str] = []
        for word in text.lower().split():
            if issue_id is None and word in by_ident:
                issue_id = by_ident[word]
            else:
                words.append(word)
        return cls(text=text.strip(), issue_id=issue_id, words=tuple(words))

    def accepts(self, event: AgentEvent) -> bool:
        if self.issue_id is not None and event.issue_id != self.issue_id:
            return False
        return fmt.event_matches(event, self.words)


class EventLog(RichLog):
    """The log widget. Call :meth:`pull` from the refresh tick while visible."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=MAX_LINES, markup=False, highlight=False, wrap=False, **kwargs)
        self.last_seq = 0
        self.filter = LogFilter()

    def pull(self, port: SchedulerPort, tones: Tones) -> int:
        """Append events newer than ``last_seq``; returns how many lines were written."""
        events = port.events_since(self.last_seq, limit=BATCH, issue_id=self.filter.issue_id)
        if not events:
            return 0
        self.last_seq = max(self.last_seq, events[-1].seq)
        lines = [fmt.event_line(e, tones) for e in events if self.filter.accepts(e)]
        # Only the tail can survive max_lines; skip rendering the rest of a flood.
        for line in lines[-MAX_LINES:]:
            self.write(line, scroll_end=None)
        return len(lines)

    def set_filter(self, log_filter: LogFilter, port: SchedulerPort, tones: Tones) -> int:
        """Replace the filter and re-read what the core still holds under it."""
        self.filter = log_filter
        self.clear()
        self.last_seq = 0
        return self.pull(port, tones)
