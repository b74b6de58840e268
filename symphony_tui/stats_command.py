"""``symphony-tui stats [WORKFLOW.md] [--since 7d] [--json]``: what the project's runs did
and cost over a period.

Sources, both in the project's state folder (``symphony-tui paths``):

* the event history (``events.jsonl`` and its rotated backups ``.1`` ... ``.5``): each
  ``run_ended`` event since the period's start is one run, with its outcome, running
  seconds, model, tokens and spend (``domain/payloads.py`` ``RunEnded``). A run ending
  ``normal`` succeeded; an issue succeeded when one of its runs did. Runs whose event was
  written before these fields existed count as runs, without time or usage.
* the usage ledger (``usage.jsonl``, ``scheduler/usage/ledger.py``): the all-time totals per
  issue, which also hold runs a crash ended before their ``run_ended`` was written.

Spend is in US dollars as priced when each run was counted (``config/pricing.py``): runs of
an unknown model and runs whose backend reported no usage are counted as such, never as
free. Reads only; a missing file is an empty one. Bad input (an unloadable workflow, a bad
``--since``) is one line on stderr and exit 1.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

#: Rotated history files read after ``events.jsonl`` (event_file.BACKUPS).
HISTORY_BACKUPS = 5
DEFAULT_SINCE = "7d"
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: datetime) -> datetime | None:
    """``7d`` / ``24h`` / ``30m`` / ``2w`` before ``now``, an ISO date or time (UTC when it
    names no zone), or ``all`` (None: no bound; a span reaching before the year 1 is all
    too). Raises ``ValueError`` (one line)."""
    value = text.strip().lower()
    if value == "all":
        return None
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([mhdw])", value)
    if found:
        try:
            return now - timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])
        except OverflowError:
            return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give a span such as 7d, 24h, 30m, 2w, a date (2026-05-01) or all"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class EndedRun:
    """One ``run_ended`` event: when, which issue, how, and what it used (None: unknown)."""

    at: datetime
    issue_id: str
    identifier: str
    outcome: str
    seconds: float | None = None
    tokens: int | None = None
    spend: str | None = None
    spend_usd: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome == "normal"


def history_files(events: Path) -> list[Path]:
    """``events.jsonl`` and its rotated backups that exist, oldest first."""
    found = [events.with_name(f"{events.name}.{n}") for n in range(HISTORY_BACKUPS, 0, -1)]
    found.append(events)
    return [p for p in found if p.is_file()]


def read_runs(files: Iterable[Path], since: datetime | None) -> tuple[list[EndedRun], int]:
    """The ``run_ended`` events of ``files`` at or after ``since``, and how many lines were
    skipped as unreadable. Lines are matched cheaply before they are parsed."""
    runs: list[EndedRun] = []
    skipped = 0
    for path in files:
        try:
            handle = path.open("rb")
        except OSError:
            continue
        with handle:
            for line in handle:
                if b'"run_ended"' not in line:
                    continue
                try:
                    run = _ended_run(json.loads(line))
                except (ValueError, TypeError, KeyError):
                    skipped += 1
                    continue
                if run is not None and (since is None or run.at >= since):
                    runs.append(run)
    return runs, skipped


def _ended_run(data: Any) -> EndedRun | None:
    if not isinstance(data, dict) or data.get("kind") != "run_ended":
        return None
    payload = data.get("payload")
    if not isinstance(payload, dict):
        return None
    at = datetime.fromisoformat(str(data["at"]))
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    tokens = payload.get("tokens")
    total = tokens.get("total_tokens") if isinstance(tokens, dict) else None
    return EndedRun(
        at=at,
        issue_id=str(data.get("issue_id") or data.get("issue_identifier") or "?"),
        identifier=str(data.get("issue_identifier") or data.get("issue_id") or "?"),
        outcome=str(payload.get("outcome") or ""),
        seconds=_number(payload.get("seconds")),
        tokens=int(total) if _number(total) is not None and isinstance(total, int) else None,
        spend=payload.get("spend") if isinstance(payload.get("spend"), str) else None,
        spend_usd=_number(payload.get("spend_usd")),
    )


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number >= 0 (seconds, tokens, dollars)."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    ):
        return float(value)
    return None


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class _Issue:
    identifier: str
    runs: int = 0
    succeeded: int = 0
    tokens: int = 0
    spend_usd: float = 0.0
    priced: int = 0
    seconds: float = 0.0
    not_reported: int = 0
    unpriced: int = 0


@dataclass
class _Sums:
    issues: dict[str, _Issue] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)
    tokens: int = 0
    spend_usd: float = 0.0
    priced: int = 0
    not_reported: int = 0
    unpriced: int = 0
    unrecorded: int = 0


def summarize(
    runs: list[EndedRun], ledger: dict[str, Any] | None, since: datetime | None, now: datetime
) -> dict[str, Any]:
    """The stats body (the ``--json`` output): the period, its runs, success rate, run time
    percentiles, tokens and spend per issue and per succeeded issue, a row per issue, and
    the ledger's all-time totals (``ledger``: :func:`ledger_totals`, None without one)."""
    sums = _Sums()
    for run in sorted(runs, key=lambda r: r.at):
        issue = sums.issues.setdefault(run.issue_id, _Issue(run.identifier))
        issue.identifier = run.identifier
        issue.runs += 1
        issue.succeeded += run.succeeded
        if run.seconds is not None:
            sums.durations.append(run.seconds)
            issue.seconds += run.seconds
        if run.spend is None and run.tokens is None:
            sums.unrecorded += 1
        elif run.spend == "not reported" or run.tokens is None:
            sums.not_reported += 1
            issue.not_reported += 1
        else:
            sums.tokens += run.tokens
            issue.tokens += run.tokens
            if run.spend_usd is not None:
                sums.spend_usd += run.spend_usd
                sums.priced += 1
                issue.spend_usd += run.spend_usd
                issue.priced += 1
            else:
                sums.unpriced += 1
                issue.unpriced += 1
    count = sum(i.runs for i in sums.issues.values())
    succeeded_runs = sum(i.succeeded for i in sums.issues.values())
    succeeded_issues = sum(1 for i in sums.issues.values() if i.succeeded)
    spend = round(sums.spend_usd, 6) if sums.priced else None
    return {
        "period": {
            "since": since.isoformat() if since else None,
            "until": now.isoformat(),
        },
        "runs": count,
        "succeeded_runs": succeeded_runs,
        "success_rate": round(succeeded_runs / count, 4) if count else None,
        "run_seconds": {
            "p50": percentile(sums.durations, 0.5),
            "p95": percentile(sums.durations, 0.95),
        },
        "issues": len(sums.issues),
        "succeeded_issues": succeeded_issues,
        "tokens": {
            "total": sums.tokens,
            "per_issue": _per(sums.tokens, len(sums.issues)),
            "per_succeeded_issue": _per(sums.tokens, succeeded_issues),
        },
        "spend_usd": {
            "total": spend,
            "per_issue": _per(spend, len(sums.issues)),
            "per_succeeded_issue": _per(spend, succeeded_issues),
        },
        "runs_not_reported": sums.not_reported,
        "runs_unpriced": sums.unpriced,
        "runs_without_usage": sums.unrecorded,
        "by_issue": [
            {
                "issue_identifier": i.identifier,
                "runs": i.runs,
                "succeeded_runs": i.succeeded,
                "seconds": round(i.seconds, 3),
                "tokens": i.tokens,
                "spend_usd": round(i.spend_usd, 6) if i.priced else None,
                "runs_not_reported": i.not_reported,
                "runs_unpriced": i.unpriced,
            }
            for i in sorted(sums.issues.values(), key=lambda i: (-i.spend_usd, -i.tokens))
        ],
        "all_time": ledger,
    }


def _per(total: float | None, count: int) -> float | None:
    if total is None or not count:
        return None
    return round(total / count, 6) if isinstance(total, float) else round(total / count, 1)


def ledger_totals(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The usage ledger's all-time totals (None when there is no ledger) and its warning."""
    from symphony_tui.scheduler.usage.ledger import read_ledger

    if not path.is_file():
        return None, None
    book, warning = read_ledger(path)
    per_issue = book.per_issue()
    tokens = sum(u.tokens.total_tokens for u in per_issue.values())
    costs = [u.tokens.cost_usd for u in per_issue.values() if u.tokens.cost_usd is not None]
    return {
        "issues": len(per_issue),
        "runs": sum(u.runs for u in per_issue.values()),
        "tokens": tokens,
        "spend_usd": round(sum(costs), 6) if costs else None,
        "seconds": round(sum(u.seconds for u in per_issue.values()), 3),
        "runs_not_reported": sum(u.unreported for u in per_issue.values()),
        "runs_unpriced": sum(u.unpriced for u in per_issue.values()),
    }, warning


# --------------------------------------------------------------------------- text


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.4f}" if 0 < value < 0.01 else f"${value:,.2f}"


def _runs(count: int) -> str:
    return f"{count:,} run" if count == 1 else f"{count:,} runs"


def _issue_spend(row: dict[str, Any]) -> str:
    """An issue's spend cell: dollars, ``+unknown`` when some runs had no price or no usage
    report, ``unknown`` when none was priced."""
    unknown = row["runs_unpriced"] or row["runs_not_reported"]
    if row["spend_usd"] is None:
        return "unknown" if unknown else "-"
    return _usd(row["spend_usd"]) + (" +unknown" if unknown else "")


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def render_text(body: dict[str, Any]) -> Iterator[str]:
    """The stats body as lines of text: a summary, then a table per issue."""
    period = body["period"]
    since = period["since"][:16].replace("T", " ") if period["since"] else "the first run"
    yield f"since {since} (UTC)"
    if not body["runs"]:
        yield "no runs ended in this period yet"
    else:
        rate = body["success_rate"]
        yield (
            f"runs        {body['runs']:,}, {body['succeeded_runs']:,} succeeded "
            f"({rate * 100:.0f}%), over {body['issues']:,} issues "
            f"({body['succeeded_issues']:,} succeeded)"
        )
        times = body["run_seconds"]
        yield f"run time    p50 {_duration(times['p50'])}, p95 {_duration(times['p95'])}"
        tokens, spend = body["tokens"], body["spend_usd"]
        yield (
            f"tokens      {_count(tokens['total'])} total, {_count(tokens['per_issue'])} per "
            f"issue, {_count(tokens['per_succeeded_issue'])} per succeeded issue"
        )
        yield (
            f"spend       {_usd(spend['total'])} total, {_usd(spend['per_issue'])} per issue, "
            f"{_usd(spend['per_succeeded_issue'])} per succeeded issue"
        )
        caveats = []
        if body["runs_unpriced"]:
            caveats.append(f"{_runs(body['runs_unpriced'])} of an unknown model (no price)")
        if body["runs_not_reported"]:
            caveats.append(f"{_runs(body['runs_not_reported'])} not reported")
        if body["runs_without_usage"]:
            caveats.append(f"{_runs(body['runs_without_usage'])} recorded without usage")
        if caveats:
            yield f"not priced  {'; '.join(caveats)}: their spend is unknown, not zero"
        yield ""
        header = ("issue", "runs", "ok", "time", "tokens", "spend")
        rows = [header] + [
            (
                i["issue_identifier"],
                f"{i['runs']:,}",
                f"{i['succeeded_runs']:,}",
                _duration(i["seconds"]),
                f"{i['tokens']:,}",
                _issue_spend(i),
            )
            for i in body["by_issue"]
        ]
        widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
        for row in rows:
            cells = [row[0].ljust(widths[0])] + [
                cell.rjust(widths[c + 1]) for c, cell in enumerate(row[1:])
            ]
            yield "  ".join(cells).rstrip()
    ledger = body["all_time"]
    if ledger is not None:
        yield ""
        yield (
            f"all time    {_runs(ledger['runs'])} over {ledger['issues']:,} issues, "
            f"{_count(ledger['tokens'])} tokens, {_usd(ledger['spend_usd'])}"
            + (f" ({_runs(ledger['runs_unpriced'])} unpriced)" if ledger["runs_unpriced"] else "")
            + (
                f" ({_runs(ledger['runs_not_reported'])} not reported)"
                if ledger["runs_not_reported"]
                else ""
            )
        )


# --------------------------------------------------------------------------- command


def run_stats(
    workflow: str | None,
    *,
    since: str = DEFAULT_SINCE,
    as_json: bool = False,
    state_dir: Path | None = None,
    now: datetime | None = None,
    out: TextIO | None = None,
) -> int:
    """The command: load the workflow (for its project), read the history and ledger, print.
    ``state_dir`` replaces the platformdirs user state folder (tests)."""
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.workflow import load_workflow
    from symphony_tui.paths import EVENTS_FILE_NAME, project_state_dir, resolve_workflow_path
    from symphony_tui.scheduler.project_lock import project_key_for
    from symphony_tui.scheduler.usage.ledger import USAGE_FILE_NAME

    out = out or sys.stdout
    now = now or datetime.now(UTC)
    try:
        start = parse_since(since, now)
    except ValueError as exc:
        return _fail(str(exc))
    path = resolve_workflow_path(workflow)
    try:
        settings = load_workflow(path).settings
    except WorkflowError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"missing_workflow_file: {path}: {exc.strerror or exc}")
    folder = project_state_dir(project_key_for(settings), state_dir)
    try:
        runs, skipped = read_runs(history_files(folder / EVENTS_FILE_NAME), start)
        ledger, warning = ledger_totals(folder / USAGE_FILE_NAME)
    except OSError as exc:
        return _fail(f"cannot read the project's history: {exc}")
    body = summarize(runs, ledger, start, now)
    if as_json:
        out.write(json.dumps(body) + "\n")
    else:
        for line in render_text(body):
            out.write(line + "\n")
    for note in (warning, f"{skipped:,} unreadable history lines skipped" if skipped else None):
        if note:
            print(f"symphony-tui: stats: {note}", file=sys.stderr)
    return 0


def _fail(message: str) -> int:
    print(f"symphony-tui: stats: {message}", file=sys.stderr)
    return 1
