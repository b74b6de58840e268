"""Token usage and rate limits (spec §13.5, docs/protocols.md "Token usage")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


def reported_count(value: Any) -> int | None:
    """``value`` when it is a token count (an ``int`` >= 0, not a bool), else None: the
    field is missing or unusable, so :meth:`TokenUsage.derived` may derive it."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class TokenUsage(BaseModel):
    """Token counts, all integers >= 0. ``cost_usd`` only where the backend reports it.

    ``total_tokens`` is as reported by the backend (codex reports it; for others it is
    input + output). ``cached_input_tokens`` is a subset of ``input_tokens`` and
    ``reasoning_tokens`` a subset of ``output_tokens``.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None

    @classmethod
    def derived(
        cls,
        *,
        input_tokens: int | None,
        output_tokens: int | None,
        total_tokens: int | None,
        cached_input_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> TokenUsage:
        """A backend's report with missing counts derived from the others (``None`` = the
        report omits the field or sends something that is not a count >= 0).

        total = input + output, so any one of the three follows from the other two (a
        difference below zero is clamped to 0); a count that cannot be derived is 0.
        Cached input and reasoning are subsets and are never derived (0 when missing).
        """
        inp, out, total = input_tokens, output_tokens, total_tokens
        if total is None and inp is not None and out is not None:
            total = inp + out
        elif inp is None and total is not None and out is not None:
            inp = max(0, total - out)
        elif out is None and total is not None and inp is not None:
            out = max(0, total - inp)
        return cls(
            input_tokens=inp or 0,
            cached_input_tokens=cached_input_tokens or 0,
            output_tokens=out or 0,
            reasoning_tokens=reasoning_tokens or 0,
            total_tokens=total or 0,
            cost_usd=cost_usd,
        )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost_usd=cost,
        )

    def growth_since(self, earlier: TokenUsage) -> TokenUsage:
        """Non-negative growth from ``earlier`` to ``self`` (absolute totals; spec §13.5).

        A counter that went down (a new thread, a server restart) counts from zero, so
        nothing is subtracted and nothing is double counted.
        """

        def d(now: int, then: int) -> int:
            return now - then if now >= then else now

        cost: float | None = None
        if self.cost_usd is not None:
            then = earlier.cost_usd or 0.0
            cost = self.cost_usd - then if self.cost_usd >= then else self.cost_usd
        return TokenUsage(
            input_tokens=d(self.input_tokens, earlier.input_tokens),
            cached_input_tokens=d(self.cached_input_tokens, earlier.cached_input_tokens),
            output_tokens=d(self.output_tokens, earlier.output_tokens),
            reasoning_tokens=d(self.reasoning_tokens, earlier.reasoning_tokens),
            total_tokens=d(self.total_tokens, earlier.total_tokens),
            cost_usd=cost,
        )

    @property
    def is_zero(self) -> bool:
        return self.total_tokens == 0 and self.input_tokens == 0 and self.output_tokens == 0


class RateLimitWindow(BaseModel):
    """One rate-limit window: percent used (0-100), window length in minutes, reset time."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    used_percent: float | None = None
    window_minutes: int | None = None
    resets_at: datetime | None = None


class RateLimits(BaseModel):
    """Latest rate-limit payload from a backend or tracker (codex v2 camelCase, normalized).

    ``raw`` keeps the payload as received so nothing is lost in normalization.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    source: str = ""
    limit_id: str | None = None
    limit_name: str | None = None
    primary: RateLimitWindow | None = None
    secondary: RateLimitWindow | None = None
    credits_balance: str | None = None
    has_credits: bool | None = None
    unlimited: bool | None = None
    plan_type: str | None = None
    raw: dict | None = None
