"""The event log pane: kind filters, follow on/off, pause with a badge, bounded resume."""

from __future__ import annotations

import gc
import tracemalloc

from symphony_tui.console import fmt
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.event_log import (
    LINE_MESSAGE,
    MAX_LINES,
    EventLogView,
    LogFilter,
    kinds_named,
    line_event,
)
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import CommandEnded
from tests.console.helpers import SIZE, notifications, settle
from tests.console.sample import NOW, sample_snapshot


def test_kind_tokens_parse():
    assert kinds_named("approval") == {
        EventKind.APPROVAL_REQUESTED,
        EventKind.APPROVAL_RESOLVED,
    }
    assert EventKind.COMMAND_COMPLETED in kinds_named("cmd")  # the log's short name
    f = LogFilter.parse("kind:approval DEMO-1 suite", sample_snapshot())
    assert f.issue_id == "demo-1" and f.words == ("suite",)
    assert f.kinds == kinds_named("approval")
    both = LogFilter.parse("k:error kind:hook", sample_snapshot())
    assert EventKind.ERROR in both.kinds and EventKind.HOOK in both.kinds
    bad = LogFilter.parse("kind:nonsense issue:NOPE-1", sample_snapshot())
    assert len(bad.problems) == 2 and bad.kinds == frozenset()
    # an identifier only a recovered workspace knows still narrows
    assert LogFilter.parse("issue:demo-9", sample_snapshot()).issue_id == "demo-9"


def test_fragments_and_token_updates_show_only_when_a_kind_asks():
    """The core's live ring never holds them but an issue's transcript does: ``/DEMO-1``
    must show the same kinds as the unfiltered log."""
    snap = sample_snapshot()
    delta = AgentEvent(kind=EventKind.MESSAGE_DELTA, message="Half of", issue_id="demo-1")
    tokens = AgentEvent(kind=EventKind.TOKEN_USAGE, message="tokens", issue_id="demo-1")
    message = AgentEvent(kind=EventKind.MESSAGE, message="Half of it", issue_id="demo-1")
    for text in ("", "DEMO-1", "issue:demo-1 half"):
        f = LogFilter.parse(text, snap)
        assert not f.accepts(delta) and not f.accepts(tokens), text
        assert f.accepts(message), text
    assert LogFilter.parse("DEMO-1 kind:delta", snap).accepts(delta)
    assert LogFilter.parse("kind:tokens", snap).accepts(tokens)


async def test_issue_filter_hides_fragments_in_the_pane(port, make_app):
    port.add_event(EventKind.MESSAGE_DELTA, "Half", issue_id="demo-1", identifier="DEMO-1")
    port.add_event(EventKind.TOKEN_USAGE, "usage", issue_id="demo-1", identifier="DEMO-1")
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        kinds = {line.split()[2] for line in log.plain_lines()}
        await pilot.press("slash", *"DEMO-1", "enter")
        await settle(pilot)
        narrowed = {line.split()[2] for line in log.plain_lines()}
        assert narrowed and not {"delta", "tokens"} & (kinds | narrowed)
        await pilot.press("slash", *"DEMO-1 kind:delta", "enter")
        await settle(pilot)
        assert [line.split()[2] for line in log.plain_lines()] == ["delta"]


async def test_keys_typed_in_one_burst_after_slash_fill_the_filter(port, make_app):
    # All queued before the console handles the first (a paste, keys over a slow link):
    # none of them may run as a command ("p" would pause dispatch, "a" approve...).
    from textual import events

    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, char in (("slash", "/"), ("p", "p"), ("a", "a"), ("slash", "/"), ("x", "x")):
            app.post_message(events.Key(key, char))
        await settle(pilot)
        assert app.screen.query_one("#log-filter").value == "pa/x"
        assert port.sent == []


async def test_kind_filter_in_the_pane(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"kind:approval", "enter")
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert [line.split()[2] for line in log.plain_lines()] == ["approval?"]
        title = str(app.screen.query_one("#log-pane").border_title)
        assert "filter: kind:approval" in title
        await pilot.press("slash", *"kind:zzz", "enter")
        await settle(pilot)
        assert log.plain_lines() == []
        assert any("no event kind matches 'zzz'" in m for m, _ in notifications(app))


async def test_follow_off_keeps_the_view_still(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for i in range(100):
            port.add_event(EventKind.MESSAGE, f"line {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert log.scroll_y == log.max_scroll_y > 0  # following: at the end
        await pilot.press("3", "f")
        assert not log.follow
        assert "follow off" in str(app.screen.query_one("#log-pane").border_title)
        log.scroll_to(y=10, animate=False, immediate=True)
        for i in range(30):
            port.add_event(EventKind.MESSAGE, f"more {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        assert log.scroll_y == 10
        assert log.plain_lines()[-1].endswith("more 29")
        await pilot.press("f")
        await settle(pilot)
        assert log.follow and log.scroll_y == log.max_scroll_y


async def test_pause_counts_then_resume_appends(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        before = log.plain_lines()
        await pilot.press("space")
        assert log.paused
        for i in range(5):
            port.add_event(EventKind.MESSAGE, f"while paused {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        assert log.plain_lines() == before  # nothing appended
        assert log.missed == 5
        pane = app.screen.query_one("#log-pane")
        assert "paused, 5 new" in str(pane.border_subtitle)
        await pilot.press("space")
        await settle(pilot)
        assert not log.paused and pane.border_subtitle == ""
        assert log.plain_lines()[-5:] == [
            line for line in log.plain_lines() if "while paused" in line
        ]
        assert len(log.plain_lines()) == len(before) + 5


async def test_resume_after_a_flood_stays_bounded(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("space")
        for i in range(MAX_LINES + 500):
            port.add_event(EventKind.MESSAGE, f"flood {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert log.missed == MAX_LINES + 500
        await pilot.press("space")
        await settle(pilot)
        assert log.line_count == MAX_LINES
        assert log.plain_lines()[-1].endswith(f"flood {MAX_LINES + 499}")


async def test_only_visible_lines_are_rendered(port, make_app):
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for i in range(800):
            port.add_event(EventKind.MESSAGE, f"row {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        # a strip per visible row (plus a few rows rendered earlier), not one per line
        assert len(log._strips) <= 3 * log.size.height


async def test_follow_survives_a_change_of_the_pane_height(port, make_app):
    """Growing or shrinking the terminal (or an alert line taking a row) moves the end away
    without the operator scrolling: following must go on (second fresh-user pass)."""
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for i in range(100):
            port.add_event(EventKind.MESSAGE, f"line {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        assert log.scroll_y == log.max_scroll_y > 0
        await pilot.resize_terminal(SIZE[0], SIZE[1] - 6)
        await settle(pilot)
        for i in range(10):
            port.add_event(EventKind.MESSAGE, f"after resize {i}", issue_id="demo-3", at=NOW)
        await settle(pilot)
        assert log.scroll_y == log.max_scroll_y
        await pilot.resize_terminal(SIZE[0], SIZE[1] + 4)
        await settle(pilot)
        port.add_event(EventKind.MESSAGE, "after growing", issue_id="demo-3", at=NOW)
        await settle(pilot)
        assert log.scroll_y == log.max_scroll_y


async def test_kept_lines_hold_a_lines_worth_of_each_event(port, make_app):
    """Bounded by bytes, not only by ``MAX_LINES``: a full log of events with the
    core's longest message and a command's output keeps what its lines show. The bytes the
    log holds are read with tracemalloc once the port let go of the events (the core hands
    out decoded copies, so what the log keeps is its own). Keeping the events would hold
    39 MB here; keeping a line's worth, 2.8 MB (the lines, and the pane's renders)."""
    app = make_app(port)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.screen.query_one(EventLogView)
        await pilot.press("space")  # paused: nothing is rendered while the events arrive
        await settle(pilot)
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            for i in range(MAX_LINES):
                port.events.append(
                    AgentEvent(
                        kind=EventKind.COMMAND_COMPLETED,
                        message=f"cmd {i} " + "x" * 16_000,
                        issue_id="demo-3",
                        at=NOW,
                        seq=len(port.events) + 1,
                        payload=CommandEnded(command=f"make {i}", exit_code=0, output="y" * 20_000),
                    )
                )
            await pilot.press("space")  # resume: the log takes them all
            await settle(pilot)
            assert log.line_count == MAX_LINES
            last = port.events[-1]
            port.events.clear()
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        assert held < 4 * 1024 * 1024, f"{held / 1e6:.1f} MB"  # about 4 KB a line at most
        # each line reads as the event's: the message cut to the line's limit, at its end
        plain = log.plain_lines()[-1]
        assert f"cmd {MAX_LINES - 1} xxx" in plain and plain.endswith("x…")
        assert plain == fmt.event_line(last, Tones()).plain


def test_line_event_keeps_the_line_and_drops_the_rest():
    long = AgentEvent(
        kind=EventKind.MESSAGE,
        message="a  b\n" + "c" * 5000,
        issue_id="i",
        issue_identifier="ISS-1",
        at=NOW,
        seq=7,
        payload=CommandEnded(output="o" * 9000),
    )
    kept = line_event(long)
    assert kept.payload is None and len(kept.message) == LINE_MESSAGE
    assert (kept.kind, kept.issue_identifier, kept.at, kept.seq) == (
        long.kind,
        "ISS-1",
        NOW,
        7,
    )
    tones = Tones()
    assert fmt.event_line(kept, tones).plain == fmt.event_line(long, tones).plain
    short = AgentEvent(kind=EventKind.MESSAGE, message="done", seq=8)
    assert line_event(short) is short
