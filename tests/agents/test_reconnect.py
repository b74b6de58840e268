"""The shared reconnect helper: capped exponential backoff with jitter.

Deterministic: the random source and the sleep are injected, nothing waits."""

from __future__ import annotations

import pytest

from symphony_tui.agents.base import AgentError
from symphony_tui.agents.reconnect import Backoff, Reconnector, StreamOptions


class Clock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def draws(*values: float):
    it = iter(values)
    return lambda: next(it)


def test_delays_double_up_to_the_cap_and_jitter_only_shortens_them() -> None:
    b = Backoff(initial_s=0.25, max_s=2.0, max_attempts=8, jitter=0.5)
    assert [b.nominal_s(n) for n in range(1, 7)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert b.delay_s(3, lambda: 0.0) == 1.0  # no jitter drawn: the nominal delay
    assert b.delay_s(3, lambda: 0.5) == 0.75
    assert b.delay_s(3, lambda: 0.999999) == pytest.approx(0.5, abs=1e-5)  # never below half
    assert b.nominal_s(10_000) == 2.0  # no overflow on a long outage
    assert Backoff(jitter=0).delay_s(2, lambda: 0.9) == 0.5


@pytest.mark.parametrize("bad", [{"jitter": 1.5}, {"initial_s": -1}, {"max_attempts": 0}])
def test_bad_backoff_settings_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)


async def test_retries_until_an_attempt_succeeds_with_jittered_delays() -> None:
    clock, notices, tried = Clock(), [], []

    async def attempt(n: int) -> str:
        tried.append(n)
        if n < 3:
            raise AgentError("transport_error", f"refused {n}")
        return "connected"

    r = Reconnector(
        Backoff(initial_s=1.0, max_s=10.0, max_attempts=5, jitter=0.5),
        "event socket",
        notice=notices.append,
        draw=draws(0.0, 0.5, 1.0),
        sleep=clock.sleep,
    )
    got = await r.run(attempt, last="closed (1006)", retryable=(AgentError,))
    assert got == "connected" and tried == [1, 2, 3]
    assert clock.slept == r.delays == [1.0, 1.5, 2.0]
    assert notices == [
        "event socket dropped (closed (1006)); reconnect attempt 1 in 1.00s",
        "event socket dropped (transport_error: refused 1); reconnect attempt 2 in 1.50s",
        "event socket dropped (transport_error: refused 2); reconnect attempt 3 in 2.00s",
    ]


async def test_gives_up_after_max_attempts_naming_the_last_reason() -> None:
    async def attempt(n: int) -> None:
        raise AgentError("transport_error", f"refused {n}")

    r = Reconnector(Backoff(max_attempts=3), "event stream", draw=lambda: 0.0, sleep=Clock().sleep)
    with pytest.raises(AgentError) as info:
        await r.run(attempt, last="x", retryable=(AgentError,), describe=lambda e: e.message)
    assert str(info.value) == (
        "transport_error: event stream lost; 3 reconnect attempts failed (last: refused 3)"
    )


async def test_a_final_error_stops_at_once_and_closing_stops_quietly() -> None:
    class Final(AgentError):
        pass

    tried: list[int] = []

    async def attempt(n: int) -> None:
        tried.append(n)
        raise Final("transport_error", "websocket closed 4001")

    r = Reconnector(Backoff(), "event socket", draw=lambda: 0.0, sleep=Clock().sleep)
    with pytest.raises(Final):
        await r.run(attempt, last="x", retryable=(AgentError,), final=(Final,))
    assert tried == [1]
    got = await r.run(attempt, last="x", retryable=(AgentError,), closing=lambda: True)
    assert got is None and tried == [1]


def test_stream_options_give_their_backoff_field_by_field() -> None:
    options = StreamOptions(
        backoff_initial_s=0.1, backoff_max_s=1.0, max_attempts=4, backoff_jitter=0.25
    )
    assert options.backoff == Backoff(initial_s=0.1, max_s=1.0, max_attempts=4, jitter=0.25)
    assert StreamOptions().backoff == Backoff()
