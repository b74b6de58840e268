"""Pane 3: the live event log.

Bounded (``MAX_LINES``); the full history lives in the core's ring buffer and JSONL file
(the widget stays small; filtering happens in the core). The log pulls
``events_since(last_seq)`` at the screen's refresh rate, so a flood of agent events costs
one batch per tick, not one write per event.

It is a line-API widget (after toolong): a write only stores the event; a line is
formatted and rendered to a strip when it scrolls into view, and strips are kept in a
bounded cache. A flood of 200 lines per tick therefore costs what fits on screen, not 200
renders.

What a kept line holds is bounded by bytes, not only by ``MAX_LINES``: an event
is kept as what its line shows (:func:`line_event`: the message cut to one line of
``fmt.event_line``'s limit, no payload), not as the event the core handed over, whose
message (up to the core's 16,384 characters) and payload (a command's output, a file
change's diffs) are far larger. The core's ring is budgeted in bytes, but the console
receives decoded copies: a thousand kept events of 20 KB would hold 20 MB here; as lines,
under 1 MB.

Filter (``/``): space-separated tokens, all of which must hold.

- ``kind:NAME`` (or ``k:NAME``): the event kind contains ``NAME`` (``kind:approval`` is
  ``approval_requested`` and ``approval_resolved``; the short names of the log work too,
  ``kind:cmd``). Several kind tokens are alternatives.
- ``issue:ID`` or a bare known issue identifier: that issue only (narrowed in the core,
  ``events_since(..., issue_id=)``).
- any other word: occurs in the issue, kind or message (case-insensitive).

In a fleet console an identifier may name issues of several projects: ``PROJECT/ID`` names
one; a bare identifier names the issue of the project filtered by, and is otherwise a word
(every project's events that mention it). The project filter (``F``) narrows the log too.

Streaming fragments (``delta``, command output) and accounting updates (``tokens``, rate
limits) never reach the core's live ring, but an issue's transcript holds them; so that
``/DEMO-6`` shows what the unfiltered log shows, they are hidden unless a ``kind:`` token
asks for them (``DEMO-6 kind:delta``).

Under a flood the log is appended to at most once every ``write_interval_s`` (the console's
``LIVE_TEXT_S``): each append scrolls, and a scroll repaints the whole pane, so appending on
every refresh tick would rewrite the pane several times a second. A line that
arrives after a quiet spell is appended at once; operator actions (filter, resume) too.

Follow (``f``): when off, new lines never move the view. Pause (``space``): nothing is
appended; a badge counts the matching events that came in; resuming appends them (as far
as the core still holds them).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from symphony_tui.console import fmt
from symphony_tui.console.sanitize import one_line
from symphony_tui.console.tones import Tones
from symphony_tui.domain.kinds import FRAGMENT_KINDS, QUIET_KINDS, EventKind

if TYPE_CHECKING:
    from symphony_tui.domain import AgentEvent, Snapshot
    from symphony_tui.scheduler.port import SchedulerPort

# the kinds the core keeps out of the live ring (transcripts only): one rule for both views
UNLISTED_KINDS = FRAGMENT_KINDS | QUIET_KINDS
MAX_LINES = 1000
BATCH = 2000
_STRIP_CACHE = 512
#: Characters of an event's message a line shows (``fmt.event_line``'s ``message_limit``).
LINE_MESSAGE = 400


def line_event(event: AgentEvent) -> AgentEvent:
    """What a log line needs of ``event``: the same event with its message as the line shows
    it (one line, at most ``LINE_MESSAGE`` characters: ``fmt.event_line`` renders it alike)
    and no payload. ``event`` itself when it holds nothing more than that."""
    message = event.message
    if event.payload is None and len(message) <= LINE_MESSAGE:
        return event
    return event.model_copy(update={"message": one_line(message, LINE_MESSAGE), "payload": None})


def kinds_named(name: str) -> frozenset[EventKind]:
    """Event kinds whose value or short log name contains ``name`` (case-insensitive)."""
    name = name.lower().strip()
    if not name:
        return frozenset()
    return frozenset(
        k for k in EventKind if name in k.value or name in fmt.KIND_SHORT.get(k, k.value)
    )


@dataclass(frozen=True)
class LogFilter:
    """``issue_id`` narrows in the core; ``kinds`` (``None`` = any), ``words``
    (lowercase, all required) and ``project`` (a fleet console's filter) match locally. ``problems`` are tokens that matched nothing
    (an unknown kind or issue), for a notification; such a filter shows nothing."""

    text: str = ""
    issue_id: str | None = None
    kinds: frozenset[EventKind] | None = None
    words: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    project: str | None = None

    @classmethod
    def parse(cls, text: str, snapshot: Snapshot, project: str | None = None) -> LogFilter:
        by_ident = _identifiers(snapshot, project)
        issue_id = None
        kinds: set[EventKind] | None = None
        words: list[str] = []
        problems: list[str] = []
        for token in text.lower().split():
            prefix, _, value = token.partition(":")
            if value and prefix in ("kind", "k"):
                found = kinds_named(value)
                if not found:
                    problems.append(f"no event kind matches {one_line(value, 30)!r}")
                kinds = (kinds or set()) | found
            elif value and prefix == "issue":
                if value in by_ident:
                    issue_id = by_ident[value]
                else:
                    problems.append(f"unknown issue {one_line(value, 30)!r}")
                    kinds = set()  # nothing can match
            elif issue_id is None and token in by_ident:
                issue_id = by_ident[token]
            else:
                words.append(token)
        return cls(
            text=text.strip(),
            issue_id=issue_id,
            kinds=None if kinds is None else frozenset(kinds),
            words=tuple(words),
            problems=tuple(problems),
            project=project,
        )

    def accepts(self, event: AgentEvent) -> bool:
        if self.project is not None and event.project != self.project:
            return False
        if self.issue_id is not None and event.issue_id != self.issue_id:
            return False
        if self.kinds is None:
            if event.kind in UNLISTED_KINDS:
                return False
        elif event.kind not in self.kinds:
            return False
        return fmt.event_matches(event, self.words)


def _identifiers(snapshot: Snapshot, project: str | None) -> dict[str, str]:
    """Lowercase identifier -> issue id of the issues ``snapshot`` knows (runs, issues,
    recovered workspaces). In a fleet snapshot also ``project/identifier``; a bare
    identifier that several projects use names ``project``'s issue, or none."""
    pairs: list[tuple[str, str, str | None]] = [
        (i.identifier, i.issue_id, i.project) for i in snapshot.issues
    ]
    pairs += [(r.issue_identifier, r.issue_id, r.project) for r in snapshot.running]
    for w in snapshot.recovered:  # issues the tracker may no longer return
        if w.issue_id and w.issue_identifier:
            pairs.append((w.issue_identifier, w.issue_id, None))
    by_ident: dict[str, str] = {}
    ids_of: dict[str, dict[str, str | None]] = {}  # identifier -> {issue id: project}
    for ident, issue_id, owner in pairs:
        key = ident.lower()
        if owner is not None:
            by_ident.setdefault(f"{owner.lower()}/{key}", issue_id)
        ids_of.setdefault(key, {}).setdefault(issue_id, owner)
    for key, ids in ids_of.items():
        if len(ids) == 1 or not any(ids.values()):  # one scheduler: the first it knows
            by_ident.setdefault(key, next(iter(ids)))
            continue
        mine = [i for i, owner in ids.items() if project is not None and owner == project]
        if len(mine) == 1:
            by_ident.setdefault(key, mine[0])
        # else: which project's? a word then
    return by_ident


class EventLogView(ScrollView, can_focus=True):
    """The log widget. Call :meth:`pull` from the refresh tick while visible.

    ``write_interval_s``: least seconds between two appends by :meth:`pull` (0: every
    call); ``monotonic`` is the clock for it (tests pass their own)."""

    def __init__(
        self,
        *,
        max_lines: int = MAX_LINES,
        write_interval_s: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.write_interval_s = write_interval_s
        self._monotonic = monotonic
        self._pulled_at: float | None = None
        self._lines: deque[Text | AgentEvent] = deque(maxlen=max_lines)
        self._tones = Tones()
        #: The fleet's project names (``fleet.fit_name``: names cut alike are told apart).
        self._project_names: tuple[str, ...] = ()
        self._first = 0  # absolute number of ``_lines[0]``: strip cache keys survive drops
        self._strips: LRUCache[tuple[int, int], Strip] = LRUCache(_STRIP_CACHE)
        self.last_seq = 0
        self.filter = LogFilter()
        self.follow = True
        # The view is at the end and should stay there: a resize (or an alert line taking a
        # row) moves the end away without the operator scrolling, which must not stop follow.
        self._pinned = True
        self.paused = False
        self.missed = 0  # matching events seen while paused
        self._peek_seq = 0

    # -- content -----------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def _text(self, line: Text | AgentEvent) -> Text:
        return (
            line
            if isinstance(line, Text)
            else fmt.event_line(
                line, self._tones, message_limit=LINE_MESSAGE, names=self._project_names
            )
        )

    def plain_lines(self) -> list[str]:
        """The kept lines as plain text (tests, copy)."""
        return [self._text(line).plain for line in self._lines]

    def write_lines(self, lines: Iterable[Text | AgentEvent]) -> int:
        """Append ``lines``; with follow on (and the view at the end) scroll to the end,
        with follow off keep the view on the same lines."""
        lines = list(lines)[-self.max_lines :]
        if not lines:
            return 0
        at_end = self._pinned or self.is_vertical_scroll_end or self.scroll_y >= self.max_scroll_y
        overflow = max(len(self._lines) + len(lines) - self.max_lines, 0)
        self._lines.extend(lines)
        self._first += overflow
        self.virtual_size = Size(self.size.width, len(self._lines))
        if self.follow and at_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        elif overflow and self.scroll_y > 0:
            # the lines under the view moved up by ``overflow``; follow them
            self.scroll_to(
                y=max(self.scroll_y - overflow, 0), animate=False, immediate=True, force=True
            )
        self.refresh()
        return len(lines)

    def clear(self) -> None:
        self._first += len(self._lines)
        self._lines.clear()
        self.virtual_size = Size(self.size.width, 0)
        self.scroll_to(y=0, animate=False, immediate=True, force=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        style = self.rich_style
        if index >= len(self._lines) or width <= 0:
            return Strip.blank(max(width, 0), style)
        key = (self._first + index, width)
        strip = self._strips.get(key)
        if strip is None:
            text = self._text(self._lines[index])
            segments = list(text.render(self.app.console, end=""))
            # one segment per styled run: each costs the terminal a colour sequence
            strip = Strip(segments).crop_extend(0, width, style).apply_style(style).simplify()
            self._strips[key] = strip
        return strip.apply_offsets(0, index)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self._lines))
        self._strips.clear()
        if self.follow and self._pinned:
            self.call_after_refresh(
                self.scroll_end, animate=False, immediate=True, x_axis=False, force=True
            )

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Scrolling up (the operator reading back) unpins; reaching the end pins again.
        self._pinned = new_value >= self.max_scroll_y

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    # -- pulling from the core ---------------------------------------------------------

    def pull(self, port: SchedulerPort, tones: Tones, *, force: bool = False) -> int:
        """Append events newer than ``last_seq``; returns how many lines were written.
        While paused, only count the matching newcomers. Unless ``force``, nothing is read
        within ``write_interval_s`` of the last read that found something (the events wait
        in the core's ring for the next one)."""
        now = self._monotonic()
        if (
            not force
            and self._pulled_at is not None
            and now - self._pulled_at < self.write_interval_s
        ):
            return 0
        if self.paused:
            events = port.events_since(self._peek_seq, limit=BATCH, issue_id=self.filter.issue_id)
            if events:
                self._pulled_at = now
                self._peek_seq = max(self._peek_seq, events[-1].seq)
                self.missed += sum(1 for e in events if self.filter.accepts(e))
            return 0
        events = port.events_since(self.last_seq, limit=BATCH, issue_id=self.filter.issue_id)
        if not events:
            return 0
        self._pulled_at = now
        self.last_seq = max(self.last_seq, events[-1].seq)
        self._peek_seq = self.last_seq
        if tones != self._tones:
            self._tones = tones
            self._strips.clear()
        # events are formatted when they scroll into view (render_line), not here; a kept
        # line holds only what it shows (line_event)
        accepted = [e for e in events if self.filter.accepts(e)][-self.max_lines :]
        return self.write_lines(line_event(e) for e in accepted)

    def set_project_names(self, names: tuple[str, ...]) -> None:
        """The fleet's projects changed: lines are drawn again with their names fitted
        among these."""
        if names != self._project_names:
            self._project_names = names
            self._strips.clear()
            self.refresh()

    def set_filter(self, log_filter: LogFilter, port: SchedulerPort, tones: Tones) -> int:
        """Replace the filter and re-read what the core still holds under it (a paused
        log resumes: the operator asked for a new view)."""
        self.filter = log_filter
        self.paused = False
        self.missed = 0
        self.clear()
        self.last_seq = self._peek_seq = 0
        return self.pull(port, tones, force=True)

    def set_paused(self, paused: bool) -> None:
        """Pause: stop appending (the view holds still). Resume: the next :meth:`pull`
        appends what came in meanwhile."""
        self.paused = paused
        self.missed = 0
        self._peek_seq = self.last_seq

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
