"""Budgets of a run, in tokens (``agent.max_tokens_per_issue``, ``max_tokens_per_attempt``)
and in money (``agent.max_spend_per_issue_usd``, ``max_spend_per_attempt_usd``).

A run whose counted usage crosses a budget is held: its turn in flight is interrupted
(``Worker.interrupt_turn``), no further turn starts, and the row reads ``budget reached``
until the operator extends the budget (the ``extend_budget`` command, by a chosen number of
tokens and / or US dollars) or stops the run (``interrupt``: the issue is then held as a
stop does). Token limits count total tokens (input + output, as the token pane), money
limits the priced spend (``config/pricing.py``): per attempt, the run's own growth
(``Run.tokens``); per issue, everything counted for the issue, earlier attempts and earlier
processes included (``TokenLedger.by_issue``). An extension raises both allowances of its
kind for that issue; it is written to the workspace's run manifest (``run.budget_extra``,
``run.budget_extra_usd``) and read back on start (:meth:`Budgets.restore`), so a restart
does not hold the run again at once with the usage the ledger kept.

Usage a backend did not report (``scheduler/usage/tokens.py``) is unknown, not zero: a run
without a usage report has no per-attempt figure, so that budget cannot trip on it, and the
per-issue figure holds only the issue's measured runs, so runs without a report cannot trip
it by themselves (only measured usage can). The same holds for money and a run whose model
has no price (``unknown model``): its spend is unknown, so a money budget cannot hold it;
the scheduler says so once per run (``SchedulerState.check_budget``) and the console says so
beside such a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from symphony_tui.config.settings import AgentSettings
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.tokens import TokenLedger


@dataclass(frozen=True)
class Need:
    """The smallest extension that takes a run back under every budget: tokens and US
    dollars (0 where that kind is not over)."""

    tokens: int = 0
    usd: float = 0.0

    @property
    def none(self) -> bool:
        return self.tokens <= 0 and self.usd <= 0


def usd(amount: float) -> str:
    """``$1.23`` (cents; ``$0.0042`` below one cent, so a small spend never reads $0.00)."""
    if 0 < abs(amount) < 0.01:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"


class Budgets:
    """The extensions the operator granted (issue id -> tokens, issue id -> US dollars) and
    the budget test."""

    def __init__(self, ledger: TokenLedger) -> None:
        self._ledger = ledger
        self.extra: dict[str, int] = {}
        self.extra_usd: dict[str, float] = {}

    def over(self, run: Run, agent: AgentSettings) -> str | None:
        """Why ``run`` is over a budget (``"12,400 of 10,000 tokens per issue"``,
        ``"$2.31 of $2.00 per attempt"``), or None."""
        extra = self.extra.get(run.issue.id, 0)
        for (used, limit), what in zip(self._pairs(run, agent), ("attempt", "issue"), strict=True):
            if used is not None and limit is not None and used >= limit + extra:
                return f"{used:,} of {limit + extra:,} tokens per {what}"
        extra_usd = self.extra_usd.get(run.issue.id, 0.0)
        for (spent, cap), what in zip(self._money(run, agent), ("attempt", "issue"), strict=True):
            if spent is not None and cap is not None and spent >= cap + extra_usd:
                return f"{usd(spent)} of {usd(cap + extra_usd)} per {what}"
        return None

    def needed(self, run: Run, agent: AgentSettings) -> Need:
        """The smallest extension that takes ``run`` back under every budget."""
        extra = self.extra.get(run.issue.id, 0)
        tokens = 0
        for used, limit in self._pairs(run, agent):
            if used is not None and limit is not None:
                tokens = max(tokens, used + 1 - (limit + extra))
        extra_usd = self.extra_usd.get(run.issue.id, 0.0)
        money = 0.0
        for spent, cap in self._money(run, agent):
            gap = None if spent is None or cap is None else spent - (cap + extra_usd)
            if gap is not None and gap >= 0:
                # whole cents, the least that puts the allowance above what was spent
                money = max(money, math.floor(gap * 100 + 1e-9) / 100 + 0.01)
        return Need(tokens, round(money, 2))

    def money_blind(self, run: Run, agent: AgentSettings) -> bool:
        """A money budget is set but ``run``'s spend is unknown (its model has no price)."""
        budgets = agent.max_spend_per_attempt_usd, agent.max_spend_per_issue_usd
        return any(b is not None for b in budgets) and run.spend == "unknown model"

    def extend(self, issue_id: str, tokens: int = 0, usd: float = 0.0) -> tuple[int, float]:
        """Add ``tokens`` and ``usd`` to the issue's extensions; returns their new totals."""
        if tokens:
            self.extra[issue_id] = self.extra.get(issue_id, 0) + tokens
        if usd:
            self.extra_usd[issue_id] = round(self.extra_usd.get(issue_id, 0.0) + usd, 6)
        return self.extra.get(issue_id, 0), self.extra_usd.get(issue_id, 0.0)

    def restore(
        self, extras: Mapping[str, int], extras_usd: Mapping[str, float] | None = None
    ) -> None:
        """Take the extensions a previous process granted (issue id -> tokens, issue id ->
        US dollars), keeping any larger one granted since."""
        for issue_id, tokens in extras.items():
            if tokens > self.extra.get(issue_id, 0):
                self.extra[issue_id] = tokens
        for issue_id, dollars in (extras_usd or {}).items():
            if dollars > self.extra_usd.get(issue_id, 0.0):
                self.extra_usd[issue_id] = dollars

    def _pairs(self, run: Run, agent: AgentSettings) -> list[tuple[int | None, int | None]]:
        """(tokens used, limit) per attempt and per issue; used is None when unknown (the
        run's backend reported no usage)."""
        issue_total = self._ledger.by_issue.get(run.issue.id)
        return [
            (
                None if run.usage_unreported else run.tokens.total_tokens,
                agent.max_tokens_per_attempt,
            ),
            (issue_total.total_tokens if issue_total else 0, agent.max_tokens_per_issue),
        ]

    def _money(self, run: Run, agent: AgentSettings) -> list[tuple[float | None, float | None]]:
        """(US dollars spent, limit) per attempt and per issue; spent is None when unknown
        (no usage report, or no price). Per issue it is the issue's priced spend."""
        issue_total = self._ledger.by_issue.get(run.issue.id)
        issue_spent = issue_total.cost_usd if issue_total is not None else None
        return [
            (run.spend_usd, agent.max_spend_per_attempt_usd),
            (issue_spent, agent.max_spend_per_issue_usd),
        ]
