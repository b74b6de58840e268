"""Token usage and rate limits (spec §13.5, PROTOCOLS.md token sections)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class TokenUsage(BaseModel):
    """Token counts, all integers >= 0. ``cost_usd`` only where the backend reports it.

    ``total_tokens`` is as reported by the backend (codex reports it; for others it is
    input + output). ``cached_input_tokens`` is a subset of ``input_tokens`` and
    ``reasoning_tokens`` a subset of ``output_tokens``.
    """

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None

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

    model_config = ConfigDict(frozen=True)

    used_percent: float | None = None
    window_minutes: int | None = None
    resets_at: datetime | None = None


class RateLimits(BaseModel):
    """Latest rate-limit payload from a backend or tracker (codex v2 camelCase, normalized).

    ``raw`` keeps the payload as received so nothing is lost in normalization.
    """

    model_config = ConfigDict(frozen=True)

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
