"""``symphony-tui stats``: runs, success rate, run time, tokens and spend over a period, from
a fixture event history and usage ledger (symphony_tui/stats_command.py)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from symphony_tui.cli import main
from symphony_tui.config.workflow import load_workflow
from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import RunEnded
from symphony_tui.paths import project_state_dir
from symphony_tui.scheduler.project_lock import project_key_for
from symphony_tui.scheduler.usage.book import RunUsage, encode_run
from symphony_tui.stats_command import parse_since, percentile, run_stats

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)


def _workflow(tmp_path: Path) -> Path:
    (tmp_path / "issues.yaml").write_text("issues: []\n")
    path = tmp_path / "WORKFLOW.md"
    path.write_text("---\ntracker:\n  kind: local\n  path: issues.yaml\n---\nWork\n")
    return path


def _folder(path: Path, state: Path) -> Path:
    folder = project_state_dir(project_key_for(load_workflow(path).settings), state)
    folder.mkdir(parents=True)
    return folder


def _ended(days_ago: float, ident: str, outcome: str, **usage) -> str:
    tokens = usage.pop("tokens", None)
    event = AgentEvent(
        kind=EventKind.RUN_ENDED,
        message=f"{ident} ended",
        issue_id=f"id-{ident}",
        issue_identifier=ident,
        at=NOW - timedelta(days=days_ago),
        payload=RunEnded(
            outcome=outcome,
            status="succeeded" if outcome == "normal" else "failed",
            tokens=TokenUsage(total_tokens=tokens) if tokens is not None else None,
            **usage,
        ),
    )
    return event.model_dump_json() + "\n"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    path = _workflow(tmp_path)
    state = tmp_path / "state"
    folder = _folder(path, state)
    # the rotated backup holds the oldest events; one is outside the 7-day period
    (folder / "events.jsonl.1").write_text(
        _ended(30, "ABC-9", "normal", seconds=10.0, tokens=1, spend="priced", spend_usd=9.0)
        + _ended(6, "ABC-1", "failed", seconds=100.0, tokens=1000, spend="priced", spend_usd=0.5)
    )
    (folder / "events.jsonl").write_text(
        '{"kind": "message", "message": "run_ended is only a word here"}\n'
        + _ended(5, "ABC-1", "normal", seconds=300.0, tokens=3000, spend="priced", spend_usd=1.5)
        + _ended(4, "ABC-2", "normal", seconds=60.0, tokens=2000, spend="unknown model")
        + _ended(3, "ABC-3", "failed", seconds=20.0, spend="not reported")
        + _ended(2, "ABC-4", "cancelled")  # written before runs carried their usage
        + '{"kind": "run_ended", "at": "not a time", "payload": {}}\n'
    )
    ledger = [
        RunUsage("r1", "id-ABC-1", "ABC-1", TokenUsage(total_tokens=4000, cost_usd=2.0), 400, True),
        RunUsage("r2", "id-ABC-2", "ABC-2", TokenUsage(total_tokens=2000), 60, True),
        RunUsage("r3", "id-ABC-3", "ABC-3", TokenUsage(), 20, True, reported=False),
    ]
    (folder / "usage.jsonl").write_bytes(b"".join(encode_run(r) for r in ledger))
    return path, state


def _stats(project, *args, **kw) -> tuple[int, str]:
    path, state = project
    out = io.StringIO()
    code = run_stats(str(path), state_dir=state, now=NOW, out=out, **kw)
    return code, out.getvalue()


def test_json_counts_the_periods_runs_and_never_prices_unknown_usage_as_free(project, capsys):
    code, text = _stats(project, as_json=True)
    assert code == 0
    body = json.loads(text)
    assert body["runs"] == 5 and body["succeeded_runs"] == 2 and body["success_rate"] == 0.4
    assert body["issues"] == 4 and body["succeeded_issues"] == 2
    # nearest rank over 100, 300, 60, 20 seconds
    assert body["run_seconds"] == {"p50": 60.0, "p95": 300.0}
    assert body["tokens"] == {"total": 6000, "per_issue": 1500.0, "per_succeeded_issue": 3000.0}
    assert body["spend_usd"] == {"total": 2.0, "per_issue": 0.5, "per_succeeded_issue": 1.0}
    assert body["runs_unpriced"] == 1 and body["runs_not_reported"] == 1
    assert body["runs_without_usage"] == 1
    first = body["by_issue"][0]
    assert first["issue_identifier"] == "ABC-1" and first["spend_usd"] == 2.0
    unknown = next(i for i in body["by_issue"] if i["issue_identifier"] == "ABC-2")
    assert unknown["spend_usd"] is None and unknown["runs_unpriced"] == 1
    assert body["all_time"] == {
        "issues": 3, "runs": 3, "tokens": 6000, "spend_usd": 2.0, "seconds": 480.0,
        "runs_not_reported": 1, "runs_unpriced": 1,
    }  # fmt: skip
    assert "1 unreadable history lines skipped" in capsys.readouterr().err


def test_text_is_a_summary_and_a_row_per_issue(project):
    code, text = _stats(project)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "since 2026-05-13 12:00 (UTC)"
    assert "5, 2 succeeded (40%), over 4 issues (2 succeeded)" in lines[1]
    assert lines[2] == "run time    p50 1m00s, p95 5m00s"
    assert "$2.00 total, $0.50 per issue, $1.00 per succeeded issue" in text
    assert "1 run of an unknown model (no price); 1 run not reported" in text
    row = next(line for line in lines if line.startswith("ABC-1"))
    assert row.split() == ["ABC-1", "2", "1", "6m40s", "4,000", "$2.00"]
    assert next(line for line in lines if line.startswith("ABC-2")).endswith(" unknown")
    assert lines[-1].startswith("all time    3 runs over 3 issues, 6,000 tokens, $2.00")


def test_all_takes_the_whole_history(project):
    body = json.loads(_stats(project, as_json=True, since="all")[1])
    assert body["runs"] == 6 and body["spend_usd"]["total"] == 11.0


def test_a_folder_holding_the_workflow_names_it(project):
    path, state = project
    out = io.StringIO()
    assert run_stats(str(path.parent), state_dir=state, now=NOW, out=out, since="all") == 0
    assert out.getvalue() == _stats(project, since="all")[1]


def test_nothing_yet_is_one_clear_line(tmp_path: Path):
    path = _workflow(tmp_path)
    out = io.StringIO()
    assert run_stats(str(path), state_dir=tmp_path / "state", now=NOW, out=out) == 0
    assert out.getvalue().splitlines() == [
        "since 2026-05-13 12:00 (UTC)",
        "no runs ended in this period yet",
    ]


def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, capsys):
    path = _workflow(tmp_path)
    assert main(["stats", str(path), "--since", "lately"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("symphony-tui: stats: --since 'lately'") and "\n" not in err
    assert main(["stats", str(tmp_path / "missing.md")]) == 1
    assert "missing_workflow_file" in capsys.readouterr().err


def test_since_and_percentiles():
    assert parse_since("36h", NOW) == NOW - timedelta(hours=36)
    assert parse_since("2026-05-01", NOW) == datetime(2026, 5, 1, tzinfo=UTC)
    assert parse_since("all", NOW) is None
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0


def test_a_span_longer_than_the_calendar_is_the_whole_history(project):
    assert parse_since("99999999d", NOW) is None
    assert parse_since("1000000w", NOW) is None
    code, text = _stats(project, since="99999999999999999999d")
    assert code == 0 and text.splitlines()[0] == "since the first run (UTC)"


def test_a_negative_figure_in_the_history_is_no_figure(tmp_path: Path):
    path = _workflow(tmp_path)
    folder = _folder(path, tmp_path / "state")
    (folder / "events.jsonl").write_text(
        _ended(1, "ABC-1", "normal", seconds=10.0, tokens=100, spend="priced", spend_usd=1.0)
        + _ended(1, "ABC-2", "normal", seconds=-5.0, tokens=-7, spend="priced", spend_usd=-50.0)
    )
    out = io.StringIO()
    assert run_stats(str(path), state_dir=tmp_path / "state", now=NOW, as_json=True, out=out) == 0
    body = json.loads(out.getvalue())
    assert body["spend_usd"]["total"] == 1.0 and body["tokens"]["total"] == 100
    assert body["run_seconds"]["p50"] == 10.0
