"""The token pane and worker detail say "not reported" where a finished run's backend
reported no usage and "none yet" for a live run without a report, never 0 as if measured,
and count the finished ones beside the totals."""

from __future__ import annotations

from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.tokens import per_worker_text, totals_text
from symphony_tui.console.widgets.workers import worker_rows
from symphony_tui.domain import Snapshot, TokenUsage
from tests.console.sample import NOW, sample_snapshot


def _with_unreported_run(snap: Snapshot, **changes) -> Snapshot:
    first, *rest = snap.running
    silent = first.model_copy(update={"usage_reported": False, "tokens": TokenUsage()})
    return snap.model_copy(update={"running": (silent, *rest), **changes})


def _line(text: str, label: str) -> str:
    return next(line for line in text.split("\n") if line.startswith(label))


def test_the_token_pane_counts_runs_not_reported_beside_the_total():
    snap = _with_unreported_run(sample_snapshot(), runs_not_reported=2)
    total = snap.totals.total_tokens
    plain = totals_text(snap, Tones()).plain
    # two finished runs had no report; the live one may still report
    assert _line(plain, "total") == f"total     {total:,} (2 runs not reported)"
    measured = sample_snapshot()
    assert "not reported" not in totals_text(measured, Tones()).plain


def test_the_token_pane_shows_no_zeros_while_nothing_was_measured():
    snap = _with_unreported_run(sample_snapshot(), totals=TokenUsage(), runs_not_reported=0)
    snap = snap.model_copy(update={"running": snap.running[:1]})
    plain = totals_text(snap, Tones()).plain
    assert _line(plain, "input") == "input     -"
    assert _line(plain, "total") == "total     -"  # a live run, no report yet
    finished = snap.model_copy(update={"running": (), "runs_not_reported": 1})
    assert (
        _line(totals_text(finished, Tones()).plain, "total") == "total     - (1 run not reported)"
    )
    nothing_ran = Snapshot(generated_at=NOW)
    assert _line(totals_text(nothing_ran, Tones()).plain, "total") == "total     0"


def test_per_worker_tokens_say_none_yet_last():
    snap = _with_unreported_run(sample_snapshot())
    lines = per_worker_text(snap, Tones()).plain.split("\n")
    assert lines[0].startswith("DEMO-3") and "8.9k" in lines[0]
    assert lines[-1].startswith("DEMO-1") and lines[-1].endswith("- none yet")


def test_worker_detail_says_none_reported_yet_and_that_a_budget_cannot_trip_on_it():
    snap = _with_unreported_run(sample_snapshot())
    row = snap.running[0]
    plain = worker_header(snap, row.issue_id, NOW, Tones()).plain
    tokens = _line(plain, "tokens")
    assert tokens == (
        "tokens none reported yet  (a token budget cannot trip on this run until they are)"
    )
    assert "in 0" not in plain


def test_worker_detail_shows_the_issue_total_with_its_runs_not_reported():
    snap = sample_snapshot()
    first, *rest = snap.running
    row = first.model_copy(update={"issue_total_tokens": 52_345, "issue_runs_not_reported": 2})
    snap = snap.model_copy(update={"running": (row, *rest)})
    plain = worker_header(snap, row.issue_id, NOW, Tones()).plain
    assert _line(plain, "issue total") == "issue total 52,345 tokens (2 runs not reported)"
    # a first run of an issue: its own tokens are the issue's, no second line
    same = first.model_copy(update={"issue_total_tokens": first.tokens.total_tokens})
    snap = snap.model_copy(update={"running": (same, *rest)})
    assert "issue total" not in worker_header(snap, row.issue_id, NOW, Tones()).plain


def test_worker_detail_of_a_last_run_without_a_report():
    snap = sample_snapshot()
    last = next(w for w in snap.recovered if w.issue_id == "demo-9")
    silent = last.model_copy(update={"usage_reported": False})
    snap = snap.model_copy(
        update={"recovered": tuple(silent if w is last else w for w in snap.recovered)}
    )
    plain = worker_header(snap, "demo-9", NOW, Tones()).plain
    assert "tokens not reported" in plain


def test_the_workers_table_shows_a_dash_not_zero_for_a_run_without_a_report():
    snap = _with_unreported_run(sample_snapshot())
    silent, measured = snap.running[0], snap.running[1]
    rows = dict(worker_rows(snap, NOW, Tones()))
    tokens_cell = 6  # pending, issue, status, turn, attempt, age, tokens, last event
    assert rows[silent.issue_id][tokens_cell].plain == "-"
    assert rows[measured.issue_id][tokens_cell].plain not in ("-", "0")
    launching = measured.model_copy(update={"tokens": TokenUsage()})  # no turn yet
    snap = snap.model_copy(update={"running": (silent, launching)})
    assert dict(worker_rows(snap, NOW, Tones()))[launching.issue_id][tokens_cell].plain == "-"
