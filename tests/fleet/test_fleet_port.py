"""The fleet's merge, ids, event numbering and routing, with RemotePorts fed frames by hand
(no scheduler, no network); and its targets: parsing, the fleet file, token files."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from datetime import UTC, datetime, timedelta

import httpx
import jsonpatch
import pytest

from symphony_tui.api.client import RemoteError
from symphony_tui.domain import AgentEvent, Snapshot
from symphony_tui.domain.approvals import ApprovalRequest
from symphony_tui.domain.commands import Approve, Interrupt, PauseDispatch, Rerun
from symphony_tui.domain.kinds import ApprovalKind, EventKind
from symphony_tui.domain.snapshot import IssueRow, RetryRow, RunningRow
from symphony_tui.domain.tokens import TokenUsage
from symphony_tui.fleet import targets as tg
from symphony_tui.fleet.merge import split_id
from symphony_tui.fleet.port import STALE_AFTER_S, FleetPort, Project
from symphony_tui.fleet.refusals import stale_refusal
from tests.helpers import free_port

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def snap(issue: str, *, tokens: int = 0, history: tuple[int, ...] = ()) -> Snapshot:
    return Snapshot(
        generated_at=NOW,
        issues=(IssueRow(issue_id=issue, identifier="ABC-1", title="t", state="Todo"),),
        running=(RunningRow(issue_id=issue, issue_identifier="ABC-1", state="Todo"),),
        retrying=(RetryRow(issue_id=issue + "r", issue_identifier="ABC-2", attempt=1, due_at=NOW),),
        approvals=(ApprovalRequest(id=f"{issue}:7", issue_id=issue, kind=ApprovalKind.COMMAND),),
        completed=(issue + "c",),
        totals=TokenUsage(total_tokens=tokens),
        token_history=history,
        tracker_states=("Todo", "Done"),
        max_concurrent_agents=3,
        runs_unpriced=1,
    )


def event(seq: int, issue: str | None = "i1", message: str = "") -> AgentEvent:
    return AgentEvent(kind=EventKind.NOTIFICATION, seq=seq, issue_id=issue, message=message)


def joined(fleet: FleetPort, name: str, transport=None) -> Project:
    """A project of ``fleet`` whose port is fed by hand (never run)."""
    target = tg.Target("url", f"http://127.0.0.1:1/{name}")
    project = fleet._project(target, name, name)
    client = httpx.AsyncClient(
        base_url="http://127.0.0.1:1", transport=transport or httpx.MockTransport(_refuse)
    )
    endpoint = tg.Endpoint(name, "", "http://127.0.0.1:1", 1)
    project.port = fleet.remote_port(project, "http://127.0.0.1:1", endpoint, client)
    return project


def _refuse(request: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json={"error": {"code": "refused", "message": "not running"}})


def feed(project: Project, snapshot: Snapshot, *, reset: bool = False) -> None:
    assert project.port is not None
    project.port._apply_snapshot({"snapshot": snapshot.model_dump(mode="json"), "reset": reset})
    project.port._heard()


def events(project: Project, *batch: AgentEvent) -> None:
    assert project.port is not None
    project.port._apply_change({"events": [e.model_dump(mode="json") for e in batch]})


def test_the_merged_snapshot_namespaces_every_id_and_sums_the_totals():
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    feed(alpha, snap("i1", tokens=10, history=(1, 2, 3)))
    feed(beta, snap("i1", tokens=5, history=(10,)))
    merged = fleet.snapshot()
    assert [r.issue_id for r in merged.issues] == ["alpha/i1", "beta/i1"]
    assert [r.identifier for r in merged.issues] == ["ABC-1", "ABC-1"]  # as the tracker has it
    assert [r.project for r in merged.running] == ["alpha", "beta"]
    assert [r.issue_id for r in merged.retrying] == ["alpha/i1r", "beta/i1r"]
    assert [(a.id, a.issue_id, a.project) for a in merged.approvals] == [
        ("alpha/i1:7", "alpha/i1", "alpha"),
        ("beta/i1:7", "beta/i1", "beta"),
    ]
    assert merged.completed == ("alpha/i1c", "beta/i1c")
    assert merged.totals.total_tokens == 15
    assert merged.token_history == (1, 2, 13)  # aligned at the newest end
    assert (merged.backend, merged.tracker_kind, merged.workflow_path) == ("fleet", "fleet", "")
    assert merged.rate_limits is None and merged.tracker_states == ("Todo", "Done")
    assert [(p.name, p.link_state, p.running, p.approvals) for p in merged.projects] == [
        ("alpha", "live", 1, 1),
        ("beta", "live", 1, 1),
    ]
    assert merged.max_concurrent_agents == 6 and merged.runs_unpriced == 2
    # each project's row repeats its own figures (a console filtered to it shows them)
    assert [(p.max_concurrent_agents, p.token_history) for p in merged.projects] == [
        (3, (1, 2, 3)),
        (3, (10,)),
    ]


def test_a_change_inside_one_row_renames_only_that_row():
    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    base = snap("i1").model_copy(
        update={
            "running": tuple(
                RunningRow(issue_id=f"i{n}", issue_identifier=f"ABC-{n}", state="Todo")
                for n in range(4)
            )
        }
    )
    feed(alpha, base)
    before = fleet.snapshot()
    doc = json.loads(base.model_dump_json())
    moved = json.loads(base.model_dump_json())
    moved["running"][2]["turn_count"] = 5
    assert alpha.port is not None
    alpha.port._apply_change({"patch": jsonpatch.make_patch(doc, moved).patch})
    after = fleet.snapshot()
    assert [r.turn_count for r in after.running] == [0, 0, 5, 0]
    assert [a is b for a, b in zip(after.running, before.running, strict=True)] == [
        True, True, False, True,
    ]  # fmt: skip
    assert after.running[2].issue_id == "alpha/i2" and after.issues == before.issues


def test_the_merge_is_rebuilt_only_when_a_project_changed_and_only_that_project_renamespaced():
    fleet = FleetPort([], clock=lambda: 100.0)
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    assert alpha.port is not None
    alpha.port._clock = beta.port._clock = lambda: 100.0  # type: ignore[union-attr]
    feed(alpha, snap("i1"))
    feed(beta, snap("i2"))
    first = fleet.snapshot()
    assert fleet.snapshot() is first and fleet.rebuilds == 1
    beta_parts = beta.parts
    feed(alpha, snap("i3"))
    second = fleet.snapshot()
    assert second is not first and fleet.rebuilds == 2
    assert beta.parts is beta_parts  # beta's rows were not namespaced again
    assert [r.issue_id for r in second.issues] == ["alpha/i3", "beta/i2"]


def test_events_get_one_fleet_sequence_and_a_replay_after_a_reconnect_is_not_doubled():
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    feed(alpha, snap("i1"))
    feed(beta, snap("i1"))
    events(alpha, event(1, message="a1"), event(2, message="a2"))
    events(beta, event(1, message="b1"))
    # a reconnect that resumes a little early: the scheduler repeats what was held
    events(alpha, event(2, message="a2"), event(3, message="a3"))
    seen = fleet.events_since(0)
    assert [e.seq for e in seen] == [1, 2, 3, 4]
    assert [e.message for e in seen] == ["a1", "a2", "b1", "a3"]
    assert [e.project for e in seen] == ["alpha", "alpha", "beta", "alpha"]
    assert {e.issue_id for e in seen} == {"alpha/i1", "beta/i1"}
    assert [e.message for e in fleet.events_since(2)] == ["b1", "a3"]
    assert [e.message for e in fleet.events_since(0, limit=1)] == ["a3"]
    # alpha's scheduler restarted: its numbers start again at 1, and are new events
    feed(alpha, snap("i1"), reset=True)
    events(alpha, event(1, message="again"))
    assert [(e.seq, e.message) for e in fleet.events_since(4)] == [(5, "again")]


def timed(seq: int, second: int, message: str) -> AgentEvent:
    return event(seq, message=message).model_copy(update={"at": NOW + timedelta(seconds=second)})


def test_backlogs_that_arrive_before_a_read_read_by_time():
    """Each scheduler hands its history when the fleet connects: read together, by time."""
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    events(alpha, timed(1, 1, "a1"), timed(2, 3, "a3"), timed(3, 5, "a5"))
    events(beta, timed(1, 2, "b2"), timed(2, 4, "b4"))
    seen = fleet.events_since(0)
    assert [(e.seq, e.message) for e in seen] == [
        (1, "a1"), (2, "b2"), (3, "a3"), (4, "b4"), (5, "a5"),
    ]  # fmt: skip


def test_a_backlog_after_a_read_never_moves_what_a_reader_holds():
    """Numbers once handed out stay: a later backlog reads after them, none lost or doubled;
    a project's own events keep its order even when their times do not."""
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    events(alpha, timed(1, 5, "a5"), timed(2, 6, "a6"))
    first = fleet.events_since(0)
    assert [(e.seq, e.message) for e in first] == [(1, "a5"), (2, "a6")]
    events(beta, timed(1, 1, "b1"), timed(2, 9, "b9"))
    events(alpha, timed(3, 7, "a7"), timed(4, 2, "a2"))  # a2 stays after a6 and a7
    later = fleet.events_since(first[-1].seq)
    assert [(e.seq, e.message) for e in later] == [(3, "b1"), (4, "a7"), (5, "a2"), (6, "b9")]
    assert [e.message for e in fleet.events_since(0)] == ["a5", "a6", "b1", "a7", "a2", "b9"]


def test_events_not_read_for_long_are_numbered_beyond_the_wait(monkeypatch):
    monkeypatch.setattr("symphony_tui.fleet.port.PENDING", 2)
    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    events(alpha, *(timed(n, n, f"a{n}") for n in range(1, 6)))
    assert len(fleet._pending) == 2
    assert [(e.seq, e.message) for e in fleet.events_since(0)] == [
        (n, f"a{n}") for n in range(1, 6)
    ]


def test_a_restarted_scheduler_s_history_is_taken_once_across_a_reset_and_a_new_port():
    from datetime import timedelta

    workflow = "/work/alpha/WORKFLOW.md"

    def at(s: int) -> datetime:
        return NOW + timedelta(seconds=s)

    def said(seq: int, second: int, message: str) -> AgentEvent:
        return event(seq, message=message).model_copy(update={"at": at(second)})

    def messages(fleet: FleetPort, since: int = 0) -> list[str]:
        return [e.message for e in fleet.events_since(since)]

    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    first = snap("i1").model_copy(update={"workflow_path": workflow, "started_at": at(0)})
    feed(alpha, first)
    events(alpha, said(1, 1, "a1"), said(2, 2, "a2"), said(3, 3, "a3"))
    # started again on the same workflow, on the same address: it numbers on from its
    # history file, which lacks a3 (written just before a kill -9), and hands its history back
    second = first.model_copy(update={"started_at": at(10)})
    feed(alpha, second, reset=True)
    events(alpha, said(1, 1, "a1"), said(2, 2, "a2"), said(3, 11, "b3"), said(4, 12, "b4"))
    assert messages(fleet) == ["a1", "a2", "a3", "b3", "b4"]
    # and again, followed by a new port this time (another address): the same
    assert alpha.port is not None
    alpha.taken = alpha.port.taken()
    endpoint = tg.Endpoint("alpha", "", "http://127.0.0.1:2", 2)
    alpha.port = fleet.remote_port(alpha, "http://127.0.0.1:2", endpoint, httpx.AsyncClient())
    feed(alpha, second.model_copy(update={"started_at": at(20)}))
    events(alpha, said(3, 11, "b3"), said(4, 12, "b4"), said(5, 21, "c5"))
    assert messages(fleet) == ["a1", "a2", "a3", "b3", "b4", "c5"]
    # a scheduler of another workflow at that address: its history is all new here
    other = second.model_copy(update={"workflow_path": "/work/beta/WORKFLOW.md"})
    feed(alpha, other.model_copy(update={"started_at": at(30)}), reset=True)
    events(alpha, said(1, 5, "o1"))
    assert messages(fleet, 6) == ["o1"]


def test_a_restarted_scheduler_s_history_is_taken_once_when_an_agent_s_times_run_behind():
    """An agent stamps its own events (to the millisecond): the last event taken can be
    older than one taken before it. The new process's history repeats neither, and hands
    what the old port never got (written before a kill -9, after its last frame)."""
    workflow = "/work/alpha/WORKFLOW.md"

    def said(seq: int, ms: int, message: str) -> AgentEvent:
        at = NOW + timedelta(milliseconds=ms)
        return event(seq, message=message).model_copy(update={"at": at})

    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    first = snap("i1").model_copy(update={"workflow_path": workflow, "started_at": NOW})
    feed(alpha, first)
    # the scheduler's tracker event, then the agent's tool call it answered, stamped earlier
    events(alpha, said(1, 100, "a1"), said(2, 693, "moved to Done"), said(3, 692, "tool done"))
    assert alpha.port is not None
    alpha.taken = alpha.port.taken()
    endpoint = tg.Endpoint("alpha", "", "http://127.0.0.1:2", 2)
    alpha.port = fleet.remote_port(alpha, "http://127.0.0.1:2", endpoint, httpx.AsyncClient())
    feed(alpha, first.model_copy(update={"started_at": NOW + timedelta(seconds=10)}))
    events(
        alpha,
        said(1, 100, "a1"),
        said(2, 693, "moved to Done"),
        said(3, 692, "tool done"),
        said(4, 691, "never sent"),
        said(5, 10_000, "b5"),
    )
    assert [e.message for e in fleet.events_since(0)] == [
        "a1", "moved to Done", "tool done", "never sent", "b5",
    ]  # fmt: skip


def test_a_transcript_is_the_project_s_own_with_namespaced_ids():
    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    assert alpha.port is not None
    alpha.port._transcripts["i1"] = __import__("collections").deque([event(9, message="x")])
    got = fleet.events_since(0, issue_id="alpha/i1")
    assert [(e.seq, e.issue_id, e.project) for e in got] == [(9, "alpha/i1", "alpha")]
    assert fleet.events_since(0, issue_id="nobody/i1") == []


async def test_an_issue_s_transcript_is_kept_across_its_project_s_restart_without_repeats(
    monkeypatch,
):
    """The worker screen's read (one issue's events) after the project's scheduler was
    started again: the earlier process's transcript, then the new one's (which starts
    empty, numbered from 1 again), numbered on; a new forward to the same process repeats
    nothing."""
    from collections import deque

    fleet = FleetPort([])

    def remote_port(project, url, endpoint, client=None):  # fed by hand, never answers
        refusing = httpx.AsyncClient(base_url=url, transport=httpx.MockTransport(_refuse))
        return FleetPort.remote_port(fleet, project, url, endpoint, refusing)

    monkeypatch.setattr(fleet, "remote_port", remote_port)
    alpha = joined(fleet, "alpha")
    alpha.endpoint = tg.Endpoint("alpha", "", "http://127.0.0.1:1", 1, pid=4242)

    def transcript(*said: AgentEvent) -> None:
        assert alpha.port is not None
        alpha.port._transcripts["i1"] = deque(said)

    def read(since: int = 0) -> list[tuple[int, str]]:
        return [(e.seq, e.message) for e in fleet.events_since(since, issue_id="alpha/i1")]

    try:
        events(alpha, event(1, message="a1"), event(2, message="a2"), event(3, issue="i2"))
        transcript(event(1, message="a1"), event(2, message="a2"))
        assert read() == [(1, "a1"), (2, "a2")]
        # killed and started again: another process, whose transcript starts empty
        restarted = tg.Endpoint("alpha", "", "http://127.0.0.1:2", 2, pid=4343)
        await fleet._connect(alpha, restarted)
        assert read() == [(1, "a1"), (2, "a2")]
        transcript(event(1, message="b1"))
        assert read() == [(1, "a1"), (2, "a2"), (4, "b1")]
        assert read(2) == [(4, "b1")]  # a reader that had a2 reads on, nothing again
        assert [e.issue_id for e in fleet.events_since(0, issue_id="alpha/i1")] == ["alpha/i1"] * 3
        # its forward ended: a new one to the same process, which hands its transcript again
        await fleet._connect(alpha, restarted)
        transcript(event(1, message="b1"), event(2, message="b2"))
        assert read() == [(1, "a1"), (2, "a2"), (4, "b1"), (5, "b2")]
        assert read(4) == [(5, "b2")]
        assert [e.message for e in fleet.events_since(0, limit=1, issue_id="alpha/i1")] == ["b2"]
        # its host no longer announces it: no port, its transcript is still read
        await fleet._disconnect(alpha)
        assert read() == [(1, "a1"), (2, "a2"), (4, "b1"), (5, "b2")]
    finally:
        await fleet.close()


def test_commands_are_routed_by_their_id_s_prefix_else_by_project():
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    routed = fleet.route(Approve(approval_id="beta/i1:7", for_session=True))
    assert not isinstance(routed, str)
    assert routed[0] is beta
    assert routed[1] == Approve(approval_id="i1:7", for_session=True)
    routed = fleet.route(Interrupt(issue_id="alpha/x/y"))  # ids may hold '/' themselves
    assert not isinstance(routed, str) and routed[0] is alpha
    assert routed[1] == Interrupt(issue_id="x/y")
    routed = fleet.route(PauseDispatch(project="beta"))
    assert not isinstance(routed, str) and routed[0] is beta and routed[1].project is None
    assert "choose a project" in str(fleet.route(PauseDispatch()))
    assert "no project has issue" in str(fleet.route(Rerun(issue_id="gamma/i1")))
    assert "no project has issue" in str(fleet.route(Rerun(issue_id="plain")))
    assert split_id("alpha/", {"alpha"}) is None


async def test_a_refusal_names_its_project_and_the_request_says_via_fleet():
    fleet = FleetPort([])
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _refuse(request)

    alpha = joined(fleet, "alpha", httpx.MockTransport(answer))
    assert alpha.port is not None
    result = await fleet.send(Interrupt(issue_id="alpha/i1"))
    assert not result.ok and result.message == "alpha: not running"
    assert json.loads(seen[0].content) == {"type": "interrupt", "issue_id": "i1", "project": None}
    assert seen[0].headers["X-Symphony-Via"] == "fleet"
    unreachable = fleet._project(tg.Target("url", "http://127.0.0.1:2"), "k", "beta")
    unreachable.error = "http://127.0.0.1:2: connection refused"
    result = await fleet.send(PauseDispatch(project="beta"))
    assert result.message == "beta: http://127.0.0.1:2: connection refused"
    assert fleet.snapshot().projects[1].link_state == "down"
    await alpha.port.close()


async def test_an_answer_names_the_project_it_came_from():
    fleet = FleetPort([])

    def answer(request: httpx.Request) -> httpx.Response:
        said = {"approve": "T-1: approved for this session", "pause_dispatch": ""}
        return httpx.Response(
            200, json={"ok": True, "message": said[json.loads(request.content)["type"]]}
        )

    alpha = joined(fleet, "alpha", httpx.MockTransport(answer))
    result = await fleet.send(Approve(approval_id="alpha/t-1:0", for_session=True))
    assert result.ok and result.message == "alpha · T-1: approved for this session"
    result = await fleet.send(PauseDispatch(project="alpha"))
    assert result.ok and result.message == "alpha · pause dispatch: ok"
    assert alpha.port is not None
    await alpha.port.close()


async def test_every_audit_entry_names_its_project_a_pause_too():
    fleet = FleetPort([])
    at = "2026-11-02T09:50:00Z"
    logged = [
        {"at": at, "who": "ann@box", "via": "fleet (HTTP API from 127.0.0.1)", "what": "approve",
         "issue": "T-1", "detail": 'approval_id="t-1:0"', "message": "T-1: approved"},
        {"at": at, "who": "ann@box", "via": "fleet (HTTP API from 127.0.0.1)", "what": "pause_dispatch",
         "detail": "paused=true", "message": "dispatch paused"},
    ]  # fmt: skip

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"entries": logged})

    alpha = joined(fleet, "alpha", httpx.MockTransport(answer))
    approve, pause = await fleet.audit_entries()
    assert (approve.project, approve.issue) == ("alpha", "alpha/T-1")
    assert (pause.project, pause.issue) == ("alpha", None)
    assert pause.via == approve.via == "alpha: fleet (HTTP API from 127.0.0.1)"
    assert "project" not in pause.model_dump()  # a fleet's own: never served or written
    assert alpha.port is not None
    await alpha.port.close()


async def test_a_command_for_a_stale_project_is_refused_at_once_not_sent():
    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True, "message": "interrupted"})

    alpha = joined(fleet, "alpha", httpx.MockTransport(answer))
    feed(alpha, snap("i1"))
    now[0] += STALE_AFTER_S + 4  # frozen: no keepalive since
    assert fleet.snapshot().projects[0].link_state == "stale"
    result = await fleet.send(Interrupt(issue_id="alpha/i1"))
    assert not result.ok and not seen
    assert result.message == (
        f"alpha is stale (no word from it for {int(STALE_AFTER_S + 4)} s): not sent; "
        "send it again once it is live"
    )
    feed(alpha, snap("i1"))  # heard again
    assert (await fleet.send(Interrupt(issue_id="alpha/i1"))).ok and len(seen) == 1
    assert alpha.port is not None
    await alpha.port.close()


async def test_a_console_refuses_a_stale_project_in_the_fleet_port_s_own_words():
    from symphony_tui.console.state import ConsoleState

    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    alpha = joined(fleet, "alpha")
    feed(alpha, snap("i1"))
    now[0] += STALE_AFTER_S + 4
    state = ConsoleState(fleet, detach_only=True, notify=lambda: None)  # type: ignore[arg-type]
    state.take(fleet.snapshot())
    said = state.stale_project("alpha/i1")  # before asking the operator anything
    refused = await fleet.send(Interrupt(issue_id="alpha/i1"))
    assert said == refused.message == stale_refusal("alpha", STALE_AFTER_S + 4)
    assert alpha.port is not None
    await alpha.port.close()


def _counts(row) -> tuple[int, int, int]:
    return row.running, row.retrying, row.approvals


def said_stopping(project: Project, reason: str) -> None:
    """The stream's last frame: the scheduler says it is stopping (a clean stop)."""
    assert project.port is not None
    project.port._stopping_frame(json.dumps({"at": NOW.isoformat(), "reason": reason}))


async def test_a_cleanly_stopped_project_runs_nothing_and_says_what_it_had_why_and_when():
    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    alpha = joined(fleet, "alpha")
    feed(alpha, snap("i1", tokens=10))
    assert alpha.port is not None
    now[0] += 3
    said_stopping(alpha, "stopped by SIGTERM")
    merged = fleet.snapshot()
    assert merged.running == () and merged.approvals == ()  # nothing runs there now
    row = merged.projects[0]
    # a clean stop is no error: its reason is said apart
    assert (row.link_state, row.age_s, row.error, row.stop_reason) == (
        "stopped", 3.0, None, "stopped by SIGTERM",
    )  # fmt: skip
    # the row agrees with the panes: nothing runs or waits; what did is said apart
    assert _counts(row) == (0, 0, 0) and row.stopped_with == (1, 1, 1)
    assert (row.totals.total_tokens, row.max_concurrent_agents) == (10, 0)
    assert merged.max_concurrent_agents == 0
    # a new port that never heard from it (followed again while its note outlived it)
    now[0] += 4
    await fleet._disconnect(alpha)
    assert joined(fleet, "alpha") is alpha and alpha.port is not None
    alpha.port._ended("its process no longer serves")
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.age_s, _counts(row), row.stopped_with, row.stop_reason) == (
        "stopped", 7.0, (0, 0, 0), (1, 1, 1), "stopped by SIGTERM",
    )  # fmt: skip
    # no longer announced on its ssh host: the port is dropped
    now[0] += 1
    await fleet._disconnect(alpha)
    alpha.gone = "its scheduler no longer runs on build-1"
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.age_s, _counts(row), row.totals.total_tokens) == (
        "stopped", 8.0, (0, 0, 0), 10,
    )  # fmt: skip
    assert row.stopped_with == (1, 1, 1) and row.stop_reason == "stopped by SIGTERM"
    # found again, but nothing answers there: down, and what stopped ran nothing since
    alpha.gone = None
    now[0] += 2
    assert joined(fleet, "alpha") is alpha and alpha.port is not None
    alpha.port._lost(RemoteError("connection refused"))
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.age_s, _counts(row), row.stopped_with) == (
        "down", 10.0, (0, 0, 0), None,
    )  # fmt: skip
    feed(alpha, snap("i2").model_copy(update={"running": (), "approvals": ()}))  # it is back
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.age_s, row.running, row.approvals) == ("live", 0.0, 0, 0)
    assert row.max_concurrent_agents == 3 and row.stopped_with is None
    assert row.stop_reason is None
    await alpha.port.close()


async def test_a_sigterm_stop_in_its_real_order_says_what_the_scheduler_had():
    """``symphony-tui stop`` (SIGTERM) as the stream carries it: the scheduler begins its
    shutdown (``stopping_with``: what runs and waits then), its shutdown ends its runs (a
    change with none left), then its last frame says it stopped and the link ends. By that
    frame its counts are 0: what it had is the shutdown's own word."""
    stopping = snap("i1").model_dump(mode="json")
    frames = [
        ("snapshot", {"snapshot": stopping}),
        ("change", {"patch": [{"op": "replace", "path": "/stopping_with", "value": [1, 1, 1]}]}),
        (
            "change",
            {
                "patch": [
                    {"op": "replace", "path": f"/{field}", "value": []}
                    for field in ("running", "retrying", "approvals")
                ]
            },
        ),
        ("stopping", {"at": NOW.isoformat(), "reason": "stopped by SIGTERM"}),
    ]
    body = "".join(
        f"event: {kind}\ndata: {json.dumps(data)}\nid: 1:{n}\n\n"
        for n, (kind, data) in enumerate(frames, 1)
    )

    def stream(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/stream":
            return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
        return _refuse(request)

    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    alpha = joined(fleet, "alpha", httpx.MockTransport(stream))
    assert alpha.port is not None
    await asyncio.wait_for(alpha.port.run(), timeout=10)  # the link ends after the frame
    assert alpha.port.said_stopping and alpha.port.before_stop is not None
    assert alpha.port.before_stop.running == ()  # the runs ended before it said so
    now[0] += 5
    row = fleet.snapshot().projects[0]
    assert (row.link_state, _counts(row), row.stopped_with, row.stop_reason) == (
        "stopped", (0, 0, 0), (1, 1, 1), "stopped by SIGTERM",
    )  # fmt: skip
    # its port dropped (its host no longer announces it): still what it had
    await fleet._disconnect(alpha)
    alpha.gone = "its scheduler no longer runs on build-1"
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.stopped_with) == ("stopped", (1, 1, 1))


async def test_a_scheduler_gone_without_a_word_is_lost_and_keeps_its_runs_as_unknown():
    """kill -9: its process ended without a stopping frame; its agents (detached ones)
    may still run, and are re-adopted when it starts again: nothing is zeroed."""
    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    alpha = joined(fleet, "alpha")
    feed(alpha, snap("i1", tokens=10))
    assert alpha.port is not None
    now[0] += 3
    alpha.port._ended("its process no longer serves")  # what a port finds after kill -9
    merged = fleet.snapshot()
    row = merged.projects[0]
    assert (row.link_state, row.age_s, row.error) == ("lost", 3.0, "its process no longer serves")
    assert _counts(row) == (1, 1, 1) and row.stopped_with is None and row.stop_reason is None
    # its rows stay in the panes (they read unknown), and its capacity with them
    assert [r.issue_id for r in merged.running] == ["alpha/i1"]
    assert [a.id for a in merged.approvals] == ["alpha/i1:7"]
    assert merged.max_concurrent_agents == row.max_concurrent_agents == 3
    refused = await fleet.send(Interrupt(issue_id="alpha/i1"))
    assert refused.message.startswith("alpha is lost (its process no longer serves): not sent")
    # a new port that never heard from it: still lost, as the last port found it
    now[0] += 4
    await fleet._disconnect(alpha)
    assert joined(fleet, "alpha") is alpha and alpha.port is not None
    alpha.port._ended("its process no longer serves")
    row = fleet.snapshot().projects[0]
    assert (row.link_state, row.age_s, _counts(row)) == ("lost", 7.0, (1, 1, 1))
    assert len(fleet.snapshot().running) == 1
    # its ssh host no longer announces it, and it never said it stopped: lost too
    now[0] += 1
    await fleet._disconnect(alpha)
    alpha.gone = "its scheduler no longer runs on build-1"
    merged = fleet.snapshot()
    row = merged.projects[0]
    assert (row.link_state, row.age_s, _counts(row), row.stopped_with) == (
        "lost", 8.0, (1, 1, 1), None,
    )  # fmt: skip
    assert len(merged.running) == 1 and merged.max_concurrent_agents == 3
    refused = await fleet.send(Interrupt(issue_id="alpha/i1"))
    assert refused.message == (
        "alpha is lost (its scheduler no longer runs on build-1): not sent; "
        "send it again once it is started and live"
    )
    # started again: it re-adopts its runs and is live
    alpha.gone = None
    assert joined(fleet, "alpha") is alpha and alpha.port is not None
    feed(alpha, snap("i1"))
    row = fleet.snapshot().projects[0]
    assert (row.link_state, _counts(row)) == ("live", (1, 1, 1))
    await alpha.port.close()


async def test_a_lost_link_keeps_its_last_counts_and_says_how_old_they_are():
    now = [100.0]
    fleet = FleetPort([], clock=lambda: now[0])
    alpha = joined(fleet, "alpha")
    feed(alpha, snap("i1", tokens=10))
    assert alpha.port is not None
    now[0] += STALE_AFTER_S + 2  # frozen or cut off: its agents may still run
    merged = fleet.snapshot()
    row = merged.projects[0]
    assert (row.link_state, row.age_s, _counts(row), row.stopped_with) == (
        "stale", STALE_AFTER_S + 2, (1, 1, 1), None,
    )  # fmt: skip
    assert len(merged.running) == len(merged.approvals) == 1  # shown as unknown, as the row
    assert merged.max_concurrent_agents == row.max_concurrent_agents == 3
    await alpha.port.close()


async def test_the_capacity_is_that_of_the_schedulers_that_can_run_work_now():
    fleet = FleetPort([])
    alpha, beta = joined(fleet, "alpha"), joined(fleet, "beta")
    feed(alpha, snap("i1"))
    feed(beta, snap("i2").model_copy(update={"max_concurrent_agents": 5}))
    assert fleet.snapshot().max_concurrent_agents == 8
    assert alpha.port is not None and beta.port is not None
    said_stopping(alpha, "stopped by SIGTERM")
    merged = fleet.snapshot()
    assert len(merged.running) == 1 and merged.max_concurrent_agents == 5
    await alpha.port.close()
    await beta.port.close()


async def test_the_process_known_to_have_stopped_is_not_followed_again():
    fleet = FleetPort([])
    alpha = joined(fleet, "alpha")
    assert alpha.port is not None
    alpha.endpoint = tg.Endpoint("alpha", "", "http://127.0.0.1:1", 1, pid=4242)
    same = tg.Endpoint("alpha", "", "http://127.0.0.1:1", 1, pid=4242)
    assert not fleet._needs_new(alpha, same)
    alpha.port._ended("its process no longer serves")  # its note outlives it a moment
    assert not fleet._needs_new(alpha, same)
    restarted = tg.Endpoint("alpha", "", "http://127.0.0.1:2", 2, pid=4343)
    assert fleet._needs_new(alpha, restarted)
    await alpha.port.close()


def test_project_names_are_the_folder_made_unique():
    fleet = FleetPort([])
    ssh = tg.parse("ssh://me@build-1:2222")
    url = tg.parse("http://127.0.0.1:8080")
    assert fleet._project(url, "a", "repo").name == "repo"
    assert fleet._project(url, "b", "repo").name == "repo-2"
    assert fleet._project(ssh, "c", "repo").name == "repo@build-1"
    assert fleet._project(ssh, "c", "repo").name == "repo@build-1"  # the same scheduler
    named = tg.parse("http://127.0.0.1:8081", name="mine")
    assert fleet._project(named, "d", "repo").name == "mine"


def test_targets_parse_or_say_why_in_one_line(tmp_path):
    workflow = tmp_path / "repo" / "WORKFLOW.md"
    workflow.parent.mkdir()
    workflow.write_text("---\n---\n")
    assert tg.parse(str(workflow.parent)).text == str(workflow.resolve())
    assert tg.parse("ssh://me@host:22").ssh is not None
    assert tg.parse("https://build.example:8443/").text == "https://build.example:8443"
    assert tg.parse("https://build.example:8443").machine == "build.example"
    assert tg.parse("http://127.0.0.1:8080").machine is None
    for bad, why in [
        ("ftp://x", "a target is"),
        ("http://h:99999", "port"),
        ("http://h:1/api", "is not http"),
        (str(tmp_path / "none.md"), "no such workflow file"),
        ("ssh://h:x", "port"),
    ]:
        with pytest.raises(tg.TargetError, match=why) as caught:
            tg.parse(bad)
        assert "\n" not in str(caught.value)


def test_the_fleet_file_takes_options_and_says_which_lines_it_skipped(tmp_path):
    token = tmp_path / "build.token"
    token.write_text("secret\n")
    token.chmod(0o600)
    fleet = tmp_path / "fleet"
    fleet.write_text(
        "# my schedulers\n"
        "ssh://ci@build-1\n"
        "https://build-2:8443 name=build token-file=build.token  # beside the file\n"
        "http://127.0.0.1:9 token-env=MY_TOKEN\n"
        "http://127.0.0.1:10 colour=blue\n"
        "gopher://x\n"
    )
    targets, problems = tg.read_fleet_file(fleet)
    assert [t.kind for t in targets] == ["ssh", "url", "url"]
    assert targets[1].name == "build" and targets[1].token_file == token
    assert targets[2].token_env == "MY_TOKEN"
    assert [p.split(": ", 1)[0] for p in problems] == [f"{fleet}:5", f"{fleet}:6"]
    assert tg.read_fleet_file(tmp_path / "missing") == ([], [])
    endpoint = tg.url_endpoint(targets[1])
    assert endpoint.token == "secret"
    with pytest.raises(tg.TokenError, match=r"^token: \$MY_TOKEN is not set$"):
        tg.url_endpoint(targets[2], environ={})
    assert tg.url_endpoint(targets[2], environ={"MY_TOKEN": "t"}).token == "t"
    token.chmod(0o644)
    with pytest.raises(tg.TokenError, match="chmod 600"):
        tg.url_endpoint(targets[1])


def test_a_token_file_that_cannot_be_used_says_what_it_is(tmp_path):
    """A directory is not a file (no chmod advice for it), a missing file is not found."""
    with pytest.raises(tg.TokenError) as caught:
        tg.read_token_file(tmp_path)
    assert str(caught.value) == f"token file {tmp_path} is a directory, not a file"
    with pytest.raises(tg.TokenError) as caught:
        tg.read_token_file(tmp_path / "gone.token")
    assert str(caught.value) == f"token file {tmp_path / 'gone.token'} not found"
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(tg.TokenError, match=r"is empty$"):
        tg.read_token_file(empty)


async def test_a_token_that_cannot_be_had_is_a_config_problem_not_a_down_scheduler(
    tmp_path, monkeypatch
):
    """Nothing is asked of a scheduler whose token this console cannot have: its row says
    what to fix (``config``), not that the scheduler is down, and its figures are unknown."""
    monkeypatch.delenv("FLEET_UNSET_TOKEN", raising=False)
    closed = free_port()
    fleet = FleetPort(
        [
            tg.parse(f"http://127.0.0.1:{closed}", token_env="FLEET_UNSET_TOKEN"),
            tg.parse(f"http://127.0.0.2:{closed}", token_file=tmp_path / "missing.token"),
            tg.parse(f"http://127.0.0.3:{closed}", token_file=tmp_path),
        ],
        local_every_s=0.05,
    )
    runner = asyncio.create_task(fleet.run())
    try:
        for _ in range(200):
            rows = fleet.snapshot().projects
            if len(rows) == 3:
                break
            await asyncio.sleep(0.05)
        rows = tuple(sorted(rows, key=lambda r: r.name))  # 127.0.0.1, .2, .3
        assert [(r.link_state, r.error) for r in rows] == [
            ("config", "token: $FLEET_UNSET_TOKEN is not set"),
            ("config", f"token file {tmp_path / 'missing.token'} not found"),
            ("config", f"token file {tmp_path} is a directory, not a file"),
        ]
        assert not any(r.heard for r in rows)  # its figures are unknown, not 0
        refused = await fleet.send(PauseDispatch(project=rows[0].name))
        assert refused.message == f"{rows[0].name}: token: $FLEET_UNSET_TOKEN is not set"
    finally:
        await fleet.close()
        runner.cancel()


async def test_a_target_that_cannot_be_reached_is_one_down_row_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("SYMPHONY_SSH", "ssh -o BatchMode=yes -o ConnectTimeout=5")
    workflow = tmp_path / "repo" / "WORKFLOW.md"
    workflow.parent.mkdir()
    workflow.write_text("---\ntracker:\n  kind: local\n  path: issues.yaml\n---\n")
    closed = free_port()
    fleet = FleetPort(
        [
            tg.parse(str(workflow)),
            tg.parse(f"ssh://nobody@127.0.0.1:{closed}"),
            tg.parse(f"http://127.0.0.1:{closed}"),
        ],
        local_every_s=0.1,
    )
    runner = asyncio.create_task(fleet.run())
    try:
        for _ in range(200):
            rows = {r.name: r for r in fleet.snapshot().projects}
            if len(rows) == 3 and all(r.link_state == "down" for r in rows.values()):
                break
            await asyncio.sleep(0.05)
        assert sorted(rows) == sorted(["repo", f"nobody@127.0.0.1:{closed}", f"127.0.0.1:{closed}"])
        assert [r.link_state for r in rows.values()] == ["down"] * 3, rows
        assert "no scheduler runs" in (rows["repo"].error or "")
        assert f"ssh://nobody@127.0.0.1:{closed}: ssh failed" in (
            rows[f"nobody@127.0.0.1:{closed}"].error or ""
        )
        assert all("\n" not in (r.error or "\n") for r in rows.values())
        assert (rows[f"127.0.0.1:{closed}"].error or "").endswith(
            f"connection refused at 127.0.0.1:{closed} "
            "(nothing listens there: the scheduler stopped, or a wrong port)"
        )
        assert fleet.link().state == "stale"
    finally:
        await fleet.close()
        runner.cancel()


async def test_a_scheduler_that_refuses_the_token_reads_refused_not_down():
    """A 401 is a scheduler that answers: the row says refused (the error says which
    token case), and once the stream is accepted the link is live again."""
    fleet = FleetPort([])
    accept = False

    def answer(request: httpx.Request) -> httpx.Response:
        if not accept:
            return httpx.Response(401, json={"error": {"code": "unauthorized", "message": "no"}})
        return httpx.Response(409, json={"error": {"code": "refused", "message": "not now"}})

    alpha = joined(fleet, "alpha", httpx.MockTransport(answer))
    assert alpha.port is not None
    with pytest.raises(RemoteError) as refused:
        await alpha.port.stream_once()
    alpha.port._lost(refused.value)
    row = fleet.snapshot().projects[0]
    assert row.link_state == "refused"
    assert row.error is not None and "401" in row.error and "token" in row.error
    alpha.port._lost(httpx.ConnectError("All connection attempts failed"))
    assert fleet.snapshot().projects[0].link_state == "down"  # not a refusal any more
    feed(alpha, Snapshot(generated_at=datetime.now(UTC)))
    assert fleet.snapshot().projects[0].link_state == "live"
    await alpha.port.close()


def test_the_server_audits_a_fleet_client_via_fleet():
    from aiohttp.test_utils import make_mocked_request

    from symphony_tui.api.operator_routes import who_and_via

    def via(kind: str) -> str:
        headers = {"X-Symphony-Via": kind, "X-Symphony-Operator": "me@box"}
        return who_and_via(make_mocked_request("POST", "/api/v1/commands", headers=headers))[1]

    # said so that "api" is never read as a project's name
    assert via("fleet").startswith("fleet (HTTP API from ") and via("fleet").endswith(")")
    assert via("Fleet; rm -rf").startswith("HTTP API from ")  # not a kind: ignored
    assert via("x" * 30).startswith("HTTP API from ")


async def test_a_scheduler_named_by_a_target_is_not_also_a_local_row(tmp_path, monkeypatch):
    from symphony_tui.api import announce

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workflow = tmp_path / "repo" / "WORKFLOW.md"
    workflow.parent.mkdir()
    workflow.write_text("---\n---\n")
    # this process stands for a scheduler serving on a closed port
    announce.write(
        announce.default_dir(),
        host="127.0.0.1",
        port=free_port(),
        token=False,
        extra={"workflow": str(workflow.resolve())},
    )
    fleet = FleetPort([tg.parse("local"), tg.parse(str(workflow))], local_every_s=0.05)
    runner = asyncio.create_task(fleet.run())
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            names = [r.name for r in fleet.snapshot().projects]
            if names == ["repo"] and fleet.projects["repo"].target.kind == "workflow":
                break
        assert [(p.name, p.target.kind) for p in fleet.projects.values()] == [("repo", "workflow")]
    finally:
        await fleet.close()
        runner.cancel()


def test_ssh_discovery_reads_each_scheduler_s_tokens(tmp_path, monkeypatch):
    from symphony_tui.api import announce
    from symphony_tui.api.auth import write_control_token

    # an "ssh" that runs its command line here, as sshd would: the discovery script is tested
    fake = tmp_path / "fake-ssh"
    fake.write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')  # as sshd: one command line
    fake.chmod(0o755)
    monkeypatch.setenv("SYMPHONY_SSH", str(fake))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    notes = announce.default_dir()
    control = write_control_token(notes, "the-control")
    token = announce.write_token(notes, "the-bearer")
    announce.write(
        notes,
        host="127.0.0.1",
        port=4242,
        token=True,
        control_file=control,
        extra={"workflow": "/src/app/WORKFLOW.md", "token_file": str(token)},
    )
    [endpoint] = tg.ssh_endpoints(tg.parse("ssh://me@box").ssh)  # type: ignore[arg-type]
    assert (endpoint.api_port, endpoint.token, endpoint.control) == (
        4242,
        "the-bearer",
        "the-control",
    )
    assert endpoint.folder_name == "app" and endpoint.url is None


async def test_a_scheduler_announced_after_the_fleet_started_gets_a_row(tmp_path, monkeypatch):
    from symphony_tui.api import announce

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    fleet = FleetPort([tg.parse("local")], local_every_s=0.05)
    runner = asyncio.create_task(fleet.run())
    try:
        await asyncio.sleep(0.2)
        assert fleet.snapshot().projects == ()
        workflow = tmp_path / "late" / "WORKFLOW.md"
        # this process stands for a scheduler serving on a closed port
        note = announce.write(
            announce.default_dir(),
            host="127.0.0.1",
            port=free_port(),
            token=False,
            extra={"workflow": str(workflow)},
        )
        for _ in range(100):
            await asyncio.sleep(0.05)
            if fleet.snapshot().projects:
                break
        assert [r.name for r in fleet.snapshot().projects] == ["late"]
        # its API is gone, and this fleet never heard from it: nothing is known to run there
        announce.remove(note)
        for _ in range(200):
            await asyncio.sleep(0.05)
            if "no longer serves" in (fleet.snapshot().projects[0].error or ""):
                break
        row = fleet.snapshot().projects[0]
        assert (row.link_state, row.heard) == ("down", False)
        assert (
            row.error
            == f"its scheduler (pid {os.getpid()}) no longer serves; this fleet never heard from it"
        )
    finally:
        await fleet.close()
        runner.cancel()


class _OneFrameScheduler:
    """An API on 127.0.0.1 whose stream sends its snapshot and then says it stops."""

    def __init__(self, port: int, issue: str) -> None:
        from aiohttp import web

        self.port, self.issue, self.web = port, issue, web
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        web = self.web

        async def stream(request):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            body = json.dumps({"snapshot": snap(self.issue).model_dump(mode="json"), "version": 1})
            await response.write(f"id: e1:0\nevent: snapshot\ndata: {body}\n\n".encode())
            ending = json.dumps({"at": NOW.isoformat(), "reason": "stopped by test"})
            await response.write(f"event: stopping\ndata: {ending}\n\n".encode())
            return response

        async def state(request):
            return web.json_response({})

        app = web.Application()
        app.router.add_get("/api/v1/stream", stream)
        app.router.add_get("/api/v1/state", state)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_a_url_targets_stopped_scheduler_keeps_its_rows_until_one_answers_there():
    port = free_port()
    server = _OneFrameScheduler(port, "i1")
    await server.start()
    fleet = FleetPort([tg.parse(f"http://127.0.0.1:{port}")], local_every_s=0.1)
    runner = asyncio.create_task(fleet.run())

    async def until(check, what: str) -> None:
        for _ in range(200):
            if check():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(what)

    try:
        rows = lambda: fleet.snapshot().projects  # noqa: E731
        await until(lambda: rows() and rows()[0].link_state == "stopped", "stopped")
        await server.stop()
        await asyncio.sleep(0.5)  # several rounds of the target's loop: nothing answers
        assert rows()[0].link_state == "stopped" and rows()[0].stop_reason == "stopped by test"
        assert rows()[0].error is None  # a clean stop is no error
        assert [r.issue_id for r in fleet.snapshot().issues] == [f"127.0.0.1:{port}/i1"]
        server = _OneFrameScheduler(port, "i2")  # a scheduler answers there again
        await server.start()
        await until(
            lambda: [r.issue_id for r in fleet.snapshot().issues] == [f"127.0.0.1:{port}/i2"],
            "the new scheduler's rows",
        )
    finally:
        await fleet.close()
        runner.cancel()
        await server.stop()


def test_the_list_table_is_by_name_and_says_here_for_this_machine():
    from symphony_tui.domain.snapshot import ProjectRow
    from symphony_tui.fleet.cli import table

    rows = (
        ProjectRow(name="web", target="t", link_state="down", error="refused"),
        ProjectRow(name="api", target="t", link_state="live", running=2, machine="build-1"),
        ProjectRow(
            name="ops",
            target="t",
            link_state="stopped",
            age_s=5.0,
            stop_reason="stopped by SIGTERM",
        ),
    )
    lines = table(rows)
    assert [line.split()[:2] for line in lines] == [
        ["PROJECT", "STATE"], ["api", "live"], ["ops", "stopped"], ["web", "down"],
    ]  # fmt: skip
    assert lines[1].split()[5] == "build-1" and lines[3].split()[5] == "here"
    # never heard from: its counts are unknown, not 0; a clean stop says why, as no error
    assert lines[3].split()[2:5] == ["-", "-", "-"] and lines[1].split()[2:5] == ["2", "0", "0"]
    assert lines[2].endswith(" stopped by SIGTERM")


# -- one scheduler, one project ------------------------------------------------------------

WEB = "/src/web/WORKFLOW.md"
API = "/src/api/WORKFLOW.md"


def started(issue: str, at: datetime = NOW, workflow: str = WEB) -> Snapshot:
    """A snapshot of the scheduler process started at ``at`` running ``workflow``."""
    return snap(issue).model_copy(update={"started_at": at, "workflow_path": workflow})


def following(fleet: FleetPort, target: tg.Target, pid: int | None = None) -> Project:
    """``target``'s project (one of ``fleet``'s targets), its port fed by hand."""
    project = fleet._project(target, target.text, "x")
    client = httpx.AsyncClient(
        base_url="http://127.0.0.1:1", transport=httpx.MockTransport(_refuse)
    )
    project.endpoint = tg.Endpoint(target.text, "", "http://127.0.0.1:1", 1, pid=pid)
    project.port = fleet.remote_port(project, "http://127.0.0.1:1", project.endpoint, client)
    return project


def logged(fleet: FleetPort) -> list[tuple[str | None, str]]:
    return [(e.project, e.message) for e in fleet.events_since(0)]


def test_a_target_names_the_scheduler_of_its_workflow_or_of_its_address():
    from symphony_tui.fleet.identity import designates

    def here(port: int, workflow: str = WEB, host: str = "127.0.0.1") -> tg.Endpoint:
        where = f"[{host}]" if ":" in host else host
        return tg.Endpoint(workflow, workflow, f"http://{where}:{port}", port, pid=4242)

    workflow = tg.Target("workflow", WEB, "webf")
    assert designates(workflow, here(45895))
    assert not designates(workflow, here(45895, API))
    assert not designates(workflow, here(45895, ""))
    for url in ("http://127.0.0.1:45895", "http://localhost:45895", "http://127.0.0.1:045895"):
        assert designates(tg.parse(url), here(45895)), url
    assert not designates(tg.parse("http://127.0.0.1:45896"), here(45895))
    # another address of this machine: the scheduler that announces that address
    lan = tg.parse("http://10.0.0.7:8080")
    assert designates(lan, here(8080, host="10.0.0.7"))
    assert not designates(lan, here(8080))
    assert designates(tg.parse("http://[0:0::1]:8080"), here(8080, host="::1"))
    for catch_all in (tg.parse("local"), tg.parse("ssh://me@box")):
        assert not designates(catch_all, here(45895))


async def test_local_leaves_a_named_scheduler_started_again_to_its_target(monkeypatch):
    """``~/web name=webf`` beside ``local``: the scheduler killed and started again (a
    new pid, a new port) before the named target looked again is not local's ``web``,
    whichever finds it first; one local had taken is dropped."""
    workflow = tg.Target("workflow", WEB, "webf")
    url = tg.Target("url", "http://localhost:7001", "webu")
    local = tg.parse("local")
    fleet = FleetPort([local, workflow, url], local_every_s=0.01)

    def here(workflow: str, port: int, pid: int) -> tg.Endpoint:
        return tg.Endpoint(workflow, workflow, f"http://127.0.0.1:{port}", port, pid=pid)

    found = [here(WEB, 7000, 100), here(API, 7001, 101)]
    looks = 0

    def local_endpoints() -> list[tg.Endpoint]:
        nonlocal looks
        looks += 1
        return list(found)

    monkeypatch.setattr(tg, "local_endpoints", local_endpoints)
    monkeypatch.setattr(tg, "workflow_endpoint", lambda path: found[0])
    monkeypatch.setattr(tg, "url_endpoint", lambda target: found[1])

    def remote_port(project, address, endpoint, client=None):  # never answers
        refusing = httpx.AsyncClient(base_url=address, transport=httpx.MockTransport(_refuse))
        return FleetPort.remote_port(fleet, project, address, endpoint, refusing)

    monkeypatch.setattr(fleet, "remote_port", remote_port)
    # local took the api scheduler before its URL target had it
    early = fleet._project(local, found[1].key, "api", workflow=found[1].workflow_path)
    await fleet._connect(early, found[1])
    runner = asyncio.create_task(fleet.run())

    async def rounds() -> None:  # local looks three times more (after its targets' first)
        more = looks + 3
        for _ in range(1000):
            if looks >= more:
                return
            await asyncio.sleep(0.01)

    try:
        await rounds()
        assert [(p.name, p.target.kind) for p in fleet.projects.values()] == [
            ("webf", "workflow"), ("webu", "url"),
        ]  # fmt: skip
        assert fleet.projects["webf"].endpoint == found[0]
        # both killed and started again: local finds the new processes first (their
        # targets' ports, never answered, still hold the old pids)
        found[:] = [here(WEB, 7002, 200), here(API, 7001, 201)]
        await rounds()
        assert [p.name for p in fleet.projects.values()] == ["webf", "webu"]
        assert fleet.projects["webf"].endpoint is not None
        assert fleet.projects["webf"].endpoint.pid == 100  # not looked up again yet
    finally:
        await fleet.close()
        runner.cancel()


async def test_one_scheduler_written_two_ways_is_one_project_the_first_line_s():
    """``http://localhost:P`` on line 2 and ``http://127.0.0.1:P`` on line 3 reach one
    process: the panes, counts and log have it once, under line 2's project; line 3's
    row says so and shows nothing; a command for it is not sent."""
    first = dataclasses.replace(tg.parse("http://localhost:45895"), line=2)
    second = dataclasses.replace(tg.parse("http://127.0.0.1:45895"), line=3)
    fleet = FleetPort([tg.parse("local"), first, second])
    one, two = following(fleet, first), following(fleet, second)
    try:
        feed(two, started("i1"))
        feed(one, started("i1"))
        events(one, event(1, message="a"), event(2, message="b"))
        events(two, event(1, message="a"), event(2, message="b"))
        merged = fleet.snapshot()
        rows = {r.name: r for r in merged.projects}
        assert rows["localhost:45895"].link_state == "live"
        dup = rows["127.0.0.1:45895"]
        assert (dup.link_state, dup.error) == (
            "duplicate", "the same scheduler as line 2 (localhost:45895): shown there only",
        )  # fmt: skip
        assert _counts(dup) == (0, 0, 0) and not dup.heard
        assert [a.id for a in merged.approvals] == ["localhost:45895/i1:7"]
        assert len(merged.running) == len(merged.issues) == 1
        assert merged.max_concurrent_agents == 3
        assert logged(fleet) == [("localhost:45895", "a"), ("localhost:45895", "b")]
        refused = await fleet.send(PauseDispatch(project="127.0.0.1:45895"))
        assert not refused.ok and refused.message == (
            "127.0.0.1:45895: the same scheduler as line 2 (localhost:45895): "
            "shown there only: not sent"
        )
        # its address now reaches another process: its own project again
        feed(two, started("i2", at=NOW + timedelta(seconds=5)), reset=True)
        events(two, event(1, message="c"))
        rows = {r.name: r for r in fleet.snapshot().projects}
        assert rows["127.0.0.1:45895"].link_state == "live"
        assert {a.id for a in fleet.snapshot().approvals} == {
            "localhost:45895/i1:7", "127.0.0.1:45895/i2:7",
        }  # fmt: skip
        assert logged(fleet)[-1] == ("127.0.0.1:45895", "c")
    finally:
        await fleet.close()


async def test_the_first_line_keeps_a_scheduler_the_second_reached_first_without_repeats():
    """The workflow on line 1 and its URL on line 2: the URL's project heard first and
    logged the history; once line 1's hears the same process, line 2's is the duplicate
    and line 1's logs only what came after."""
    workflow = dataclasses.replace(tg.Target("workflow", WEB), line=1)
    url = dataclasses.replace(tg.parse("http://127.0.0.1:45895"), line=2)
    fleet = FleetPort([workflow, url])
    one, two = following(fleet, workflow, pid=4242), following(fleet, url, pid=4242)
    try:
        feed(two, started("i1"))
        events(two, event(1, message="a"), event(2, message="b"))
        rows = {r.name: r for r in fleet.snapshot().projects}
        assert (rows["web"].link_state, rows["127.0.0.1:45895"].link_state) == (
            "connecting", "live",
        )  # fmt: skip
        feed(one, started("i1"))
        events(one, event(1, message="a"), event(2, message="b"), event(3, message="c"))
        events(two, event(3, message="c"))
        rows = {r.name: r for r in fleet.snapshot().projects}
        assert (rows["web"].link_state, rows["127.0.0.1:45895"].link_state) == (
            "live", "duplicate",
        )  # fmt: skip
        said = logged(fleet)
        assert [m for _p, m in said] == ["a", "b", "c"]
        assert said[-1] == ("web", "c")
        assert [a.id for a in fleet.snapshot().approvals] == ["web/i1:7"]
    finally:
        await fleet.close()


async def test_a_scheduler_local_found_that_a_named_project_shows_is_dropped(monkeypatch):
    """A URL on another address of this machine reaches what local found: local's
    project is dropped and not taken again while that process is the URL's."""
    url = dataclasses.replace(tg.parse("http://10.0.0.7:45895"), line=1)
    local = tg.parse("local")
    fleet = FleetPort([local, url])
    named = following(fleet, url)
    here = tg.Endpoint(WEB, WEB, "http://127.0.0.1:45895", 45895, pid=4242)
    found = fleet._project(local, here.key, "web", workflow=WEB)
    client = httpx.AsyncClient(base_url="http://127.0.0.1:1", transport=httpx.MockTransport(_refuse))  # fmt: skip
    found.endpoint = here
    found.port = fleet.remote_port(found, "http://127.0.0.1:1", here, client)
    try:
        feed(found, started("i1"))
        events(found, event(1, message="a"))
        feed(named, started("i1"))
        events(named, event(1, message="a"), event(2, message="b"))
        assert [r.name for r in fleet.snapshot().projects] == ["10.0.0.7:45895"]
        assert logged(fleet) == [("web", "a"), ("10.0.0.7:45895", "b")]
        assert fleet._shown_elsewhere(local, here)
        assert not fleet._shown_elsewhere(local, dataclasses.replace(here, pid=4343))
    finally:
        await fleet.close()
    assert found.port is None  # closed with the fleet


async def test_a_url_target_followed_before_its_note_names_it_learns_its_process(
    monkeypatch, tmp_path
):
    """A loopback URL target whose scheduler answered before its API note was written
    (started again on its port): once the note names its process, its port watches that
    process, so its end reads as that process gone, not as a link that is down (``down``
    all the same: this fleet never heard from it, so nothing is known to run there)."""
    import os

    from symphony_tui.api.announce import Owner

    port = free_port()  # nothing answers there
    target = tg.parse(f"http://127.0.0.1:{port}")
    fleet = FleetPort([target], local_every_s=0.01)
    first = tg.Endpoint(target.text, "", target.text, port)
    answers = [first]
    monkeypatch.setattr(tg, "url_endpoint", lambda t: answers[-1])

    def remote_port(project, address, endpoint, client=None):  # never answers
        refusing = httpx.AsyncClient(base_url=address, transport=httpx.MockTransport(_refuse))
        return FleetPort.remote_port(fleet, project, address, endpoint, refusing)

    monkeypatch.setattr(fleet, "remote_port", remote_port)
    runner = asyncio.create_task(fleet.run())

    try:
        name = f"127.0.0.1:{port}"
        for _ in range(500):  # its first connection refused
            if name in fleet.projects and fleet.projects[name].state()[0] == "down":
                break
            await asyncio.sleep(0.01)
        project = fleet.projects[name]
        followed = project.port
        assert followed is not None and project.state()[0] == "down"
        # its note, written now, names a process that no longer serves (its note is gone)
        owner = Owner(os.getpid(), tmp_path / "gone.json")
        answers.append(dataclasses.replace(first, pid=os.getpid(), owner=owner))
        for _ in range(500):
            if project.endpoint is not None and project.endpoint.pid is not None:
                break
            await asyncio.sleep(0.01)
        assert project.port is followed  # the same port: nothing read again
        assert project.endpoint is not None and project.endpoint.pid == os.getpid()
        assert project.state() == (
            "down",
            None,
            f"its scheduler (pid {os.getpid()}) no longer serves; this fleet never heard from it",
        )
    finally:
        await fleet.close()
        runner.cancel()
