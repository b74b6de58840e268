"""Token budgets of a run (``agent.max_tokens_per_issue``, ``agent.max_tokens_per_attempt``).

A run whose counted tokens cross a budget is held: its turn in flight is interrupted
(``Worker.interrupt_turn``), no further turn starts, and the row reads ``budget reached``
until the operator extends the budget (the ``extend_budget`` command, by a chosen number of
tokens) or stops the run (``interrupt``: the issue is then held as a stop does). Both
limits count total tokens (input + output, as the token pane): per attempt, the run's own
growth (``Run.tokens``); per issue, everything counted for the issue, earlier attempts and
earlier processes included (``TokenLedger.by_issue``). An extension raises both allowances
of that issue; it is written to the workspace's run manifest (``run.budget_extra``) and read
back on start (:meth:`Budgets.restore`), so a restart does not hold the run again at once
with the usage the ledger kept.

Usage a backend did not report (``scheduler/usage/tokens.py``) is unknown, not zero: a run
without a usage report has no per-attempt figure, so that budget cannot trip on it, and the
per-issue figure holds only the issue's measured runs, so runs without a report cannot trip
it by themselves (only measured usage can). The console says so beside such a run.
"""

from __future__ import annotations

from collections.abc import Mapping

from symphony_tui.config.settings import AgentSettings
from symphony_tui.scheduler.run import Run
from symphony_tui.scheduler.usage.tokens import TokenLedger


class Budgets:
    """The extensions the operator granted (issue id -> tokens) and the budget test."""

    def __init__(self, ledger: TokenLedger) -> None:
        self._ledger = ledger
        self.extra: dict[str, int] = {}

    def over(self, run: Run, agent: AgentSettings) -> str | None:
        """Why ``run`` is over a budget (``"12,400 of 10,000 tokens per issue"``), or None."""
        return self._over(run, agent, self.extra.get(run.issue.id, 0))

    def needed(self, run: Run, agent: AgentSettings) -> int:
        """The smallest extension that takes ``run`` back under every budget (0: none)."""
        extra = self.extra.get(run.issue.id, 0)
        need = 0
        for used, limit in self._pairs(run, agent):
            if used is not None and limit is not None:
                need = max(need, used + 1 - (limit + extra))
        return need

    def extend(self, issue_id: str, tokens: int) -> int:
        """Add ``tokens`` to the issue's extension; returns its new total."""
        self.extra[issue_id] = self.extra.get(issue_id, 0) + tokens
        return self.extra[issue_id]

    def restore(self, extras: Mapping[str, int]) -> None:
        """Take the extensions a previous process granted (issue id -> tokens), keeping any
        larger one granted since."""
        for issue_id, tokens in extras.items():
            if tokens > self.extra.get(issue_id, 0):
                self.extra[issue_id] = tokens

    def _over(self, run: Run, agent: AgentSettings, extra: int) -> str | None:
        for (used, limit), what in zip(self._pairs(run, agent), ("attempt", "issue"), strict=True):
            if used is not None and limit is not None and used >= limit + extra:
                return f"{used:,} of {limit + extra:,} tokens per {what}"
        return None

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
