"""Worker detail: one issue's ids, workspace, tokens, hooks, plan and live transcript,
with the worker's own keys (interrupt, stop, rerun, follow)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import RichLog, Static

from symphony_tui.console import fmt
from symphony_tui.console.messages import ConsoleApp, SendCommand, console_app
from symphony_tui.console.registry import bindings_for
from symphony_tui.console.sanitize import inert, one_line
from symphony_tui.console.selection import oldest_approval
from symphony_tui.console.transcript import Transcript, plan_progress, plan_steps
from symphony_tui.console.widgets.footer import ConsoleFooter
from symphony_tui.console.widgets.tokens import not_reported, unpriced, usd
from symphony_tui.console.widgets.workers import last_activity
from symphony_tui.domain import ApprovalRequest, EventKind, Rerun, Snapshot
from symphony_tui.domain.kinds import WAITING_FOR_MEMORY
from symphony_tui.domain.payloads import HookResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import AgentEvent, RunningRow

TRANSCRIPT_LINES = 5000
#: Characters of event text one pull writes at most: past that, only the newest events
#: are written, after a line saying how many were left out (rendering a flood's
#: 12,000-character messages by the thousand freezes the console for seconds).
#: The export (``e``) still writes every event the scheduler kept.
WRITE_CHARS = 200_000
LAST_ACTIVITY_CELLS = 160  # two lines of the header at 80 columns
BATCH = 2000


def _newest_within(events: Sequence[AgentEvent], chars: int) -> int:
    """The index of the first of ``events`` to write so that the newest ones written hold
    at most ``chars`` characters of message text (always at least the newest one)."""
    total = 0
    for index in range(len(events) - 1, -1, -1):
        total += len(events[index].message)
        if total > chars:
            return min(index + 1, len(events) - 1)
    return 0


def _hooks(text: Text, hooks: dict[str, str], tones: Tones) -> None:
    """``hooks ✓ after_create · ✗ before_run exit 3``: results only for failures."""
    text.append("hooks ", style=tones.muted)
    for i, (name, state) in enumerate(hooks.items()):
        if i:
            text.append(" · ", style=tones.muted)
        ok = state == "ok" or state.startswith("ok ")
        text.append(f"{'✓' if ok else '✗'} {one_line(name, 20)}", style="" if ok else tones.error)
        if not ok:
            text.append(f" {one_line(state, 40)}", style=tones.error)


def _plan(text: Text, steps: list[tuple[str, str]], tones: Tones) -> None:
    done, current = plan_progress(steps)
    text.append("plan ", style=tones.muted)
    text.append(f"{done}/{len(steps)}")
    if current:
        text.append(" ▸ ", style=tones.bold)
        text.append_text(inert(current, limit=60))


def _hooks_and_plan(
    text: Text, hooks: dict[str, str], plan: list[tuple[str, str]] | None, tones: Tones
) -> None:
    if not hooks and not plan:
        return
    text.append("\n")
    if hooks:
        _hooks(text, hooks, tones)
    if plan:
        if hooks:
            text.append("   ")
        _plan(text, plan, tones)


ID_WIDTH = 76  # the header's content at 80 columns


def _id_pairs(
    issue_id: str, session_id: str | None, thread_id: str | None
) -> list[tuple[str, str]]:
    """(name, value) of the run's ids. A session id that is the thread id and a turn id
    joined by ``-`` (codex, spec §4.2) is shown as its two parts: the thread and the turn."""
    pairs = [("issue", issue_id)]
    if thread_id and session_id and session_id.startswith(f"{thread_id}-"):
        return [*pairs, ("thread", thread_id), ("turn id", session_id[len(thread_id) + 1 :])]
    pairs.append(("session", session_id or "-"))
    if thread_id != session_id:
        pairs.append(("thread", thread_id or "-"))
    return pairs


def _name_values(text: Text, pairs: list[tuple[str, str]], width: int, tones: Tones) -> None:
    """``name value`` pairs, as many to a line as fit ``width`` cells (two spaces apart);
    a value longer than a whole line is cut with ``…`` (``o`` copies it whole)."""
    width = width if width > 0 else ID_WIDTH
    used = 0
    for name, value in pairs:
        value = one_line(value, max(width - len(name) - 1, 8))
        cells = len(name) + 1 + cell_len(value)
        if used and used + 2 + cells > width:
            text.append("\n")
            used = 0
        elif used:
            text.append("  ")
            used += 2
        text.append(f"{name} ", style=tones.muted)
        text.append(value)
        used += cells
    text.append("\n")


def worker_header(
    snapshot: Snapshot,
    issue_id: str,
    now: datetime,
    tones: Tones,
    *,
    hooks: dict[str, str] | None = None,
    plan: list[tuple[str, str]] | None = None,
    width: int = 0,
) -> Text:
    """``width`` (cells of the header's content; 0: not known yet, 76 is assumed) lays
    out the ids: each name with its whole value on one line, never broken in a word.

    Ids, status, workspace, tokens, last activity (as the worker row defines it, with
    more room), hook results, plan progress and pending approvals of ``issue_id``.
    ``hooks`` (name -> result) and ``plan`` come from this issue's events; when it is not
    running, the last run's manifest (a recovered workspace) speaks instead."""
    row = next((r for r in snapshot.running if r.issue_id == issue_id), None)
    issue = next((i for i in snapshot.issues if i.issue_id == issue_id), None)
    recovered = next((w for w in snapshot.recovered if w.issue_id == issue_id), None)
    text = Text(end="")
    ident = row.issue_identifier if row else (issue.identifier if issue else issue_id)
    if row is None and issue is None and recovered is not None:
        ident = recovered.issue_identifier or recovered.key
    project = row.project if row is not None else (issue.project if issue else None)
    if project is not None:  # a fleet console's: identifiers repeat across projects
        text.append(f"{one_line(project, 30)} · ", style=tones.muted)
    text.append(one_line(ident, 20), style=tones.bold)
    title = issue.title if issue is not None else (recovered.issue_title if recovered else None)
    if title:
        text.append("  ")
        text.append_text(inert(title, limit=70))
    text.append("\n")
    pull = snapshot.pull_requests.get(ident)
    if pull is not None:  # its pull request (GitHub): state, checks, review, mergeable
        text.append("pull request ", style=tones.muted)
        trouble = pull.failed_checks or pull.mergeable == "CONFLICTING"
        text.append(one_line(pull.summary(), 110), style=tones.warning if trouble else "")
        text.append("\n")
    hooks = dict(hooks or {})
    if row is None:
        text.append("■ not running", style=tones.muted)
        if issue is not None:
            text.append(f"  state {one_line(issue.state, 20)}")
            if issue.note.startswith(WAITING_FOR_MEMORY):  # why it does not start
                text.append("\n")
                text.append(one_line(issue.note, 160), style=tones.warning)
        retry = next((r for r in snapshot.retrying if r.issue_id == issue_id), None)
        if retry is not None:
            text.append(
                f"  ↻ retry {retry.attempt} in {fmt.until(retry.due_at, now)}",
                style=tones.warning,
            )
        if recovered is not None:
            w = recovered
            text.append("\n")
            last_run = [
                ("last run", one_line(w.status or "-", 20)),
                ("attempt", "-" if w.attempt is None else str(w.attempt)),
                ("ended", f"{fmt.age(w.ended_at, now)} ago"),
                ("backend", one_line(w.backend or "-", 12)),
                ("thread", w.thread_id or w.conversation_id or "-"),
            ]
            _name_values(text, last_run, width, tones)
            text.append("workspace ", style=tones.muted)
            text.append(one_line(w.path, 100))
            tokens = fmt.grouped(w.tokens.total_tokens) if w.usage_reported else "not reported"
            text.append(f"  tokens {tokens}", style=tones.muted)
            if w.error:
                text.append("\n")
                text.append("error ", style=tones.muted)
                text.append(one_line(w.error, 160), style=tones.error)
            hooks = {**w.hooks, **hooks}
        _hooks_and_plan(text, hooks, None, tones)
        return text
    text.append_text(fmt.labelled(fmt.STATUS_LABELS[row.status], tones))
    text.append(
        f"  turn {row.turn_count}  attempt {row.attempt if row.attempt is not None else '-'}"
        f"  age {fmt.age(row.started_at, now)}  state {one_line(row.state, 20)}"
        f"  backend {one_line(row.backend or '-', 12)}\n"
    )
    # the most urgent line right under the status: a short terminal cuts the bottom
    pending = [a for a in snapshot.approvals if a.issue_id == issue_id]
    if pending:
        text.append(f"⚑ {len(pending)} approval(s) pending: ", style=tones.warning + tones.bold)
        text.append_text(inert(pending[0].summary or pending[0].command or "", limit=60))
        text.append("  a approve · d deny · v all\n", style=tones.muted)
    # how the agent is reached (local, ssh) and whether that link holds now
    link = f"{row.link_mode} {row.link_state}"
    if row.link_state == "reconnecting":
        link += f" for {fmt.age(row.link_since, now)}"
    pairs = [*_id_pairs(row.issue_id, row.session_id, row.thread_id), ("link", link)]
    _name_values(text, pairs, width, tones)
    text.append("workspace ", style=tones.muted)
    if row.host:  # on a worker host: host:path, as scp writes it
        text.append(one_line(row.host, 40) + ":", style=tones.accent)
    text.append(one_line(row.workspace_path or "-", 100))
    text.append("\n")
    tok = row.tokens
    text.append("tokens ", style=tones.muted)
    if not row.usage_reported:
        text.append("none reported yet", style=tones.muted)
        text.append("  (a token budget cannot trip on this run until they are)", style=tones.muted)
    else:
        text.append(
            f"in {fmt.grouped(tok.input_tokens)} (cached {fmt.grouped(tok.cached_input_tokens)})"
            f"  out {fmt.grouped(tok.output_tokens)}"
            f" (reasoning {fmt.grouped(tok.reasoning_tokens)})"
            f"  total {fmt.grouped(tok.total_tokens)}"
        )
    # what the run cost, priced by its model (config/pricing.py), or why it is unknown
    if row.usage_reported and (row.spend_usd is not None or row.spend == "unknown model"):
        text.append("\nspend ", style=tones.muted)
        if row.spend_usd is not None:
            text.append(f"{usd(row.spend_usd)}  (this turn {usd(row.turn_spend_usd or 0.0)})")
        else:
            text.append("unknown: no price for this model", style=tones.warning)
        if row.model:
            text.append(f"  model {one_line(row.model, 40)}", style=tones.muted)
    # The issue's total when earlier runs add to it (it includes this run's tokens).
    if row.issue_runs_not_reported or row.issue_total_tokens > tok.total_tokens:
        text.append("\nissue total ", style=tones.muted)
        text.append(f"{fmt.grouped(row.issue_total_tokens)} tokens")
        if row.issue_spend_usd is not None:
            text.append(f", {usd(row.issue_spend_usd)}")
        if row.issue_runs_not_reported:
            text.append(f" {not_reported(row.issue_runs_not_reported)}", style=tones.warning)
        if row.issue_runs_unpriced:
            text.append(f" {unpriced(row.issue_runs_unpriced)}", style=tones.warning)
    _resources(text, snapshot, row, tones)
    if row.posture is not None:  # what the run can reach (docs/security.md)
        rows = dict(row.posture.lines())
        for labels in (("sandbox", "network", "transport"), ("secrets withheld", "control API")):
            text.append("\n")
            for i, label in enumerate(labels):
                text.append(("  " if i else "") + f"{label} ", style=tones.muted)
                text.append(one_line(rows[label], 90))
    if row.error:  # the attempt failed; its worker is finishing (after_run)
        text.append("\n")
        text.append("failed ", style=tones.error + tones.bold)
        text.append_text(inert(row.error, limit=LAST_ACTIVITY_CELLS))
    if row.last_event or row.last_message:
        # the row's last activity (domain.activity), with room for more of its newest text
        text.append("\n")
        text.append("last ", style=tones.muted)
        if row.last_event_at is not None:
            text.append(f"{fmt.age(row.last_event_at, now)} ago  ", style=tones.muted)
        text.append_text(last_activity(row, tones, LAST_ACTIVITY_CELLS))
    _hooks_and_plan(text, hooks, plan, tones)
    return text


def _resources(text: Text, snapshot: Snapshot, row: RunningRow, tones: Tones) -> None:
    """``memory 1.1G  cpu 12%  this machine 3.2G free of 16G``: the agent's processes at
    the last resource sample and the free memory where it runs (and why that machine
    takes no new run, when it is short)."""
    machine = next((m for m in snapshot.memory if m.host == row.host), None)
    if row.rss_bytes is None and machine is None:
        return
    text.append("\nmemory ", style=tones.muted)
    text.append(fmt.memory(row.rss_bytes))
    text.append("  cpu ", style=tones.muted)
    text.append("-" if row.cpu_percent is None else f"{row.cpu_percent:.0f}%")
    if machine is not None:
        where = "this machine" if machine.host is None else one_line(machine.host, 30)
        text.append(f"  {where} ", style=tones.muted)
        text.append(f"{fmt.memory(machine.available_bytes)} free")
        if machine.total_bytes is not None:
            text.append(f" of {fmt.memory(machine.total_bytes)}", style=tones.muted)
        if machine.short is not None:
            text.append("\nno new run here: ", style=tones.warning)
            text.append(one_line(machine.short, 120), style=tones.warning)


class TranscriptLog(RichLog):
    """The transcript: follows the newest block also when its height changes (the header
    above grows with a plan, hooks or an approval), not only when a block is written."""

    def on_resize(self, event: Resize) -> None:
        super().on_resize(event)
        if self.auto_scroll:
            self.call_after_refresh(self._follow)

    def _follow(self) -> None:
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)


class WorkerScreen(Screen[None]):
    CONSOLE_SCOPE = "worker"
    BINDINGS = bindings_for("worker")

    def __init__(self, issue_id: str) -> None:
        super().__init__(classes="worker-screen")
        self.issue_id = issue_id
        self.last_seq = 0
        self._snapshot: Snapshot | None = None
        self._transcript: Transcript | None = None
        self._now: datetime | None = None
        self.hooks: dict[str, str] = {}  # hook name -> result, from HOOK events
        self.plan: list[tuple[str, str]] = []  # the latest plan's (status, step)

    @property
    def console(self) -> ConsoleApp:
        return console_app(self)

    def compose(self) -> ComposeResult:
        header = Static(id="worker-header", classes="pane")
        header.border_title = "Worker"
        yield header
        transcript = TranscriptLog(
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
        self._now = now
        self.pull(tones, header=False)
        self._show_header(tones)

    def _show_header(self, tones: Tones) -> None:
        if self._snapshot is None:
            return
        header = self.query_one("#worker-header", Static)
        header.update(
            worker_header(
                self._snapshot,
                self.issue_id,
                self._now or self._snapshot.generated_at,
                tones,
                hooks=self.hooks,
                plan=self.plan,
                width=header.content_region.width,
            )
        )

    def pull(self, tones: Tones, *, header: bool = True) -> None:
        """Append this issue's new events to the transcript; note hook results and the
        latest plan for the header."""
        if self._transcript is None or self._transcript.tones != tones:
            self._transcript = Transcript(tones)
        events = self.console.port.events_since(self.last_seq, limit=BATCH, issue_id=self.issue_id)
        if not events:
            return
        log = self.query_one("#transcript", RichLog)
        if self.last_seq == 0:  # the first batch: say when older entries were dropped
            self._note_gap(log, tones)
        self.last_seq = max(self.last_seq, events[-1].seq)
        first_written = _newest_within(events, WRITE_CHARS)
        if first_written:
            line = Text(end="")
            line.append(
                f"{first_written:,} earlier events not shown here (over "
                f"{WRITE_CHARS:,} characters at once); e exports the whole transcript",
                style=tones.warning,
            )
            log.write(line, scroll_end=None)
        noted = False
        for index, event in enumerate(events):
            hook = event.payload
            if isinstance(hook, HookResult):
                # "hook before_run: exit 3 in 12 ms" -> "exit 3 in 12 ms"
                _, _, state = event.message.partition(": ")
                if not state:
                    state = "ok" if hook.ok else f"exit {hook.exit_code}"
                self.hooks[hook.hook] = one_line(state, 60)
                noted = True
            elif event.kind == EventKind.PLAN and (steps := plan_steps(event)):
                self.plan = steps
                noted = True
            if index < first_written:
                continue
            block = self._transcript.block(event)
            if block is not None:
                log.write(block, scroll_end=None)
        if noted and header:
            self._show_header(tones)
        if log.auto_scroll:
            # the header above may grow with this batch and shrink the transcript after
            # its writes scrolled: scroll again once the layout has settled
            self.call_after_refresh(self._scroll_transcript_end)

    def _note_gap(self, log: RichLog, tones: Tones) -> None:
        """A first line saying the transcript starts after entries the scheduler dropped
        under its memory budget (``SchedulerPort.transcript_gap``), and where they are."""
        gap = self.console.port.transcript_gap(self.issue_id)
        if gap.events <= 0:
            return
        where = (
            f"the full history is in the event file {gap.event_file}"
            if gap.event_file
            else "no event file keeps them"
        )
        line = Text(end="")
        line.append(
            f"{gap.events:,} earlier events of this issue were dropped (memory budget); ",
            style=tones.warning,
        )
        line.append_text(inert(where, tones.muted, limit=600))
        log.write(line, scroll_end=None)

    def _scroll_transcript_end(self) -> None:
        log = self.query_one("#transcript", RichLog)
        if log.auto_scroll:
            log.scroll_end(animate=False, immediate=True, x_axis=False)

    # -- keys ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if getattr(self.app, "stopping", False):
            return False  # the console is quitting: its screens are going
        if action == "rerun_worker":
            s = self._snapshot
            if s is None or any(r.issue_id == self.issue_id for r in s.running):
                return False  # running: interrupt / stop apply instead
            if any(r.issue_id == self.issue_id for r in s.retrying):
                return True  # a rerun clears the backoff
            row = next((i for i in s.issues if i.issue_id == self.issue_id), None)
            if row is None:
                return False  # unknown to the tracker now: nothing to dispatch
            # done or blocked issues are not eligible (spec §8.2): the key is hidden
            claim = fmt.claim_key(row, frozenset(s.completed))
            return claim not in ("done", "blocked")
        return True

    def action_rerun_worker(self) -> None:
        if self.check_action("rerun_worker", ()):
            self.post_message(SendCommand(Rerun(issue_id=self.issue_id)))

    def action_follow_transcript(self) -> None:
        log = self.query_one("#transcript", RichLog)
        log.auto_scroll = not log.auto_scroll
        if log.auto_scroll:
            log.scroll_end(animate=False)
        log.border_title = "Transcript" if log.auto_scroll else "Transcript · follow off"

    def selected_issue_id(self) -> str | None:
        return self.issue_id

    def selected_approval(self) -> ApprovalRequest | None:
        if self._snapshot is None:
            return None
        return oldest_approval(self._snapshot, self.issue_id)
