"""A failed run's reason names its cause: recorded 1.58.2 frames fed to a session (no
server). On the wire the ``error`` status comes first and the ``ConversationErrorEvent``
after it, so a turn that ended on the status alone could only say ``execution_status``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from symphony_tui.agents.base import TurnStatus
from symphony_tui.agents.openhands.failure import MAX_REASON
from symphony_tui.domain import EventKind
from symphony_tui.text import one_line
from symphony_tui_testing.session_host import RecordingSessionHost, make_issue

from .fake_server import ev, status_ev
from .session_harness import deliver, frames, make_session, run_turn, start_turn

MODEL_500 = (
    "LLMServiceUnavailableError: litellm.InternalServerError: InternalServerError: "
    "OpenAIException - fake failure 500"
)


def snapshot(n: int, status: str) -> dict:
    return ev(
        n, "ConversationStateUpdateEvent", key="full_state", value={"execution_status": status}
    )


def error_event(n: int, code: str, detail: str) -> dict:
    return ev(n, "ConversationErrorEvent", source="environment", code=code, detail=detail)


def host_for(tmp_path: Path) -> RecordingSessionHost:
    return RecordingSessionHost(tmp_path, issue=make_issue("OH-20"))


async def test_the_cause_that_trails_the_error_status_becomes_the_reason(tmp_path: Path) -> None:
    host = host_for(tmp_path)
    session, client = make_session(host)
    recorded = frames("model_http_500")
    status_at = next(
        i
        for i, f in enumerate(recorded)
        if f.get("key") == "execution_status" and f["value"] == "error"
    )
    assert recorded[status_at + 1]["kind"] == "ConversationErrorEvent"  # the order on the wire
    turn = await start_turn(session, client)
    await deliver(session, recorded[: status_at + 1])
    assert not turn.done()  # the status alone does not end the turn: its cause is on the way
    await deliver(session, recorded[status_at + 1 :])
    result = await asyncio.wait_for(turn, 5)
    await session.close()
    assert result.status == TurnStatus.FAILED
    assert result.error == MODEL_500
    assert host.of_kind(EventKind.TURN_FAILED)[-1].message == MODEL_500


@pytest.mark.parametrize(
    ("recording", "reason"),
    [
        ("model_http_500", MODEL_500),
        (
            "model_http_401",
            "LLMAuthenticationError: Your LLM API key appears to be invalid or has expired.",
        ),
        ("max_iterations", "MaxIterationsReached: Agent reached maximum iterations limit (1)."),
    ],
)
async def test_recorded_failures_end_with_their_cause(
    tmp_path: Path, recording: str, reason: str
) -> None:
    session, client = make_session(host_for(tmp_path))
    result = await run_turn(session, client, frames(recording))
    await session.close()
    assert (result.status, result.error) == (TurnStatus.FAILED, reason)


async def test_a_cause_sent_before_the_status_counts_too(tmp_path: Path) -> None:
    """The agent-server's backstop publishes the event first, then marks the status."""
    session, client = make_session(host_for(tmp_path))
    events = [status_ev(1, "running"), error_event(2, "KeyError", "'llm'"), status_ev(3, "error")]
    result = await run_turn(session, client, events)
    await session.close()
    assert result.error == "KeyError: 'llm'"


async def test_without_a_cause_the_closing_snapshot_ends_the_wait(tmp_path: Path) -> None:
    """A stuck run has no cause event; the run's closing ``full_state`` says none comes.
    The last agent error of the turn is named as a hint, cleaned to one line."""
    session, client = make_session(host_for(tmp_path), cause_grace_s=60)
    turn = await start_turn(session, client)
    agent_error = ev(2, "AgentErrorEvent", error="Tool 'x' not found\n\x1b[31mretry\x1b[0m")
    await deliver(session, [status_ev(1, "running"), agent_error, status_ev(3, "stuck")])
    assert not turn.done()
    await deliver(session, [snapshot(4, "stuck")])
    result = await asyncio.wait_for(turn, 5)
    await session.close()
    assert result.error == (
        "execution_status stuck (the stuck detector stopped the agent repeating itself); "
        "last agent error: Tool 'x' not found retry"
    )


async def test_without_cause_or_snapshot_the_status_is_the_reason_after_the_grace(
    tmp_path: Path,
) -> None:
    session, client = make_session(host_for(tmp_path), cause_grace_s=0.05)
    result = await run_turn(session, client, [status_ev(1, "running"), status_ev(2, "error")])
    await session.close()
    assert result.error == "execution_status error"


async def test_a_cause_from_an_earlier_turn_is_not_reported_again(tmp_path: Path) -> None:
    session, client = make_session(host_for(tmp_path))
    assert (await run_turn(session, client, frames("model_http_500"))).error == MODEL_500
    events = [status_ev(91, "running"), status_ev(92, "error"), snapshot(93, "error")]
    result = await run_turn(session, client, events, "try again")
    await session.close()
    assert result.error == "execution_status error"


async def test_the_reason_is_one_bounded_line_without_escapes(tmp_path: Path) -> None:
    session, client = make_session(host_for(tmp_path))
    detail = "\x1b]0;pwned\x07first line\r\nsecond\tline \x1b[2J" + "x" * 2000
    events = [status_ev(1, "running"), status_ev(2, "error"), error_event(3, "APIError", detail)]
    result = await run_turn(session, client, events)
    await session.close()
    assert result.error is not None
    assert result.error.startswith("APIError: first line second line xxx")
    assert len(result.error) == MAX_REASON and result.error.endswith("…")
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in result.error)


def test_one_line_strips_escapes_and_controls_and_bounds() -> None:
    assert one_line("a\x1b[1;31mb\x1b[0m\x9b2Kc\x1bP1;2|data\x1b\\d\x07e\u202ef") == "abcdef"
    assert one_line("  many \n\n spaces\t here ") == "many spaces here"
    assert one_line("abcdefghij", limit=8) == "abcdefg…"
    assert one_line(None) == "" and one_line("") == ""
