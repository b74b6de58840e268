"""The real codex through the scheduler when things go wrong: the model server goes down
(the attempt ends at ``codex.turn_timeout_ms`` and is retried with backoff until the server
is back), and a console restart mid-run (the new process resumes the recorded thread with
``thread/resume``). Token totals equal what the fake model delivered, never counted twice."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from symphony_tui.domain import EventKind, TokenUsage
from symphony_tui.workspaces.manifest import read_section
from tests.helpers import until

from .codex_e2e import DONE, codex_schema, events_of, fake, project_factory, run_ends

pytestmark = pytest.mark.real_codex
__all__ = ["codex_schema", "fake", "project_factory"]

TURN_TIMEOUT_MS = 3_000


def _minus(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    fields = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
    return TokenUsage(
        **{f: getattr(a, f) - getattr(b, f) for f in fields},
        total_tokens=a.total_tokens - b.total_tokens,
    )


async def test_model_server_down_fails_at_the_turn_deadline_and_the_retry_completes(
    project_factory, fake
):
    # Turn 1 is answered and then the server stops listening; turn 2 meets a dead port.
    fake.aliases.update(STEPA="first answer GODOWN", STEP2=DONE)
    project = project_factory(
        fake, issues=[("E2E-1", "STEPA")], codex={"turn_timeout_ms": TURN_TIMEOUT_MS}
    )
    rt = project.runtime()
    orch = rt.orchestrator
    await orch.start()

    # attempt 1 loses the server after its first turn; attempt 2 (a fresh codex that never
    # reached it) retries the refused connection until the turn deadline stops it
    ends = await until(lambda: len(run_ends(rt)) >= 2 and run_ends(rt))
    assert [e["outcome"] for e in ends] == ["failed", "failed"], ends
    assert "timed out" in ends[1]["error"] or "turn_timeout" in ends[1]["error"], ends[1]
    retrying = await until(lambda: orch.snapshot().retrying)
    assert retrying[0].issue_identifier == "E2E-1" and retrying[0].attempt == 2
    assert retrying[0].error == ends[1]["error"]
    reconnects = [
        e for e in events_of(rt, EventKind.ERROR) if getattr(e.payload, "will_retry", None)
    ]
    assert reconnects, "codex did not report retrying the dead model server"
    # the attempt ended by the deadline: dispatch -> end took the turn timeout, not longer
    dispatches = events_of(rt, EventKind.DISPATCH)
    ended = events_of(rt, EventKind.RUN_ENDED)
    took = (ended[1].at - dispatches[1].at).total_seconds()
    assert TURN_TIMEOUT_MS / 1000 <= took < TURN_TIMEOUT_MS / 1000 + 10, took

    fake.aliases["STEPA"] = "back again"
    fake.start()  # the model server comes back on the same port
    ends = await until(lambda: len(run_ends(rt)) >= 3 and run_ends(rt))
    assert ends[2]["outcome"] == "normal", ends
    assert "state: Done" in project.issues_file.read_text()
    assert not orch.snapshot().retrying

    # every attempt after the first resumed the one thread
    assert len(project.sent("thread/start")) == 1
    resumed = project.sent("thread/resume")
    assert len(resumed) == 2
    assert {r["threadId"] for r in resumed} == {started_thread(project)}
    # totals: several turns and two retries, each token counted once
    assert fake.usage_total.total_tokens > 0
    assert orch.snapshot().totals == fake.usage_total


def started_thread(project) -> str:
    """The thread id recorded in the workspace manifest (the first session's thread)."""
    return read_section(project.workspaces / "E2E-1", "session")["thread_id"]


async def test_restart_mid_run_resumes_the_recorded_thread(project_factory, fake):
    fake.aliases.update(STEP2="SLOW200")
    project = project_factory(fake, issues=[("E2E-1", "hello")])
    rt1 = project.runtime()
    await rt1.orchestrator.start()
    # turn 2 is streaming: the console goes away now
    await until(
        lambda: any(
            e.message.startswith("word")
            for e in events_of(rt1, EventKind.MESSAGE_DELTA, issue_id="e2e-1")
        )
    )
    await rt1.close()
    first_totals = rt1.orchestrator.snapshot().totals
    assert first_totals.total_tokens > 0
    thread = started_thread(project)

    fake.aliases["STEP2"] = DONE
    rt2 = project.runtime()
    restart_at = datetime.now(UTC)
    await rt2.orchestrator.start()
    ends = await until(lambda: run_ends(rt2, since=restart_at))
    assert ends[0]["outcome"] == "normal", ends
    assert "state: Done" in project.issues_file.read_text()

    assert len(project.sent("thread/start")) == 1
    (resumed,) = project.sent("thread/resume")
    assert resumed["threadId"] == thread
    sessions = events_of(rt2, EventKind.SESSION_STARTED, since=restart_at)
    assert sessions[0].payload.resumed is True and sessions[0].payload.thread_id == thread
    # the new process counts only what was used after the restart (its totals also hold
    # what the first one counted, restored from the usage ledger: together, all of it)
    shown = rt2.orchestrator.snapshot().totals
    second_totals = _minus(shown, rt2.orchestrator.ledger.restored)
    assert second_totals == _minus(fake.usage_total, first_totals)
    assert second_totals.total_tokens > 0
    assert rt2.orchestrator.ledger.restored == first_totals
    assert shown == fake.usage_total


async def test_a_silent_model_is_a_stall_and_the_attempt_is_retried(project_factory, fake):
    fake.slow_delay = 5.0  # one word, then five seconds of silence
    # stall detection runs on each poll tick (spec §8.5): poll often
    project = project_factory(
        fake, issues=[("E2E-1", "SLOW3")], codex={"stall_timeout_ms": 1_000}, polling_ms=200
    )
    rt = project.runtime()
    orch = rt.orchestrator
    await orch.start()
    ends = await until(lambda: run_ends(rt), timeout=30)

    assert ends[0]["outcome"] == "failed" and ends[0]["status"] == "stalled", ends
    assert ends[0]["error"].startswith("stalled: no agent event for")
    retrying = await until(lambda: orch.snapshot().retrying)
    assert retrying[0].error == ends[0]["error"]
