"""``agent.turn_timeout_ms`` / ``agent.stall_timeout_ms`` apply to every backend;
``codex.*`` stays accepted (the reference's keys) and applies when ``agent.*`` is unset."""

from __future__ import annotations

from pathlib import Path

from symphony_tui.agents.codex import CodexBackend
from symphony_tui.config.settings import resolve_settings
from symphony_tui.domain import AgentEvent, EventKind
from symphony_tui_testing.scripted_backend import hang

from .conftest import make_issue


def settings(raw: dict):
    return resolve_settings(raw, Path("/tmp"), {})


def test_agent_keys_win_and_codex_keys_are_the_fallback() -> None:
    both = settings(
        {
            "agent": {"turn_timeout_ms": 5000, "stall_timeout_ms": 0},
            "codex": {"turn_timeout_ms": 1000, "stall_timeout_ms": 2000},
        }
    )
    assert (both.turn_timeout_ms, both.stall_timeout_ms) == (5000, 0)
    reference = settings({"codex": {"turn_timeout_ms": 1000, "stall_timeout_ms": 2000}})
    assert (reference.turn_timeout_ms, reference.stall_timeout_ms) == (1000, 2000)
    default = settings({})
    assert (default.turn_timeout_ms, default.stall_timeout_ms) == (3_600_000, 300_000)
    assert default.agent.turn_timeout_ms is None  # unset, not a copy of codex.*


def test_the_codex_session_gets_the_neutral_deadlines() -> None:
    s = settings({"agent": {"turn_timeout_ms": 7000, "stall_timeout_ms": 9000}})
    cfg = CodexBackend(lambda: s).session_settings(s)
    assert (cfg.turn_timeout_ms, cfg.stall_timeout_ms) == (7000, 9000)


async def test_agent_turn_timeout_ends_the_turn(make_harness) -> None:
    front = "agent:\n  turn_timeout_ms: 5000\ncodex:\n  turn_timeout_ms: 600000\n"
    h = make_harness([make_issue(1)], script=hang, front=front)
    await h.start()
    await h.settle()
    await h.advance(5)
    await h.settle()
    assert not h.orch.running
    assert "timed out" in h.orch.retrying["id-1"].entry.error


async def test_agent_stall_timeout_stalls_the_run(make_harness) -> None:
    front = "agent:\n  stall_timeout_ms: 60000\n"  # codex.stall_timeout_ms stays 300000
    h = make_harness([make_issue(1)], script=hang, front=front)
    await h.start()
    await h.settle()
    await h.advance(61)
    await h.orch.tick()
    await h.settle()
    assert not h.orch.running
    assert h.orch.retrying["id-1"].entry.error.startswith("stalled")


async def test_agent_stall_timeout_zero_disables_a_codex_one(make_harness) -> None:
    front = "agent:\n  stall_timeout_ms: 0\ncodex:\n  stall_timeout_ms: 60000\n"
    h = make_harness([make_issue(1)], script=hang, front=front)
    await h.start()
    await h.settle()
    await h.advance(61)
    await h.orch.tick()
    await h.settle()
    assert "id-1" in h.orch.running


async def test_turn_timeout_is_silence_not_runtime(make_harness) -> None:
    # Output every 3 s for 9 s under a 5 s setting: the turn goes on (§10.6); 5 s of
    # silence after that ends it.
    front = "agent:\n  turn_timeout_ms: 5000\n  stall_timeout_ms: 0\n"
    h = make_harness([make_issue(1)], script=hang, front=front)
    await h.start()
    await h.settle()
    session = h.backend.sessions[0]
    for n in range(3):
        await h.advance(3)
        session.host.emit(AgentEvent(kind=EventKind.MESSAGE_DELTA, message=f"part {n} "))
        await h.settle()
        assert "id-1" in h.orch.running
    await h.advance(4)
    await h.settle()
    assert "id-1" in h.orch.running
    await h.advance(1.5)
    await h.settle()
    assert not h.orch.running
    assert "no output for 5s" in h.orch.retrying["id-1"].entry.error
