"""Transcripts bounded by bytes, streamed fragments coalesced: one entry per item
and read, all of the text kept, the oldest entries dropped first when over budget, and what
was dropped counted."""

from __future__ import annotations

import random
import string

from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui.domain.payloads import ItemNote
from symphony_tui.observability.redact import default_redactor, register_secret
from symphony_tui.scheduler.history.eventlog import EventHistory
from symphony_tui.scheduler.history.transcripts import ENTRY_OVERHEAD, TRANSCRIPT_OVERHEAD


def delta(text: str, item: str = "m1", *, reasoning: bool = False) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.MESSAGE_DELTA,
        message=text,
        payload=ItemNote(item_id=item, reasoning=reasoning),
    )


def frag(history: EventHistory, issue: str, event: AgentEvent, session: str = "s1") -> int:
    return history.append_fragment(
        issue, event, issue_identifier=issue.upper(), session_id=session, at=None
    )


def test_deltas_of_one_item_become_one_entry_that_keeps_all_their_text():
    history = EventHistory()
    words = [f"word{i} " for i in range(500)]
    seqs = [frag(history, "i1", delta(w)) for w in words]
    [entry] = history.since(0, issue_id="i1")
    assert entry.message == "".join(words)
    assert entry.kind is EventKind.MESSAGE_DELTA and entry.payload == ItemNote(item_id="m1")
    assert entry.seq == seqs[-1] and entry.issue_identifier == "I1" and entry.at is not None
    assert history.since(0) == []  # fragments stay out of the live ring


def test_a_read_seals_the_live_item_so_paging_by_seq_misses_and_repeats_nothing():
    history = EventHistory()
    frag(history, "i1", delta("one "))
    frag(history, "i1", delta("two "))
    [first] = history.since(0, issue_id="i1")
    frag(history, "i1", delta("three "))
    frag(history, "i1", delta("four"))
    [second] = history.since(first.seq, issue_id="i1")
    assert (first.message, second.message) == ("one two ", "three four")
    assert history.since(second.seq, issue_id="i1") == []


def test_a_read_from_at_or_past_the_live_items_seq_gets_nothing_and_leaves_it_growing():
    """A reader may name any seq (``GET /api/v1/events?since=N&issue_id=``), also one at or
    past the live item's: nothing of the issue is newer, and the item keeps growing."""
    history = EventHistory()
    frag(history, "i1", delta("one "))
    live_seq = frag(history, "i1", delta("two "))
    assert history.since(live_seq, issue_id="i1") == []
    assert history.since(live_seq + 100, issue_id="i1") == []
    frag(history, "i1", delta("three"))
    [entry] = history.since(0, issue_id="i1")
    assert entry.message == "one two three"


def test_another_item_kind_or_session_or_a_whole_event_starts_a_new_entry():
    history = EventHistory()
    frag(history, "i1", delta("a"))
    frag(history, "i1", delta("b", item="m2"))
    frag(history, "i1", delta("c", item="m2", reasoning=True))
    frag(history, "i1", delta("d", item="m2", reasoning=True), session="s2")
    history.append(AgentEvent(kind=EventKind.MESSAGE, message="done"), issue_id="i1")
    frag(history, "i1", delta("e"))
    out = history.since(0, issue_id="i1")
    assert [e.message for e in out] == ["a", "b", "c", "d", "done", "e"]
    assert [e.seq for e in out] == sorted(e.seq for e in out)
    assert out[3].session_id == "s2"


def test_a_secret_split_across_deltas_is_masked_once_the_item_is_joined():
    register_secret("s3cr3t-value-123")
    try:
        history = EventHistory()
        for part in ("key is s3cr", "3t-val", "ue-123 ok"):
            frag(history, "i1", delta(part))
        [entry] = history.since(0, issue_id="i1")
        assert "s3cr3t-value-123" not in entry.message and entry.message.endswith(" ok")
    finally:
        default_redactor().clear()


def test_a_long_item_is_cut_into_entries_of_at_most_the_message_cap():
    history = EventHistory()
    chunk = "x" * 1000
    for _ in range(40):
        frag(history, "i1", delta(chunk))
    out = history.since(0, issue_id="i1")
    assert "".join(e.message for e in out) == chunk * 40
    assert all(len(e.message) <= 16_384 for e in out) and len(out) == 3


def test_over_the_byte_budget_the_oldest_entries_of_any_issue_go_first_and_are_counted():
    per_entry = ENTRY_OVERHEAD + 100
    # ten entries, and the two transcripts themselves
    history = EventHistory(transcript_bytes=10 * per_entry + 2 * TRANSCRIPT_OVERHEAD)
    for i in range(8):  # i1 first: the oldest entries are all i1's
        history.append(
            AgentEvent(kind=EventKind.MESSAGE, message=f"{i:03}" * 33 + "x"), issue_id="i1"
        )
    for i in range(6):
        history.append(
            AgentEvent(kind=EventKind.MESSAGE, message=f"{i:03}" * 33 + "y"), issue_id="i2"
        )
    stats = history.stats()
    assert stats["transcript_bytes"] <= 10 * per_entry
    assert stats["transcript_dropped_events"] == 4
    assert stats["transcript_dropped_bytes"] == 4 * per_entry
    assert history.transcripts.dropped_of("i1") == (4, 4 * per_entry)
    assert history.transcripts.dropped_of("i2") == (0, 0)
    kept = history.since(0, issue_id="i1")
    assert [e.message[:3] for e in kept] == ["004", "005", "006", "007"]  # newest kept
    assert len(history.since(0, issue_id="i2")) == 6


def noise(n: int, seed: int = 0) -> str:
    """``n`` characters that zlib cannot shrink much (kept entries are compressed)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n))


def test_growing_live_items_count_against_the_budget_too():
    history = EventHistory(transcript_bytes=5_000)
    for i in range(200):
        frag(history, "old", delta(noise(50, i)))
    history.append(AgentEvent(kind=EventKind.MESSAGE, message="sealed"), issue_id="old")
    for _ in range(60):
        frag(history, "new", delta("n" * 50))
    assert history.stats()["transcript_bytes"] <= 5_000
    assert history.transcripts.dropped_of("old")[0] >= 1  # the old item went first
    [live] = history.since(0, issue_id="new")
    assert live.message == "n" * 3000


def test_the_entry_cap_per_issue_still_holds_and_the_age_order_stays_right():
    history = EventHistory(transcript_size=3, transcript_bytes=100 * (ENTRY_OVERHEAD + 10))
    for i in range(5):
        history.append(AgentEvent(kind=EventKind.MESSAGE, message=f"a{i}"), issue_id="a")
    history.append(AgentEvent(kind=EventKind.MESSAGE, message="b0"), issue_id="b")
    assert [e.message for e in history.since(0, issue_id="a")] == ["a2", "a3", "a4"]
    assert history.transcripts.dropped_of("a")[0] == 2
    history.transcripts.budget_bytes = 2 * (ENTRY_OVERHEAD + 2) + 2 * TRANSCRIPT_OVERHEAD
    history.append(AgentEvent(kind=EventKind.MESSAGE, message="b1"), issue_id="b")
    # a's three (older than b's) went, not b0: the stale age references were skipped
    assert history.since(0, issue_id="a") == []
    assert [e.message for e in history.since(0, issue_id="b")] == ["b0", "b1"]


def test_forgotten_issues_free_their_bytes():
    history = EventHistory()
    for _ in range(10):
        frag(history, "gone", delta("t" * 100))
    history.append(AgentEvent(kind=EventKind.MESSAGE, message="kept"), issue_id="kept")
    history.forget({"kept"})
    assert history.since(0, issue_id="gone") == []
    assert history.stats()["transcript_bytes"] == ENTRY_OVERHEAD + 4


def test_the_ring_is_bounded_by_bytes_and_counts_what_it_dropped():
    history = EventHistory(ring_bytes=3 * (ENTRY_OVERHEAD + 10))
    for i in range(5):
        history.append(AgentEvent(kind=EventKind.MESSAGE, message=f"{i}" * 10))
    assert [e.message[0] for e in history.since(0)] == ["2", "3", "4"]
    stats = history.stats()
    assert (stats["ring_dropped_events"], stats["ring_dropped_bytes"]) == (
        2,
        2 * (ENTRY_OVERHEAD + 10),
    )


def test_kept_events_come_back_equal_whatever_their_payload():
    from datetime import UTC, datetime

    from symphony_tui.domain.payloads import ApprovalAsked, FileChange, FileEdit, TokenReport
    from symphony_tui.domain.tokens import TokenUsage

    at = datetime(2026, 12, 1, 18, 0, 0, 123456, tzinfo=UTC)
    events = [
        AgentEvent(kind=EventKind.MESSAGE, message="héllo ✓", at=at, session_id="th-1"),
        AgentEvent(
            kind=EventKind.APPROVAL_REQUESTED,
            message="run ls?",
            payload=ApprovalAsked(approval_id="a1", approval_kind="command"),
        ),
        AgentEvent(
            kind=EventKind.TOKEN_USAGE,
            payload=TokenReport(usage=TokenUsage(input_tokens=5, total_tokens=7, cost_usd=0.5)),
        ),
        AgentEvent(
            kind=EventKind.FILE_CHANGE,
            payload=FileChange(item_id="f1", changes=(FileEdit(path="a.py", diff="+x\n"),)),
        ),
    ]
    history = EventHistory()
    stamped = [history.append(e, issue_id="i1", issue_identifier="I1") for e in events]
    assert history.since(0, issue_id="i1") == stamped
    ring = history.since(0)  # token usage stays out of the ring
    assert ring == [e for e in stamped if e.kind is not EventKind.TOKEN_USAGE]
    assert history.since(stamped[1].seq, limit=1) == [stamped[3]]


def test_a_full_history_adds_next_to_nothing_for_the_garbage_collector_to_traverse():
    import gc

    history = EventHistory()
    for i in range(50):  # the transcripts and their first entries exist
        history.append(AgentEvent(kind=EventKind.MESSAGE, message="m"), issue_id=f"i{i}")
    gc.collect()
    before = len(gc.get_objects())
    for n in range(4_000):  # 8 tracked objects each were they kept as models
        event = AgentEvent(
            kind=EventKind.MESSAGE, message=f"line {n}", payload=ItemNote(item_id=f"m{n}")
        )
        history.append(event, issue_id=f"i{n % 50}")
        frag(history, f"i{n % 50}", delta(f"d{n} "))
    del event
    gc.collect()
    assert len(gc.get_objects()) - before < 400  # the live items and the deques' blocks
    assert len(history.since(0, limit=10_000)) == 4_050


def test_the_port_says_what_an_issues_transcript_dropped_and_where_the_history_is(
    make_harness, tmp_path
):
    per_entry = ENTRY_OVERHEAD + 100
    path = tmp_path / "events.jsonl"
    history = EventHistory(transcript_bytes=3 * per_entry + TRANSCRIPT_OVERHEAD, jsonl_path=path)
    h = make_harness(event_log=history)
    try:
        for i in range(5):
            history.append(
                AgentEvent(kind=EventKind.MESSAGE, message=f"{i:03}" * 33 + "x"), issue_id="i1"
            )
        gap = h.orch.transcript_gap("i1")
        assert (gap.events, gap.bytes, gap.event_file) == (2, 2 * per_entry, str(path))
        assert h.orch.transcript_gap("other").events == 0
    finally:
        history.close()


def test_with_many_sessions_the_bytes_held_stay_within_the_budget_counted_in_real_bytes():
    """The budget bounds memory, not a count of characters. 200 sessions stream
    45-character deltas (a fragment alone as its ``str`` holds 2.3 times its text) and
    complete messages of source-like text; ``tracemalloc`` measures what the history holds
    and it stays within the transcripts' and the ring's budgets."""
    import gc
    import tracemalloc

    budget, ring = 2_000_000, 100_000
    source = noise(4_000, 99)
    warm = EventHistory()  # what the first events import and build is not the history's
    frag(warm, "w", delta("warm"))
    warm.append(AgentEvent(kind=EventKind.MESSAGE, message=source), issue_id="w")
    warm.since(0, issue_id="w")
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        history = EventHistory(transcript_bytes=budget, ring_bytes=ring)
        for n in range(170):  # the live items grow to 170 deltas each: 7,650 chars
            for i in range(200):
                text = f"@{1764000000 + n}.{i:06} n={n} the quick brown fox "[:45]
                frag(history, f"i{i}", delta(text, item=f"m{i}"), session=f"s{i}")
        held_live = tracemalloc.get_traced_memory()[0] - start
        for k in range(600):  # three completed messages each: past the budget
            history.append(
                AgentEvent(kind=EventKind.MESSAGE, message=source[k:] + source[:k]),
                issue_id=f"i{k % 200}",
            )
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert history.stats()["transcript_bytes"] <= budget
    assert held_live <= budget
    assert held <= budget + ring
    assert history.stats()["transcript_dropped_events"] > 0  # the budget was reached
