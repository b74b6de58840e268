"""The usage ledger's records and their fold (pure: no I/O, no clock).

A ledger file is JSON Lines, one record per line, each a high-water mark, never a delta, so
reading a record twice or losing the newest one never double counts:

* ``{"kind": "run", "run": <run id>, "issue_id", "issue_identifier", "tokens": {...},
  "seconds": <float>, "ended": <bool>, "thread"?: <session key>, "thread_tokens"?: {...},
  "reported"?: false, "carried"?: {...}}``:
  what one run (one dispatch of an issue) has counted so far, cumulative: its token growth
  (:class:`~symphony_tui.domain.TokenUsage` fields) and its running time in seconds. A later
  record of the same run replaces the earlier one. ``thread_tokens`` is the session's
  absolute running total (what the backend last reported) at the moment ``tokens`` was
  counted: the two are written in one record, so a resumed thread is counted from exactly
  where this process stopped counting (``docs/protocols.md`` "Token usage").
  ``"reported": false`` marks a run that started a turn without its backend reporting any
  usage: its zero ``tokens`` measure nothing (``scheduler/usage/tokens.py``); absent means measured.
  ``carried`` is what earlier processes counted for the same run before a restart re-adopted
  it (their own records hold it; ``tokens`` never does): the whole run is ``tokens`` plus
  ``carried``.
* ``{"kind": "issue", "issue_id", "issue_identifier", "tokens": {...}, "seconds", "runs",
  "threads"?: {<session key>: {...}}, "unreported"?: <runs>, "unpriced"?: <runs>}``: the
  folded sum of an issue's finished runs, the last absolute totals of its newest sessions,
  how many of the runs had no usage report and how many had tokens without a price
  (written by compaction). A later one replaces the earlier one.

Money: ``tokens.cost_usd`` is what the counted tokens cost in US dollars (priced by
``config/pricing.py`` as they were counted, or as the backend reported it), cumulative like
the counts, so a re-read or resumed run never pays twice. A measured run with tokens and
no ``cost_usd`` had no price (an unknown model): its cost is unknown, not zero.

An issue's usage is its ``issue`` record plus each of its ``run`` records' latest values.
Readers ignore members they do not know, so the optional ones are still version 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.domain import TokenUsage

#: Record format version, written in every record as ``"v"``.
VERSION = 1
#: Sessions whose last totals an issue record keeps (the newest; older ones are not resumed).
THREADS_PER_ISSUE = 16


@dataclass(frozen=True)
class IssueUsage:
    """What an issue used over all its runs: tokens and running seconds (>= 0)."""

    issue_id: str
    issue_identifier: str
    tokens: TokenUsage = field(default_factory=TokenUsage)
    seconds: float = 0.0
    runs: int = 0
    #: Session key -> the session's last absolute totals, oldest first.
    threads: dict[str, TokenUsage] = field(default_factory=dict)
    #: How many of the ``runs`` had no usage report (their tokens are not in ``tokens``).
    unreported: int = 0
    #: How many of the ``runs`` had tokens without a price (``tokens.cost_usd`` lacks them).
    unpriced: int = 0


@dataclass(frozen=True)
class RunUsage:
    """The newest high-water mark of one run (see the module doc)."""

    run: str
    issue_id: str
    issue_identifier: str
    tokens: TokenUsage
    seconds: float
    ended: bool = False
    #: The session key counted (``session_events.session_key``) and its absolute totals.
    thread: str | None = None
    thread_tokens: TokenUsage | None = None
    #: False: the run started a turn and its backend reported no usage (``tokens`` zeros).
    reported: bool = True
    #: What earlier processes counted for this run (a re-adopted run); not in ``tokens``.
    carried: TokenUsage | None = None

    @property
    def whole(self) -> TokenUsage:
        """The whole run's tokens: its own growth plus what it carried over."""
        return self.tokens if self.carried is None else self.carried + self.tokens

    @property
    def unpriced(self) -> bool:
        """Measured tokens without a price (an unknown model): the cost is unknown."""
        return self.reported and self.tokens.total_tokens > 0 and self.tokens.cost_usd is None


def encode_run(r: RunUsage) -> bytes:
    """One ``run`` record as a JSON line (UTF-8, ending in a newline)."""
    record = {
        "v": VERSION,
        "kind": "run",
        "run": r.run,
        "issue_id": r.issue_id,
        "issue_identifier": r.issue_identifier,
        "tokens": _tokens_json(r.tokens),
        "seconds": round(r.seconds, 3),
        "ended": r.ended,
    }
    if r.thread is not None and r.thread_tokens is not None:
        record["thread"] = r.thread
        record["thread_tokens"] = _tokens_json(r.thread_tokens)
    if not r.reported:
        record["reported"] = False
    if r.carried is not None:
        record["carried"] = _tokens_json(r.carried)
    return _line(record)


def encode_issue(u: IssueUsage) -> bytes:
    """One ``issue`` record (a compacted sum) as a JSON line."""
    record = {
        "v": VERSION,
        "kind": "issue",
        "issue_id": u.issue_id,
        "issue_identifier": u.issue_identifier,
        "tokens": _tokens_json(u.tokens),
        "seconds": round(u.seconds, 3),
        "runs": u.runs,
    }
    if u.threads:
        record["threads"] = {key: _tokens_json(t) for key, t in u.threads.items()}
    if u.unreported:
        record["unreported"] = u.unreported
    if u.unpriced:
        record["unpriced"] = u.unpriced
    return _line(record)


def decode(line: bytes) -> RunUsage | IssueUsage:
    """Parse one line. Raises ``ValueError`` (with a short reason) for anything that is not a
    record this version wrote."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    issue_id = record.get("issue_id")
    identifier = record.get("issue_identifier")
    if not isinstance(issue_id, str) or not issue_id or not isinstance(identifier, str):
        raise ValueError("no issue_id / issue_identifier")
    seconds = record.get("seconds")
    if (
        not isinstance(seconds, int | float)
        or isinstance(seconds, bool)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise ValueError("seconds is not a number >= 0")
    tokens = _tokens_from_json(record.get("tokens"))
    kind = record.get("kind")
    if kind == "run":
        run = record.get("run")
        if not isinstance(run, str) or not run:
            raise ValueError("run record without a run id")
        thread = record.get("thread")
        thread_tokens = None
        if isinstance(thread, str) and thread:
            thread_tokens = _tokens_from_json(record.get("thread_tokens"))
        else:
            thread = None
        carried = record.get("carried")
        return RunUsage(
            run,
            issue_id,
            identifier,
            tokens,
            float(seconds),
            record.get("ended") is True,
            thread,
            thread_tokens,
            record.get("reported") is not False,
            _tokens_from_json(carried) if isinstance(carried, dict) else None,
        )
    if kind == "issue":
        runs = record.get("runs")
        count = runs if isinstance(runs, int) and not isinstance(runs, bool) and runs >= 0 else 0
        raw_threads = record.get("threads")
        threads = {}
        if isinstance(raw_threads, dict):
            for key, raw in raw_threads.items():
                if isinstance(key, str) and key:
                    threads[key] = _tokens_from_json(raw)
        raw_unreported = record.get("unreported")
        unreported = (
            min(raw_unreported, count)
            if isinstance(raw_unreported, int)
            and not isinstance(raw_unreported, bool)
            and raw_unreported > 0
            else 0
        )
        raw_unpriced = record.get("unpriced")
        unpriced = (
            min(raw_unpriced, count)
            if isinstance(raw_unpriced, int)
            and not isinstance(raw_unpriced, bool)
            and raw_unpriced > 0
            else 0
        )
        return IssueUsage(
            issue_id, identifier, tokens, float(seconds), count, threads, unreported, unpriced
        )
    raise ValueError(f"unknown record kind {kind!r}")


class UsageBook:
    """The fold of a ledger's records: the latest ``issue`` record per issue and the latest
    record per run. Not thread-safe: one owner (the ledger's writer thread, or the loader)."""

    def __init__(self) -> None:
        self.bases: dict[str, IssueUsage] = {}
        self.runs: dict[str, RunUsage] = {}

    def apply(self, record: RunUsage | IssueUsage) -> None:
        if isinstance(record, RunUsage):
            self.runs[record.run] = record
        else:
            self.bases[record.issue_id] = record

    def per_issue(self) -> dict[str, IssueUsage]:
        """Issue id -> its usage (the base plus every run's latest mark)."""
        return _fold(self.bases, self.runs.values())

    def compact(self, live: set[str]) -> list[bytes]:
        """Fold every run not in ``live`` (run ids still counting) into its issue's base and
        return the lines of an equivalent, shorter ledger (bases first, then live runs).
        The book itself is left folded the same way."""
        done = [r for run_id, r in self.runs.items() if run_id not in live]
        self.bases = _fold(self.bases, done)
        for r in done:
            del self.runs[r.run]
        lines = [encode_issue(u) for u in self.bases.values()]
        lines.extend(encode_run(r) for r in self.runs.values())
        return lines


def _fold(bases: dict[str, IssueUsage], runs: Iterable[RunUsage]) -> dict[str, IssueUsage]:
    """``bases`` plus ``runs`` per issue, summed in plain integers (thousands of records at
    start-up: one model per issue, not one per addition)."""
    # issue id -> [identifier, 5 counts, cost, seconds, runs, runs not reported, unpriced]
    sums: dict[str, list[Any]] = {}
    threads: dict[str, dict[str, TokenUsage]] = {}  # issue id -> session key -> totals

    def add(
        issue_id: str,
        identifier: str,
        t: TokenUsage,
        seconds: float,
        runs: int,
        unreported: int,
        unpriced: int,
    ) -> None:
        acc = sums.get(issue_id)
        if acc is None:
            acc = sums[issue_id] = [identifier, 0, 0, 0, 0, 0, None, 0.0, 0, 0, 0]
        acc[0] = identifier or acc[0]
        acc[1] += t.input_tokens
        acc[2] += t.cached_input_tokens
        acc[3] += t.output_tokens
        acc[4] += t.reasoning_tokens
        acc[5] += t.total_tokens
        if t.cost_usd is not None:
            acc[6] = (acc[6] or 0.0) + t.cost_usd
        acc[7] += seconds
        acc[8] += runs
        acc[9] += unreported
        acc[10] += unpriced

    def mark(issue_id: str, key: str, totals: TokenUsage) -> None:
        marks = threads.setdefault(issue_id, {})
        marks.pop(key, None)  # the newest mark last
        marks[key] = totals
        if len(marks) > THREADS_PER_ISSUE:
            del marks[next(iter(marks))]

    for b in bases.values():
        add(b.issue_id, b.issue_identifier, b.tokens, b.seconds, b.runs, b.unreported, b.unpriced)
        for key, totals in b.threads.items():
            mark(b.issue_id, key, totals)
    for r in runs:
        add(
            r.issue_id,
            r.issue_identifier,
            r.tokens,
            r.seconds,
            1,
            0 if r.reported else 1,
            1 if r.unpriced else 0,
        )
        if r.thread is not None and r.thread_tokens is not None:
            mark(r.issue_id, r.thread, r.thread_tokens)
    return {
        issue_id: IssueUsage(
            issue_id,
            a[0],
            TokenUsage(
                input_tokens=a[1],
                cached_input_tokens=a[2],
                output_tokens=a[3],
                reasoning_tokens=a[4],
                total_tokens=a[5],
                cost_usd=a[6],
            ),
            a[7],
            a[8],
            threads.get(issue_id, {}),
            a[9],
            a[10],
        )
        for issue_id, a in sums.items()
    }


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _tokens_json(t: TokenUsage) -> dict[str, Any]:
    data: dict[str, Any] = t.model_dump()
    if data.get("cost_usd") is None:
        data.pop("cost_usd", None)
    return data


_COUNTS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "total_tokens",
)


def _tokens_from_json(raw: Any) -> TokenUsage:
    if not isinstance(raw, dict):
        raise ValueError("tokens is not an object")
    counts: dict[str, Any] = {}
    for name in _COUNTS:
        value = raw.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"tokens.{name} is not a count")
        if value < 0:
            raise ValueError(f"tokens.{name} is a negative count")
        counts[name] = value
    cost = raw.get("cost_usd")
    if cost is not None and (
        not isinstance(cost, int | float)
        or isinstance(cost, bool)
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise ValueError("tokens.cost_usd is not a number >= 0")
    # Checked above, field by field: no second validation pass (start-up reads thousands).
    return TokenUsage.model_construct(**counts, cost_usd=None if cost is None else float(cost))
