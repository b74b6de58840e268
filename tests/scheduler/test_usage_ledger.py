"""The usage ledger: totals that survive a crash."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from symphony_tui.agents.base import TurnResult, TurnStatus
from symphony_tui.domain import EventKind, Issue, TokenUsage
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.book import (
    IssueUsage,
    RunUsage,
    UsageBook,
    decode,
    encode_issue,
    encode_run,
)
from symphony_tui.scheduler.usage.ledger import UsageLedger, read_ledger, usage_file
from symphony_tui.scheduler.usage.tokens import TokenLedger

from .conftest import make_issue


def _run(n: int, started: float = 0.0, total: int = 0) -> Run:
    issue = Issue(id=f"id-{n}", identifier=f"ABC-{n}", title="t", state="Todo")
    run = Run(
        issue=issue,
        attempt=None,
        backend="scripted",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        started_mono=started,
        last_event_mono=started,
    )
    run.tokens = TokenUsage(input_tokens=total, total_tokens=total)
    return run


def _open(path: Path, **kw) -> tuple[UsageLedger, dict[str, IssueUsage], str | None]:
    ledger = UsageLedger(path, **kw)
    loaded = ledger.open()
    return ledger, loaded.by_issue, loaded.warning


# ---------------------------------------------------------------------------- records


def test_records_round_trip_and_bad_ones_say_why():
    mark = RunUsage("r1", "id-1", "ABC-1", TokenUsage(input_tokens=5, total_tokens=7), 2.5, True)
    assert decode(encode_run(mark)) == mark
    base = IssueUsage("id-1", "ABC-1", TokenUsage(total_tokens=3, cost_usd=0.5), 9.0, 2)
    assert decode(encode_issue(base)) == base
    for line, why in [
        (b"{not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (
            b'{"kind":"run","issue_id":"i","issue_identifier":"A","seconds":-1,"tokens":{}}',
            "seconds",
        ),
        (b'{"kind":"run","issue_id":"i","issue_identifier":"A","seconds":1,"tokens":{}}', "run id"),
        (b'{"kind":"x","issue_id":"i","issue_identifier":"A","seconds":1,"tokens":{}}', "kind"),
        (
            b'{"kind":"issue","issue_id":"i","issue_identifier":"A","seconds":1,'
            b'"tokens":{"total_tokens":-4}}',
            "negative",
        ),
        (
            b'{"kind":"run","run":"r","issue_id":"i","issue_identifier":"A","seconds":1,'
            b'"tokens":{"total_tokens":4,"cost_usd":-50}}',
            "cost_usd is not a number >= 0",
        ),
    ]:
        try:
            decode(line)
        except ValueError as exc:
            assert why in str(exc)
        else:
            raise AssertionError(f"accepted {line!r}")


def test_book_keeps_the_newest_mark_per_run_and_compaction_keeps_the_sums():
    book = UsageBook()
    t = lambda n: TokenUsage(total_tokens=n)  # noqa: E731
    book.apply(RunUsage("r1", "id-1", "ABC-1", t(10), 1.0))
    book.apply(RunUsage("r1", "id-1", "ABC-1", t(30), 4.0))  # replaces, never adds
    book.apply(RunUsage("r2", "id-1", "ABC-1", t(5), 2.0, ended=True))
    book.apply(RunUsage("r3", "id-2", "ABC-2", t(7), 3.0))
    before = book.per_issue()
    assert before["id-1"].tokens.total_tokens == 35 and before["id-1"].seconds == 6.0
    lines = book.compact(live={"r3"})
    assert book.per_issue() == before
    # r1 and r2 folded into one issue record; the live run keeps its own record.
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds == ["issue", "run"]
    again = UsageBook()
    for line in lines:
        again.apply(decode(line))
    assert again.per_issue() == before


# ---------------------------------------------------------------------------- file


def test_ledger_file_is_per_project_under_the_state_folder(tmp_path):
    a = usage_file("local:/p/one.yaml", tmp_path)
    assert a.parent.parent == tmp_path / "projects" and a.name == "usage.jsonl"
    assert a != usage_file("local:/p/two.yaml", tmp_path)
    assert a == usage_file("local:/p/one.yaml", tmp_path)


def test_marks_survive_a_reopen_without_double_counting(tmp_path):
    path = tmp_path / "u.jsonl"
    ledger, by_issue, warning = _open(path)
    assert by_issue == {} and warning is None
    run = _run(1, started=0.0, total=10)
    assert ledger.checkpoint([run], 2.0) == 1
    assert ledger.checkpoint([run], 2.2) == 0  # nothing moved enough
    run.tokens = TokenUsage(total_tokens=25)
    ledger.checkpoint([run], 3.0)
    assert ledger.wait_written()
    # No close: what was written is what a killed process leaves behind.
    book, _ = read_ledger(path)
    by_issue = book.per_issue()
    assert by_issue["id-1"].tokens.total_tokens == 25 and by_issue["id-1"].seconds == 3.0
    ledger.run_ended(run, 4.0)
    ledger.close()
    second, by_issue, _ = _open(path)
    assert by_issue["id-1"].tokens.total_tokens == 25 and by_issue["id-1"].seconds == 4.0
    assert by_issue["id-1"].runs == 1
    second.close()


def test_a_torn_last_line_is_dropped_with_one_warning_and_the_file_repaired(tmp_path, caplog):
    path = tmp_path / "u.jsonl"
    ok = encode_run(RunUsage("r1", "id-1", "ABC-1", TokenUsage(total_tokens=15), 117.0))
    newer = encode_run(RunUsage("r1", "id-1", "ABC-1", TokenUsage(total_tokens=20), 118.0))
    path.write_bytes(ok + newer[:25])  # killed in the middle of the second write
    _, warning = read_ledger(path)
    assert warning is not None and "torn last line" in warning and "\n" not in warning
    ledger, by_issue, warning = _open(path)
    assert "torn last line" in (warning or "")
    assert by_issue["id-1"].tokens.total_tokens == 15 and by_issue["id-1"].seconds == 117.0
    # The next append starts on a clean line: the file reads back whole.
    ledger.checkpoint([_run(2, total=3)], 1.0)
    ledger.close()
    _, warning = read_ledger(path)
    assert warning is None
    _, by_issue, _ = _open(path)
    assert by_issue["id-1"].tokens.total_tokens == 15 and by_issue["id-2"].tokens.total_tokens == 3


def test_unreadable_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "u.jsonl"
    good = encode_run(RunUsage("r1", "id-1", "ABC-1", TokenUsage(total_tokens=15), 1.0))
    path.write_bytes(b"garbage\n" + good + b'{"kind":"run"}\n')
    book, warning = read_ledger(path)
    assert book.per_issue()["id-1"].tokens.total_tokens == 15
    assert warning is not None and "skipped 2 unreadable line(s)" in warning and "line 1" in warning


def test_an_unusable_ledger_is_one_warning_and_records_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ledger = UsageLedger(blocker / "u.jsonl")  # its folder cannot be created
    loaded = ledger.open()
    assert loaded.by_issue == {} and "unusable" in (loaded.warning or "")
    assert ledger.checkpoint([_run(1, total=5)], 1.0) == 0
    ledger.close()


def test_compaction_bounds_the_file_and_keeps_totals(tmp_path):
    path = tmp_path / "u.jsonl"
    ledger, _, _ = _open(path, compact_bytes=2048)
    runs = [_run(n) for n in range(5)]
    for step in range(1, 200):
        for run in runs:
            run.tokens = TokenUsage(total_tokens=step * 10 + int(run.issue.id[3:]))
        ledger.checkpoint(runs, float(step))
        if step % 50 == 0:
            ledger.run_ended(runs[0], float(step))
            runs[0] = _run(0, started=float(step))
        assert ledger.wait_written()
    assert ledger.compactions > 1
    assert path.stat().st_size < 3 * 2048
    ledger.close()
    _, by_issue, warning = _open(path)
    assert warning is None
    # Issue 0's run ended 3 times (50 s each, at 10 * step tokens); the last one ran 49 s.
    assert by_issue["id-0"].seconds == 3 * 50 + 49
    assert by_issue["id-0"].tokens.total_tokens == sum(s * 10 for s in range(50, 151, 50)) + 1990
    assert by_issue["id-3"].tokens.total_tokens == 1993 and by_issue["id-3"].seconds == 199.0


def test_token_ledger_restore_counts_totals_per_issue_but_not_the_rate():
    ledger = TokenLedger()
    ledger.restore({"id-1": TokenUsage(total_tokens=15), "id-2": TokenUsage(total_tokens=5)})
    assert ledger.totals.total_tokens == 20 and ledger.by_issue["id-1"].total_tokens == 15
    assert ledger.restored.total_tokens == 20
    assert ledger.rate_per_min(100.0) == 0
    ledger.report("id-1:codex:t", TokenUsage(total_tokens=7), 100.0, issue_id="id-1")
    assert ledger.by_issue["id-1"].total_tokens == 22 and ledger.totals.total_tokens == 27
    assert ledger.rate_per_min(100.0) == 7


# ---------------------------------------------------------------------------- scheduler


async def test_totals_survive_a_scheduler_that_dies_without_shutting_down(make_harness, tmp_path):
    """The scheduler is abandoned mid-run (as after ``kill -9``: no shutdown, no run end);
    a new scheduler on the same project starts from the same totals."""
    path = tmp_path / "state" / "usage.jsonl"
    forever = asyncio.Event()

    async def working(session, prompt, turn):
        session.usage(15, output=5)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=working, usage=UsageLedger(path))
    await first.start()
    await first.advance(117.0)  # checkpoints every second of the scheduler clock
    before = first.orch.snapshot()
    assert before.totals.total_tokens == 15 and before.seconds_running == 117.0
    assert first.orch.usage.wait_written()

    async def idle(session, prompt, turn):
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    second = make_harness([make_issue(1)], script=idle, usage=UsageLedger(path))
    await second.start()
    after = second.orch.snapshot()
    assert after.totals == before.totals
    assert after.seconds_running == before.seconds_running
    assert second.orch.ledger.by_issue["id-1"].total_tokens == 15
    # The new run's time adds to the old; the old run is not counted again.
    await second.advance(5.0)
    assert second.orch.snapshot().seconds_running == 122.0
    assert second.orch.usage.wait_written()
    third = UsageLedger(path)
    loaded = third.open()
    assert loaded.tokens.total_tokens == 15 and loaded.seconds == 122.0
    third.close()
    first.orch.usage.close()
    await second.orch.shutdown()


async def test_a_torn_ledger_is_reported_to_the_operator(make_harness, tmp_path):
    path = tmp_path / "usage.jsonl"
    path.write_bytes(encode_run(RunUsage("r", "id-9", "ABC-9", TokenUsage(total_tokens=4), 2.0)))
    path.write_bytes(path.read_bytes() + b'{"v":1,"kind":"ru')
    h = make_harness([], usage=UsageLedger(path))
    await h.start()
    assert h.orch.snapshot().totals.total_tokens == 4
    warnings = [e for e in h.orch.events_since(0) if e.kind is EventKind.WARNING]
    assert len(warnings) == 1 and "torn last line" in warnings[0].message
    await h.orch.shutdown()


async def test_a_clean_shutdown_records_the_runs_end(make_harness, tmp_path):
    path = tmp_path / "usage.jsonl"

    async def script(session, prompt, turn):
        session.usage(40, output=10)
        return TurnResult(TurnStatus.COMPLETED)

    h = make_harness(
        [make_issue(1)], script=script, front="agent:\n  max_turns: 1\n", usage=UsageLedger(path)
    )
    await h.start()
    await h.settle()
    await h.orch.shutdown()
    ledger = UsageLedger(path)
    loaded = ledger.open()
    ledger.close()
    assert loaded.tokens.total_tokens == 40 and loaded.by_issue["id-1"].runs >= 1


async def test_a_resumed_thread_is_counted_once_across_a_crash(make_harness, tmp_path):
    """Codex reports the thread's running total: 120 before ``kill -9``, 180 after the new
    scheduler resumed the same thread. The project, the issue, the budget's view and the
    ledger file all read 180, not 120 + 180."""
    path = tmp_path / "state" / "usage.jsonl"
    forever = asyncio.Event()

    async def first_turn(session, prompt, turn):
        session.usage(120, output=20)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=first_turn, usage=UsageLedger(path))
    await first.start()
    await first.advance(3.0)  # checkpointed, then abandoned: no turn end, no shutdown
    assert first.orch.snapshot().totals.total_tokens == 120
    assert first.orch.usage.wait_written()
    thread = first.backend.sessions[0].thread_id

    async def resumed(session, prompt, turn):
        session.usage(180, output=30)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    budget = "agent:\n  max_tokens_per_issue: 250\n"  # 120 + 180 would cross it
    second = make_harness([make_issue(1)], script=resumed, usage=UsageLedger(path), front=budget)
    await second.start()
    await second.settle()
    assert second.backend.sessions[0].thread_id == thread  # the same thread, resumed
    await second.advance(2.0)
    assert second.orch.snapshot().totals.total_tokens == 180
    assert second.orch.ledger.by_issue["id-1"].total_tokens == 180
    assert second.orch.running["id-1"].budget_reached is None
    assert second.orch.usage.wait_written()
    third = UsageLedger(path)
    loaded = third.open()
    assert loaded.tokens.total_tokens == 180
    assert loaded.by_issue["id-1"].tokens.output_tokens == 30
    third.close()
    first.orch.usage.close()
    await second.orch.shutdown()


def test_session_totals_survive_compaction_and_keep_only_the_newest_sessions():
    book = UsageBook()
    for n in range(20):
        book.apply(
            RunUsage(
                f"r{n}", "id-1", "ABC-1", TokenUsage(total_tokens=1), 1.0, True,
                f"id-1:codex:t{n}", TokenUsage(total_tokens=100 + n),
            )
        )  # fmt: skip
    lines = book.compact(live=set())
    again = UsageBook()
    for line in lines:
        again.apply(decode(line))
    threads = again.per_issue()["id-1"].threads
    assert len(threads) == 16 and "id-1:codex:t0" not in threads
    assert threads["id-1:codex:t19"].total_tokens == 119
    assert again.per_issue()["id-1"].tokens.total_tokens == 20


async def test_a_resumed_thread_that_lost_its_unfinished_turn_is_not_counted_again(
    make_harness, tmp_path
):
    """The thread read 120 when the scheduler died; resumed, it reports 100 (its last
    saved total: the unfinished turn's usage is gone), then 150. Counted: 120 + 50."""
    from symphony_tui.domain import AgentEvent
    from symphony_tui.domain.payloads import TokenReport

    path = tmp_path / "state" / "usage.jsonl"
    forever = asyncio.Event()

    async def first_turn(session, prompt, turn):
        session.usage(120, output=20)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    first = make_harness([make_issue(1)], script=first_turn, usage=UsageLedger(path))
    await first.start()
    await first.advance(3.0)
    assert first.orch.usage.wait_written()

    async def resumed(session, prompt, turn):
        restored = TokenUsage(input_tokens=90, output_tokens=10, total_tokens=100)
        session.host.emit(
            AgentEvent(
                kind=EventKind.TOKEN_USAGE, payload=TokenReport(usage=restored, attached=True)
            )
        )
        session.usage(150, output=25)
        await forever.wait()
        return TurnResult(TurnStatus.COMPLETED)

    second = make_harness([make_issue(1)], script=resumed, usage=UsageLedger(path))
    await second.start()
    await second.settle()
    await second.advance(2.0)
    assert second.orch.snapshot().totals.total_tokens == 170
    assert second.orch.ledger.by_issue["id-1"].total_tokens == 170
    first.orch.usage.close()
    await second.orch.shutdown()
