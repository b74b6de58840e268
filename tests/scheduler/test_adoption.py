"""Start-up re-adoption of agents a crashed scheduler left running (scheduler/adoption.py).

A workspace's manifests record a detached agent (here a real process in its own session
standing in for the app-server; the backend's re-attach is scripted): a live one whose
issue is still active is claimed again as the same attempt, before any dispatch, with no
``before_run`` and no new session; the turn in flight is followed, then the attempt goes
on counting turns. A live one whose issue is not active is ended; a backend that cannot
re-attach ends it too and the attempt is retried; a dead one leaves its issue to the
ordinary dispatch."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from symphony_tui.agents.base import SessionHost, TurnResult, TurnStatus
from symphony_tui.agents.codex.detached import DetachedAgent, alive, start_ticks
from symphony_tui.domain import AgentEvent, EventKind, TokenUsage
from symphony_tui.domain.payloads import TokenReport
from symphony_tui.scheduler.usage.book import RunUsage, encode_run
from symphony_tui.scheduler.usage.ledger import UsageLedger, read_ledger
from symphony_tui.workspaces.manifest import read_section, update_manifest
from symphony_tui_testing.scripted_backend import ScriptedBackend, ScriptedSession, complete

from .conftest import make_issue

FRONT = """\
agent:
  max_turns: 3
hooks:
  before_run: touch before_run_ran
"""


class FollowingSession(ScriptedSession):
    followed: int = 0

    async def follow_turn(self) -> TurnResult:
        self.followed += 1
        self.turn_id = "turn-in-flight"
        return TurnResult(TurnStatus.COMPLETED, self.turn_id)


class AdoptingBackend(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__(complete)
        self.adopted: list[tuple[DetachedAgent, dict]] = []

    async def adopt_session(self, host: SessionHost, agent: DetachedAgent) -> ScriptedSession:
        self.adopted.append((agent, host.resume))
        session = FollowingSession(host=host, thread_id=host.resume["thread_id"], script=complete)
        self.sessions.append(session)
        return session


def leave_agent(ws: Path, issue, *, attempt: int = 2, turn_count: int = 1):
    """A workspace as a killed scheduler leaves it: its agent (a live process in its own
    session) recorded as re-adoptable, the attempt running."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    agent = DetachedAgent(proc.pid, proc.pid, str(ws / "app.sock"), "", "t", start_ticks(proc.pid))
    ws.mkdir(parents=True, exist_ok=True)
    update_manifest(ws, "issue", id=issue.id, identifier=issue.identifier, title=issue.title,
                    state=issue.state)  # fmt: skip
    update_manifest(ws, "run", attempt=attempt, status="running", turn_count=turn_count)
    update_manifest(ws, "session", backend="codex", thread_id="th-9", turn_id="turn-in-flight",
                    agent=agent.facts())  # fmt: skip
    return proc, agent


async def test_a_live_agent_of_an_active_issue_is_readopted_as_the_same_attempt(make_harness):
    issue = make_issue(1)
    backend = AdoptingBackend()
    h = make_harness([issue], front=FRONT, backend=backend)
    h.backend = backend
    proc, agent = leave_agent(h.ws("ABC-1"), issue)
    try:
        await h.start()
        await h.until(lambda: not h.orch.running and h.orch.completed)
        ((adopted, resume),) = backend.adopted
        assert adopted == agent and resume["turn_id"] == "turn-in-flight"
        (session,) = backend.sessions  # no new session was started
        assert session.followed == 1 and session.turns == 2  # turns 2 and 3 of the attempt
        assert session.prompts[0].startswith("Continue working on ABC-1")
        assert not (h.ws("ABC-1") / "before_run_ran").exists()
        dispatched = [e for e in h.orch.events_since(0) if e.kind is EventKind.DISPATCH]
        assert dispatched[0].message.startswith("re-adopted ABC-1 (attempt 2)")
        assert dispatched[0].payload.attempt == 2
        await h.orch.workspaces.manifests.flush()
        assert read_section(h.ws("ABC-1"), "run")["turn_count"] == 3
    finally:
        proc.kill()
        proc.wait()


async def test_a_live_agent_of_an_issue_no_longer_active_is_ended(make_harness):
    issue = make_issue(1, state="Done")
    backend = AdoptingBackend()
    h = make_harness([issue], front=FRONT, backend=backend)
    proc, agent = leave_agent(h.ws("ABC-1"), issue)
    try:
        await h.start()
        assert proc.wait(timeout=10) is not None and not alive(agent)
        assert not backend.adopted and not h.orch.running
        ended = [e for e in h.orch.events_since(0) if e.kind is EventKind.RECONCILE]
        assert any("its issue is Done" in e.message for e in ended)
    finally:
        proc.kill()
        proc.wait()


async def test_a_backend_that_cannot_reattach_ends_the_agent_and_the_attempt_is_retried(
    make_harness,
):
    issue = make_issue(1)
    h = make_harness([issue], front=FRONT)  # ScriptedBackend: no adopt_session
    proc, agent = leave_agent(h.ws("ABC-1"), issue)
    try:
        await h.start()
        await h.until(lambda: h.orch.retrying)
        assert proc.wait(timeout=10) is not None and not alive(agent)
        assert h.orch.retrying["id-1"].entry.attempt == 3
        assert "re-adopt" in (h.orch.retrying["id-1"].entry.error or "")
    finally:
        proc.kill()
        proc.wait()


async def test_a_dead_agent_leaves_its_issue_to_the_ordinary_dispatch(make_harness):
    issue = make_issue(1)
    backend = AdoptingBackend()
    h = make_harness([issue], front=FRONT, backend=backend)
    proc, _agent = leave_agent(h.ws("ABC-1"), issue)
    proc.kill()
    proc.wait()
    await h.start()
    await h.until(lambda: backend.sessions)
    assert not backend.adopted
    dispatched = [e for e in h.orch.events_since(0) if e.kind is EventKind.DISPATCH]
    assert dispatched[0].message == "dispatched ABC-1"


async def test_a_readopted_run_carries_its_usage_over_and_nothing_counts_twice(
    make_harness, tmp_path
):
    """The killed scheduler's ledger says the run counted 1000 tokens ($0.50) on thread
    th-9: the re-adopted run reads that at once (reported, priced), then the whole run
    after more usage; the totals, the ledger and ``run_ended`` count each token once."""
    issue = make_issue(1)
    gate = asyncio.Event()
    earlier = TokenUsage(input_tokens=800, output_tokens=200, total_tokens=1000, cost_usd=0.5)
    grown = TokenUsage(input_tokens=1200, output_tokens=300, total_tokens=1500, cost_usd=0.75)

    class ReportingSession(FollowingSession):
        async def follow_turn(self) -> TurnResult:
            await gate.wait()
            for usage, attached in ((earlier, True), (grown, False)):
                report = TokenReport(usage=usage, attached=attached)
                self.host.emit(AgentEvent(kind=EventKind.TOKEN_USAGE, payload=report))
            return await super().follow_turn()

    class Backend(AdoptingBackend):
        async def adopt_session(self, host: SessionHost, agent: DetachedAgent):
            session = ReportingSession(host=host, thread_id="th-9", script=complete)
            self.sessions.append(session)
            return session

    ledger_path = tmp_path / "usage.jsonl"
    killed = RunUsage("killed-run", issue.id, issue.identifier, earlier, 30.0, False,
                      f"{issue.id}:codex:th-9", earlier)  # fmt: skip
    ledger_path.write_bytes(encode_run(killed))
    backend = Backend()
    h = make_harness([issue], front="agent:\n  max_turns: 1\n", backend=backend,
                     usage=UsageLedger(ledger_path))  # fmt: skip
    proc, _agent = leave_agent(h.ws("ABC-1"), issue, attempt=1)
    try:
        await h.start()
        await h.until(lambda: backend.sessions)
        await h.settle()
        (row,) = h.orch.snapshot().state_payload()["running"]
        assert row["tokens"] == {"input_tokens": 800, "output_tokens": 200, "total_tokens": 1000}
        assert row["spend"]["status"] == "priced" and row["spend"]["usd"] == 0.5
        assert h.orch.snapshot().totals.total_tokens == 1000

        gate.set()
        await h.until(lambda: not h.orch.running and h.orch.completed)
        snap = h.orch.snapshot()
        assert snap.totals.total_tokens == 1500 and snap.totals.cost_usd == 0.75
        (ended,) = [e for e in h.orch.events_since(0) if e.kind is EventKind.RUN_ENDED]
        assert ended.payload.tokens.total_tokens == 1500
        assert ended.payload.spend == "priced" and ended.payload.spend_usd == 0.75
        h.orch.state.usage.wait_written()
        book, _ = read_ledger(ledger_path)
        (whole,) = book.per_issue().values()
        assert whole.tokens.total_tokens == 1500 and whole.tokens.cost_usd == 0.75
        ended_record = [r for r in book.runs.values() if r.run != "killed-run"]
        assert [r.whole.total_tokens for r in ended_record] == [1500]
    finally:
        proc.kill()
        proc.wait()
