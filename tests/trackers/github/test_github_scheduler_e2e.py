"""The real Orchestrator with the GitHub tracker against FakeGitHub, from a WORKFLOW.md written
for the reference's GitHub adapter (``tracker.provider.repo``, ``token: $GITHUB_TOKEN``, states
``open`` / ``closed``): 120 candidates, 60 running.

Dispatch fills 60 slots from two Link pages; every reconcile refreshes the 60 running issues in
two GraphQL requests (50 + 10) and stops nobody as missing; a closed issue is stopped and its
slot refilled; a spent primary budget pauses polling until the stated reset (visible in the
snapshot), keeps every worker and sends nothing meanwhile."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from symphony_tui.config.store import WorkflowStore
from symphony_tui.scheduler.orchestrator import Orchestrator
from symphony_tui.trackers.github import GitHubTracker
from symphony_tui.workspaces.manager import WorkspaceManager
from symphony_tui_testing.clock import FakeClock
from symphony_tui_testing.scripted_backend import ScriptedBackend, hang
from tests.helpers import until

from .conftest import REPO, TOKEN

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def write_reference_workflow(root: Path, fake, *, extra: str = "", states: str = "") -> Path:
    """A WORKFLOW.md as the reference's GitHub adapter documents it; ``states`` replaces the
    two state lines of ``tracker`` (unindented); ``extra`` follows them as it is."""
    states = states or 'active_states: ["open"]\nterminal_states: ["closed"]'
    tracker = (
        textwrap.dedent(
            f"""\
        tracker:
          kind: github
          provider:
            repo: {REPO}
            token: "$GITHUB_TOKEN"
            api_url: {fake.url}
        """
        )
        + textwrap.indent(states, "  ")
        + "\n"
    )
    rest = textwrap.dedent(
        """\
        workspace:
          root: ws
        polling:
          interval_ms: 30000
        agent:
          max_concurrent_agents: 60
        codex:
          stall_timeout_ms: 0
        """
    )
    path = root / "WORKFLOW.md"
    body = "Work on {{ issue.identifier }}: {{ issue.title }}\n"
    path.write_text(f"---\n{tracker}{extra}{rest}---\n{body}")
    return path


def orchestrator(tmp_path: Path, fake, clock: FakeClock, backend, **kw) -> tuple:
    store = WorkflowStore(
        write_reference_workflow(tmp_path, fake, **kw), env={"GITHUB_TOKEN": TOKEN}
    )
    store.load_initial()
    tracker = GitHubTracker(lambda: store.current.settings, clock=clock.now)
    orch = Orchestrator(
        store,
        tracker,
        WorkspaceManager(lambda: store.current.settings),
        lambda name: backend,
        clock=clock,
        watch_workflow=False,
    )
    return orch, tracker, store


async def test_120_candidates_60_running_refresh_reconcile_and_rate_limit(
    tmp_path: Path, fake
) -> None:
    clock = FakeClock(T0)
    fake._clock = clock.now
    numbers = fake.add_issues(120)
    backend = ScriptedBackend(hang)
    orch, _tracker, store = orchestrator(tmp_path, fake, clock, backend)
    assert store.current.settings.tracker.active_states == ("open",)
    try:
        await orch.start()
        await until(lambda: orch.ticks >= 1 and len(backend.sessions) == 60)
        assert set(orch.running) == {str(n) for n in numbers[:60]}
        assert len(fake.rest_requests("GET", "/repos/octo/app/issues")) >= 2

        # Tick 2: 60 running issues refreshed in two GraphQL requests; nobody stops.
        before = len(fake.graphql_requests("SymphonyGitHubIssuesByNumber"))
        await clock.advance(30)
        await until(lambda: orch.ticks >= 2)
        refresh = fake.graphql_requests("SymphonyGitHubIssuesByNumber")[before:]
        assert sorted(r.graphql.count("issue(number:") for r in refresh) == [10, 50]
        assert set(orch.running) == {str(n) for n in numbers[:60]}
        pages = fake.rest_requests("GET", "/repos/octo/app/issues")
        assert [r.status for r in pages[-2:]] == [304, 304]  # candidates unchanged: ETag

        # A person closes one running issue: it stops, a new one starts in its slot.
        fake.close(numbers[0])
        await clock.advance(30)
        await until(lambda: str(numbers[0]) not in orch.running)
        orch.request_refresh()
        await until(lambda: len(orch.running) == 60 and str(numbers[60]) in orch.running)

        # The primary budget is spent until a reset 75 s ahead.
        reset = (clock.now() + timedelta(seconds=75)).replace(microsecond=0)
        fake.exhaust(reset)
        await clock.advance(30)
        # Wait for the pause itself: a tick that began before the budget ran out may end
        # first, so counting ticks would race.
        await until(lambda: orch.snapshot().tracker_paused_until is not None)
        assert orch.snapshot().tracker_paused_until == reset  # the console shows this
        assert any("paused until" in e.message for e in orch.events_since(0))
        assert len(orch.running) == 60
        sent = len(fake.requests)
        ticks = orch.ticks
        await clock.advance(30)
        await until(lambda: orch.ticks > ticks)
        assert len(fake.requests) == sent  # paused: nothing sent
        await clock.advance(30)  # past the reset: polling resumes
        await until(lambda: orch.snapshot().tracker_paused_until is None)
        await until(lambda: len(fake.requests) > sent)
        assert len(orch.running) == 60

        messages = [e.message for e in orch.events_since(0)]
        assert not [m for m in messages if "no longer returned" in m]
        stopped = [m for m in messages if m.startswith("stopping ")]
        assert [m.split(":")[0] for m in stopped] == [f"stopping GH-{numbers[0]}"], stopped
        assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    finally:
        await orch.shutdown()


async def test_a_refused_token_backs_polling_off_until_one_poll_succeeds(
    tmp_path: Path, fake
) -> None:
    """HTTP 401 is not retried at the poll interval: each refusal in a row doubles it (to a
    cap), and the first answered poll brings the interval back."""
    clock = FakeClock(T0)
    fake._clock = clock.now
    fake.add_issues(2)
    good = fake.token
    fake.token = "someone-else"  # the scheduler's token is refused from now on
    backend = ScriptedBackend(hang)
    orch, _tracker, _store = orchestrator(tmp_path, fake, clock, backend)

    def delay() -> float:
        snap = orch.snapshot()
        assert snap.next_poll_at is not None and snap.last_poll_at is not None
        return (snap.next_poll_at - snap.last_poll_at).total_seconds()

    try:
        await orch.start()
        await until(lambda: orch.ticks >= 1)
        assert orch.tracker_refused and "401" in (orch.snapshot().tracker_error or "")
        assert delay() == 60  # 30 s interval, doubled once
        await clock.advance(60)
        await until(lambda: orch.ticks >= 2)
        assert delay() == 120
        sent = len(fake.requests)
        await clock.advance(60)  # the old interval passes twice: nothing is sent
        await asyncio.sleep(0.05)
        assert len(fake.requests) == sent and orch.ticks == 2
        fake.token = good  # the key is fixed (here: the tracker takes it again)
        await clock.advance(60)
        await until(lambda: orch.ticks >= 3 and len(backend.sessions) == 2)
        assert not orch.tracker_refused and orch.snapshot().tracker_error is None
        assert delay() == 30
    finally:
        await orch.shutdown()
