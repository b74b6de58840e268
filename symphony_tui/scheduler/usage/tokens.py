"""Token accounting across sessions (spec §13.5; docs/protocols.md "Token usage").

Backends report **absolute** session totals; the ledger adds only the growth since the last
report of the same session, so continuation turns, retries and resumed threads never double
count. It also keeps 10-second buckets for the tokens-per-minute rate and sparkline, and the
totals per issue. Totals of earlier processes (the usage ledger, ``usage/ledger.py``) come in
through :meth:`TokenLedger.restore`: counted in the totals, not in the rate.

What each backend reports (a ``TOKEN_USAGE`` event whose ``TokenReport`` holds the totals):

* codex app-server (and the demo agent, which speaks its protocol):
  ``thread/tokenUsage/updated {threadId, turnId, tokenUsage: {total, last,
  modelContextWindow}}`` after each model response; ``total`` is the thread's running total
  (``inputTokens``, ``cachedInputTokens``, ``outputTokens``, ``reasoningOutputTokens``,
  ``totalTokens``). A resumed thread's totals arrive before its first turn: ``attached``, a
  baseline, not new usage.
* OpenCode: no usage event; each ``step-finish`` part holds one model call's ``tokens
  {input, output, reasoning, cache: {read, write}}`` and ``cost``; the session's total is
  their sum, reported when it changes.
* OpenHands agent-server: ``ConversationStateUpdateEvent`` ``stats.usage_to_metrics.<id>``
  with ``accumulated_token_usage {prompt_tokens, completion_tokens, cache_read_tokens,
  reasoning_tokens}`` and ``accumulated_cost``; no total (derived: input + output).

A count a report omits is derived where it can be (``TokenUsage.derived``: total = input +
output). A run's usage is *measured* once a report with non-zero totals arrives that is not
an ``attached`` baseline (``Run.usage_reported``). A run that started a turn and ended
without one is *not reported* (``Run.usage_unreported``): no server that omits counts, a
run ended before its first usage event. Its zeros are never counted as usage: it adds
nothing to the totals and one to :attr:`TokenLedger.unreported_runs` (and to its issue's
count), so every total reads "N tokens (M runs not reported)", and a token budget cannot
trip on it (``budgets.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from symphony_tui.config.pricing import ModelPrice
from symphony_tui.domain import TokenUsage

BUCKET_S = 10.0
BUCKETS = 60  # ten minutes of history


class TokenLedger:
    """``totals``: tokens counted over all sessions (and restored earlier processes);
    ``by_issue``: the same per issue id; ``restored``: what came from earlier processes;
    ``unreported_runs`` / ``unreported_by_issue``: finished runs whose backend reported no
    usage (see the module doc), in this process and earlier ones. Session keys are opaque
    strings (the recorder's ``session_key``: issue, backend and thread)."""

    def __init__(self) -> None:
        self.totals = TokenUsage()
        self.by_issue: dict[str, TokenUsage] = {}
        #: The part of ``totals`` that earlier processes counted (:meth:`restore`).
        self.restored = TokenUsage()
        self.unreported_runs = 0
        self.unreported_by_issue: dict[str, int] = {}
        #: Finished runs whose tokens had no price (an unknown model; config/pricing.py).
        self.unpriced_runs = 0
        self.unpriced_by_issue: dict[str, int] = {}
        self._baselines: dict[str, TokenUsage] = {}
        self._buckets: deque[tuple[int, int]] = deque(maxlen=BUCKETS)

    def restore(
        self,
        by_issue: Mapping[str, TokenUsage],
        unreported: Mapping[str, int] | None = None,
        unpriced: Mapping[str, int] | None = None,
    ) -> None:
        """Add what earlier processes counted (issue id -> tokens) to the totals, and their
        runs without a usage report and without a price (issue id -> runs). Not recent
        usage: the rate and history are left alone."""
        for issue_id, usage in by_issue.items():
            self.totals = self.totals + usage
            self.restored = self.restored + usage
            self.by_issue[issue_id] = self.by_issue.get(issue_id, TokenUsage()) + usage
        for issue_id, runs in (unreported or {}).items():
            if runs > 0:
                self.unreported_runs += runs
                self.unreported_by_issue[issue_id] = (
                    self.unreported_by_issue.get(issue_id, 0) + runs
                )
        for issue_id, runs in (unpriced or {}).items():
            if runs > 0:
                self.run_unpriced(issue_id, runs)

    def run_unreported(self, issue_id: str) -> None:
        """A run of ``issue_id`` ended without any usage report: count it as such (its
        zeros are not usage)."""
        self.unreported_runs += 1
        self.unreported_by_issue[issue_id] = self.unreported_by_issue.get(issue_id, 0) + 1

    def run_unpriced(self, issue_id: str, runs: int = 1) -> None:
        """``runs`` runs of ``issue_id`` ended with tokens no price covered (an unknown
        model): their cost is unknown, and the totals' ``cost_usd`` holds none of it."""
        self.unpriced_runs += runs
        self.unpriced_by_issue[issue_id] = self.unpriced_by_issue.get(issue_id, 0) + runs

    def baseline(self, session_key: str) -> TokenUsage | None:
        return self._baselines.get(session_key)

    def seed(self, session_key: str, usage: TokenUsage) -> None:
        """Start counting ``session_key`` from ``usage`` (a resumed thread's last totals)."""
        self._baselines[session_key] = usage

    def report(
        self,
        session_key: str,
        absolute: TokenUsage,
        now_s: float,
        *,
        issue_id: str | None = None,
        price: ModelPrice | None = None,
    ) -> TokenUsage:
        """Record an absolute total for a session (of issue ``issue_id``, when given);
        returns the growth that was added. With ``price`` (the session's model's) the
        growth's ``cost_usd`` is its price; without, it is what the backend reported
        (None: unknown; zero for tokens: unknown too). Only growth is priced, so a resumed
        thread never pays twice."""
        before = self._baselines.get(session_key, TokenUsage())
        growth = absolute.growth_since(before)
        self._baselines[session_key] = absolute
        if price is not None:
            cost = None if growth.is_zero else price.cost(growth)
            growth = growth.model_copy(update={"cost_usd": cost})
        elif growth.cost_usd == 0 and not growth.is_zero:
            # A backend that prices tokens at nothing had no price for its model (OpenCode
            # for a provider its price list lacks): unknown, not free. A free model is
            # priced at zero under ``pricing``.
            growth = growth.model_copy(update={"cost_usd": None})
        if not growth.is_zero or growth.cost_usd:
            self.totals = self.totals + growth
            if issue_id is not None:
                self.by_issue[issue_id] = self.by_issue.get(issue_id, TokenUsage()) + growth
            self._add_to_bucket(growth.total_tokens, now_s)
        return growth

    def forget(self, session_key: str) -> None:
        self._baselines.pop(session_key, None)

    def _add_to_bucket(self, tokens: int, now_s: float) -> None:
        index = int(now_s // BUCKET_S)
        if self._buckets and self._buckets[-1][0] == index:
            self._buckets[-1] = (index, self._buckets[-1][1] + tokens)
        else:
            self._buckets.append((index, tokens))

    def history(self, now_s: float, buckets: int = 30) -> tuple[int, ...]:
        """Tokens per bucket for the last ``buckets`` buckets, oldest first (zeros filled)."""
        current = int(now_s // BUCKET_S)
        by_index = dict(self._buckets)
        return tuple(by_index.get(i, 0) for i in range(current - buckets + 1, current + 1))

    def rate_per_min(self, now_s: float) -> float:
        """Tokens over the last 60 seconds (six buckets, the current one partial)."""
        return float(sum(self.history(now_s, buckets=6)))
