"""The token pane and worker detail show spend in money: priced, "unknown model" (never
$0.00) and nothing for a run without a usage report (its tokens line says so)."""

from __future__ import annotations

from symphony_tui.console.screens.worker import worker_header
from symphony_tui.console.tones import Tones
from symphony_tui.console.widgets.tokens import per_worker_text, totals_text
from symphony_tui.domain import TokenUsage
from tests.console.sample import NOW, sample_snapshot


def _line(text: str, label: str) -> str:
    return next(line for line in text.split("\n") if line.startswith(label))


def test_the_token_pane_shows_the_spend_and_the_runs_of_an_unknown_model():
    snap = sample_snapshot()
    first, *rest = snap.running
    priced = first.model_copy(update={"spend_usd": 1.234, "spend": "priced"})
    unknown = rest[0].model_copy(update={"spend": "unknown model"})
    snap = snap.model_copy(
        update={
            "running": (priced, unknown, *rest[1:]),
            "totals": snap.totals.model_copy(update={"cost_usd": 3.5}),
            "runs_unpriced": 2,
        }
    )
    plain = totals_text(snap, Tones()).plain
    assert _line(plain, "spend") == "spend     $3.50 (2 runs of an unknown model)"
    workers = per_worker_text(snap, Tones()).plain
    assert f"{priced.issue_identifier}" in workers and "$1.23" in workers and "$?" in workers
    nothing_priced = snap.model_copy(update={"totals": TokenUsage(total_tokens=5)})
    assert _line(totals_text(nothing_priced, Tones()).plain, "spend").startswith("spend     -")
    assert "spend" not in totals_text(sample_snapshot(), Tones()).plain


def test_worker_detail_shows_the_runs_spend_or_that_its_model_has_no_price():
    snap = sample_snapshot()
    first, *rest = snap.running
    row = first.model_copy(
        update={
            "spend_usd": 0.0042,
            "turn_spend_usd": 0.001,
            "model": "gpt-5.1-codex",
            "issue_total_tokens": first.tokens.total_tokens + 10,
            "issue_spend_usd": 2.5,
            "issue_runs_unpriced": 1,
        }
    )
    plain = worker_header(snap.model_copy(update={"running": (row, *rest)}), row.issue_id,
                          NOW, Tones()).plain  # fmt: skip
    assert _line(plain, "spend") == "spend $0.0042  (this turn $0.0010)  model gpt-5.1-codex"
    assert _line(plain, "issue total").endswith(", $2.50 (1 run of an unknown model)")
    unknown = first.model_copy(update={"spend": "unknown model", "model": "mystery"})
    plain = worker_header(snap.model_copy(update={"running": (unknown, *rest)}),
                          row.issue_id, NOW, Tones()).plain  # fmt: skip
    assert _line(plain, "spend") == "spend unknown: no price for this model  model mystery"
    silent = unknown.model_copy(update={"usage_reported": False, "tokens": TokenUsage()})
    plain = worker_header(snap.model_copy(update={"running": (silent, *rest)}),
                          row.issue_id, NOW, Tones()).plain  # fmt: skip
    assert "spend" not in plain and "none reported yet" in plain
