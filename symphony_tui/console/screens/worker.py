"""Worker detail: one issue's ids, workspace, tokens and live transcript."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import RichLog, Static

from symphony_tui.console import fmt
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.selection import oldest_approval
from symphony_tui.console.tones import Tones
from symphony_tui.console.transcript import Transcript
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.domain import ApprovalRequest, Snapshot

if TYPE_CHECKING:
    from symphony_tui.console.app import SymphonyApp

TRANSCRIPT_LINES = 5000
BATCH = 2000


def worker_header(snapshot: Snapshot, issue_id: str, now: datetime, tones: Tones) -> Text:
    """Ids, status, workspace, tokens and pending approvals of ``issue_id``."""
    row = next((r for r in snapshot.running if r.issue_id == issue_id), None)
    issue = next((i for i in snapshot.issues if i.issue_id == issue_id), None)
    text = Text(end="")
    ident = row.issue_identifier if row else (issue.identifier if issue else issue_id)
    text.append(one_line(ident, 20), style=tones.bold)
    if issue is not None:
        text.append("  ")
        text.append_text(inert(issue.title, limit=70))
    text.append("\n")
    if row is None:
        text.append("not running", style=tones.muted)
        if issue is not None:
            text.append(f"  state {one_line(issue.state, 20)}")
        return text
    text.append_text(fmt.labelled(fmt.STATUS_LABELS[row.status], tones))
    text.append(
        f"  turn {row.turn_count}  attempt {row.attempt if row.attempt is not None else '-'}"
        f"  age {fmt.age(row.started_at, now)}  state {one_line(row.state, 20)}"
        f"  backend {one_line(row.backend or '-', 12)}\n"
    )
    pairs = [
        ("issue", row.issue_id),
        ("session", row.session_id),
        ("thread", row.thread_id),
    ]
    for i, (name, value) in enumerate(pairs):
        if i:
            text.append("  ")
        text.append(f"{name} ", style=tones.muted)
        text.append(one_line(value or "-", 60))
    text.append("\n")
    text.append("workspace ", style=tones.muted)
    text.append(one_line(row.workspace_path or "-", 100))
    text.append("\n")
    tok = row.tokens
    text.append("tokens ", style=tones.muted)
    text.append(
        f"in {fmt.grouped(tok.input_tokens)} (cached {fmt.grouped(tok.cached_input_tokens)})"
        f"  out {fmt.grouped(tok.output_tokens)} (reasoning {fmt.grouped(tok.reasoning_tokens)})"
        f"  total {fmt.grouped(tok.total_tokens)}"
    )
    if tok.cost_usd is not None:
        text.append(f"  ${tok.cost_usd:.2f}")
    pending = [a for a in snapshot.approvals if a.issue_id == issue_id]
    if pending:
        text.append("\n")
        text.append(f"⚑ {len(pending)} approval(s) pending: ", style=tones.warning + tones.bold)
        text.append_text(inert(pending[0].summary or pending[0].command or "", limit=80))
        text.append("  a approve · d deny · v all", style=tones.muted)
    return text


class WorkerScreen(Screen[None]):
    CONSOLE_SCOPE = "worker"
    BINDINGS = bindings_for("worker")

    def __init__(self, issue_id: str) -> None:
        super().__init__(classes="worker-screen")
        self.issue_id = issue_id
        self.last_seq = 0
        self._snapshot: Snapshot | None = None
        self._transcript: Transcript | None = None

    @property
    def console(self) -> SymphonyApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        header = Static(id="worker-header", classes="pane")
        header.border_title = "Worker"
        yield header
        transcript = RichLog(
            max_lines=TRANSCRIPT_LINES,
            markup=False,
            highlight=False,
            wrap=True,
            min_width=20,
            id="transcript",
            classes="pane",
        )
        transcript.border_title = "Transcript"
        yield transcript
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#transcript").focus()

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        self._snapshot = snapshot
        self.query_one("#worker-header", Static).update(
            worker_header(snapshot, self.issue_id, now, tones)
        )
        self.pull(tones)

    def pull(self, tones: Tones) -> None:
        """Append this issue's new events to the transcript."""
        if self._transcript is None or self._transcript.tones != tones:
            self._transcript = Transcript(tones)
        events = self.console.port.events_since(self.last_seq, limit=BATCH, issue_id=self.issue_id)
        if events:
            self.last_seq = max(self.last_seq, events[-1].seq)
            log = self.query_one("#transcript", RichLog)
            for event in events:
                block = self._transcript.block(event)
                if block is not None:
                    log.write(block, scroll_end=None)

    def selected_issue_id(self) -> str | None:
        return self.issue_id

    def selected_approval(self) -> ApprovalRequest | None:
        if self._snapshot is None:
            return None
        return oldest_approval(self._snapshot, self.issue_id)
