"""Pane 4: token usage, rate, rate limits and cost."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Sparkline, Static

from symphony_tui.console import fmt
from symphony_tui.console.fleet import fit_name, project_names
from symphony_tui.console.repaint import update_static
from symphony_tui.console.sanitize import one_line

if TYPE_CHECKING:
    from symphony_tui.console.tones import Tones
    from symphony_tui.domain import RateLimits, RateLimitWindow, Snapshot, TokenUsage


def _pair(text: Text, label: str, value: str, tones: Tones, width: int = 10) -> None:
    text.append(f"{label:<{width}}", style=tones.muted)
    text.append(value)


def not_reported(runs: int) -> str:
    """``"(2 runs not reported)"``: how many runs had no usage report, or ``""``."""
    if not runs:
        return ""
    return f"({runs:,} run{'' if runs == 1 else 's'} not reported)"


def usd(amount: float) -> str:
    """``$1.23``; ``$0.0042`` below a cent, so a small spend never reads ``$0.00``."""
    return f"${amount:.4f}" if 0 < amount < 0.01 else f"${amount:,.2f}"


def unpriced(runs: int) -> str:
    """``"(2 runs of an unknown model)"``: runs whose tokens had no price, or ``""``."""
    if not runs:
        return ""
    return f"({runs:,} run{'' if runs == 1 else 's'} of an unknown model)"


def totals_text(snapshot: Snapshot, tones: Tones) -> Text:
    """Totals, rate and runtime (spec §13.5): one labelled value a line. Finished runs
    whose backend reported no usage are counted beside the total (a live run without a
    report yet is not: it may still report); while runs ran and nothing was measured the
    counts read ``-``, not zeros."""
    t: TokenUsage = snapshot.totals
    text = Text(end="")
    unreported = snapshot.runs_not_reported
    waiting = any(not r.usage_reported for r in snapshot.running)
    measured = not t.is_zero or not (unreported or waiting)

    def count(value: int) -> str:
        return fmt.grouped(value) if measured else "-"

    rows = [
        ("input", count(t.input_tokens)),
        ("cached", count(t.cached_input_tokens)),
        ("output", count(t.output_tokens)),
        ("reasoning", count(t.reasoning_tokens)),
        ("total", count(t.total_tokens)),
    ]
    for label, value in rows:
        _pair(text, label, value, tones)
        if label == "total" and unreported:
            text.append(f" {not_reported(unreported)}", style=tones.warning)
        text.append("\n")
    _pair(text, "rate", f"{fmt.compact(snapshot.token_rate_per_min)}/min", tones)
    text.append("\n")
    _pair(text, "runtime", fmt.duration(snapshot.seconds_running), tones)
    live_unknown = sum(1 for r in snapshot.running if r.spend == "unknown model")
    if t.cost_usd is not None or snapshot.runs_unpriced or live_unknown:
        text.append("\n")
        _pair(text, "spend", "-" if t.cost_usd is None else usd(t.cost_usd), tones)
        if snapshot.runs_unpriced:
            text.append(f" {unpriced(snapshot.runs_unpriced)}", style=tones.warning)
    return text


def _window(
    text: Text, name: str, w: RateLimitWindow, now: datetime, tones: Tones, width: int
) -> None:
    used = "-" if w.used_percent is None else f"{w.used_percent:.0f}%"
    tone = tones.muted
    if w.used_percent is not None:
        tone = (
            tones.error
            if w.used_percent >= 90
            else (tones.warning if w.used_percent >= 70 else tones.success)
        )
    span = "" if w.window_minutes is None else f" /{fmt.duration(w.window_minutes * 60)}"
    text.append(f"{name:<{width}}", style=tones.muted)
    text.append(used, style=tone)
    text.append(span)
    if w.resets_at is not None:
        text.append(f" resets {fmt.until(w.resets_at, now)}", style=tones.muted)


def limits_text(
    limits: RateLimits | None, now: datetime, tones: Tones, label_width: int = 10
) -> Text:
    """Rate-limit windows (used %, window length, time to reset) and credits: the limit's
    name, then a labelled value a line, the labels ``label_width`` cells wide (those of
    the lines it is shown among)."""
    text = Text(end="")
    if limits is None:
        text.append("rate limits: none reported", style=tones.muted)
        return text
    title = one_line(limits.limit_name or limits.limit_id or limits.source or "limits", 30)
    text.append(f"{title}\n", style=tones.bold)
    parts = [("primary", limits.primary), ("secondary", limits.secondary)]
    shown = [(n, w) for n, w in parts if w is not None]
    for i, (name, w) in enumerate(shown):
        _window(text, name, w, now, tones, label_width)
        if i < len(shown) - 1:
            text.append("\n")
    if limits.credits_balance is not None:
        text.append("\n")
        _pair(text, "credits", one_line(limits.credits_balance, 20), tones, label_width)
    if not shown and limits.credits_balance is None:
        text.append("no windows", style=tones.muted)
    return text


PER_WORKER_ROWS = 12


def per_worker_text(
    snapshot: Snapshot, tones: Tones, limit: int = PER_WORKER_ROWS, width: int | None = None
) -> Text:
    """Tokens per running issue, biggest first, at most ``limit`` lines plus a count; a
    run whose backend has reported no usage yet reads ``none yet``, last. In a fleet
    console each line starts with the run's project. One run a line, never wrapped: a
    line longer than ``width`` cells leaves out its input and output split (or ``none
    yet``), then is cut."""
    text = Text(end="", no_wrap=True, overflow="ellipsis")
    if not snapshot.running:
        text.append("no active workers", style=tones.muted)
        return text
    ranked = sorted(
        snapshot.running,
        key=lambda r: r.tokens.total_tokens if r.usage_reported else -1,
        reverse=True,
    )
    shown = ranked[:limit]
    for i, r in enumerate(shown):
        line = Text(end="")
        if r.project is not None:  # a fleet console's: identifiers repeat across projects
            line.append(f"{one_line(r.project, 6):<6} ", style=tones.muted)
        line.append(f"{one_line(r.issue_identifier, 10):<10}", style=tones.bold)
        spend = Text(end="")
        if not r.usage_reported:
            line.append(f"{'-':>7}", style=tones.muted)
            split = Text(" none yet", style=tones.muted, end="")
        else:
            line.append(f"{fmt.compact(r.tokens.total_tokens):>7}")
            split = Text(
                f" in {fmt.compact(r.tokens.input_tokens)} out "
                f"{fmt.compact(r.tokens.output_tokens)}",
                end="",
            )
            if r.spend_usd is not None:
                spend.append(f" {usd(r.spend_usd)}")
            elif r.spend == "unknown model":
                spend.append(" $?", style=tones.warning)
        if width is None or line.cell_len + split.cell_len + spend.cell_len <= width:
            line.append_text(split)
        line.append_text(spend)
        text.append_text(line)
        if i < len(shown) - 1:
            text.append("\n")
    if len(ranked) > limit:
        text.append(f"\n… {len(ranked) - limit} more", style=tones.muted)
    return text


def projects_text(snapshot: Snapshot, tones: Tones, width: int | None = None) -> Text:
    """A fleet console's totals per project, then all of them: total tokens (``-`` for a
    project never heard from: unknown, not 0, and nothing else of it), the primary rate-limit window's use, cost
    where known; one project a line, never wrapped: within ``width`` cells the names give
    way first (to 4 cells, :func:`~symphony_tui.console.fleet.fit_name`), then the line is
    cut. A duplicate row (another row's scheduler) has no line."""
    projects = [p for p in snapshot.projects if p.link_state != "duplicate"]
    names = project_names(snapshot)
    windows = [
        p.rate_limits.primary if p.rate_limits is not None and p.heard else None for p in projects
    ]
    costs = [p.totals.cost_usd if p.heard else None for p in projects]
    known = [c for c in costs if c is not None]
    cost = sum(known) if known else None
    money = max((len(f" ${c:,.2f}") for c in [*known, cost or 0.0]), default=0) if known else 0
    percent = 5 if any(w is not None and w.used_percent is not None for w in windows) else 0
    name_w = 10
    if width is not None:
        name_w = max(4, min(10, width - 1 - 7 - percent - money))
    text = Text(end="", no_wrap=True, overflow="ellipsis")
    text.append("per project\n", style=tones.bold)
    for p, window, spent in zip(projects, windows, costs, strict=True):
        text.append(f"{fit_name(p.name, name_w, names):<{name_w + 1}}", style=tones.muted)
        tokens = fmt.compact(p.totals.total_tokens) if p.heard else "-"
        text.append(f"{tokens:>7}")
        if window is not None and window.used_percent is not None:
            used = window.used_percent
            tone = tones.error if used >= 90 else tones.warning if used >= 70 else tones.success
            text.append(f" {used:>3.0f}%", style=tone)
        elif percent:
            text.append(" " * percent)
        if spent is not None:
            text.append(f" ${spent:,.2f}")
        text.append("\n")
    total = sum(p.totals.total_tokens for p in projects)
    text.append(f"{'all':<{name_w + 1}}", style=tones.bold)
    text.append(f"{fmt.compact(total):>7}", style=tones.bold)
    if cost is not None:
        text.append(f"{' ' * percent} ${cost:,.2f}", style=tones.bold)
    return text


class Fitted(Static):
    """Text made for the widget's width: :meth:`fit` takes ``make(width)`` (cells, ``None``
    before the first layout) and shows what it makes, made again when the width changes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._make: Callable[[int | None], Text] | None = None

    def fit(self, make: Callable[[int | None], Text]) -> None:
        self._make = make
        update_static(self, make(self.content_size.width or None))

    def on_resize(self) -> None:
        if self._make is not None:
            update_static(self, self._make(self.content_size.width or None))


#: A fleet console repaints its token pane at most this often (seconds). Each scheduler
#: publishes its accounting once a second; twenty of them out of step moved the fleet's
#: figures on every tick, and the pane's repaints were a third of the fleet console's
#: bytes to the terminal.
FLEET_TOKENS_EVERY_S = 1.0


class TokenPane(VerticalScroll, can_focus=True):
    """Scrollable when the pane is short (80x24). A fleet console's totals per project
    come first (``#token-projects``, hidden for one scheduler), repainted at most every
    :data:`FLEET_TOKENS_EVERY_S`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._fleet_shown: tuple[datetime, tuple[str, ...], Tones] | None = None
        #: A snapshot was not shown for the once-a-second rule: show again next tick
        #: (``MainScreen.holding``), so the held figures follow within the interval.
        self.holding = False

    def _fleet_holds(self, snapshot: Snapshot, now: datetime, tones: Tones) -> bool:
        """A fleet's pane painted less than a second ago, for the same projects, project
        filter (the narrowed snapshot's workflow) and tones: it keeps that frame this tick."""
        if not snapshot.projects:
            self._fleet_shown = None
            return False
        names = (snapshot.workflow_path, *(p.name for p in snapshot.projects))
        shown = self._fleet_shown
        if (
            shown is not None
            and shown[1] == names
            and shown[2] is tones
            and 0 <= (now - shown[0]).total_seconds() < FLEET_TOKENS_EVERY_S
        ):
            return True
        self._fleet_shown = (now, names, tones)
        return False

    def compose(self) -> ComposeResult:
        yield Fitted(id="token-projects")
        yield Static(id="token-totals")
        yield Sparkline([], id="token-spark")
        yield Static(id="token-limits")
        yield Fitted(id="token-workers")

    def show(self, snapshot: Snapshot, now: datetime, tones: Tones) -> None:
        """Set the parts whose text changed (``console.repaint``: an update repaints)."""
        self.holding = self._fleet_holds(snapshot, now, tones)
        if self.holding:
            return
        projects = self.query_one("#token-projects", Fitted)
        if projects.display != bool(snapshot.projects):
            projects.display = bool(snapshot.projects)
        if snapshot.projects:
            projects.fit(partial(projects_text, snapshot, tones))
        update_static(self.query_one("#token-totals", Static), totals_text(snapshot, tones))
        spark = self.query_one("#token-spark", Sparkline)
        history = list(snapshot.token_history)
        if spark.data != history:
            spark.data = history
        update_static(
            self.query_one("#token-limits", Static), limits_text(snapshot.rate_limits, now, tones)
        )
        workers = partial(per_worker_text, snapshot, tones, PER_WORKER_ROWS)
        self.query_one("#token-workers", Fitted).fit(workers)
